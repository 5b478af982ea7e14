"""Misuses of the real writer (``hub_remote.writer``, ``server_fleet.explore_writer``, the
``--startup-guard-writer-pair`` option), as data for test_misuse.py."""

from __future__ import annotations

from misuse_cases import FLEET, Misuse, _env, _fixture, _option

READERS = "[PY, '-c', 'print(\"up\", flush=True)'], ready=ready.log('up')"
REMOTE = ("hub_remote",)
RELEASES = "__import__('pathlib').Path(sys.prefix) / 'hub-releases'"

CASES: list[Misuse] = [
    _option(
        "writer_pair_no_colon",
        "--startup-guard-writer-pair=3",
        "--startup-guard-writer-pair '3'",
        "STEP:POINT",
    ),
    _option(
        "writer_pair_zero_step",
        "--startup-guard-writer-pair=0:1",
        "--startup-guard-writer-pair '0:1'",
        ">= 1",
    ),
    _env(
        "writer_pair_env_words",
        "STARTUP_GUARD_WRITER_PAIR=two:one",
        "STARTUP_GUARD_WRITER_PAIR 'two:one'",
        "writer step",
    ),
    _fixture(
        "explore_writer_missing_program",
        f"server_fleet.explore_writer(['/no/such/writer'], {READERS})",
        FLEET,
        "writer=['/no/such/writer']",
        "not a program",
    ),
    _fixture(
        "explore_writer_cache_text",
        f"server_fleet.explore_writer([PY, '-c', 'pass'], {READERS}, cache='cache')",
        FLEET,
        "cache='cache'",
        "a FakeHubCache",
    ),
    _fixture(
        "explore_writer_not_a_command",
        f"server_fleet.explore_writer(42, {READERS})",
        FLEET,
        "writer=42",
        "hub_remote.writer",
    ),
    _fixture(
        "explore_writer_pair_step_zero",
        f"server_fleet.explore_writer([PY, '-c', 'pass'], {READERS}, pairs=[(0, 1)])",
        FLEET,
        "pairs[0][0] (step)=0",
        "explore_writer()",
    ),
    _fixture(
        "explore_writer_pairs_not_tuples",
        f"server_fleet.explore_writer([PY, '-c', 'pass'], {READERS}, pairs=['3:1'])",
        FLEET,
        "pairs[0]='3:1'",
        "(step, point)",
    ),
    _fixture(
        "explore_writer_plain_argv_without_cache",
        f"server_fleet.explore_writer([PY, '-c', 'pass'], {READERS})",
        ("server_fleet",),
        "needs the cache it writes",
        "cache=hub_remote.cache",
    ),
    _fixture(
        "writer_unknown_call",
        "hub_remote.writer('acme/tiny', call='download')",
        REMOTE,
        "call='download'",
        "'snapshot_download', 'hf_hub_download'",
    ),
    _fixture(
        "writer_hf_hub_download_without_file",
        "hub_remote.writer('acme/tiny', call='hf_hub_download')",
        REMOTE,
        "filename=None",
        "hub_remote.writer()",
    ),
    _fixture(
        "writer_release_without_huggingface_hub",
        "hub_remote.writer('acme/tiny', release=tmp_path)",
        REMOTE,
        "release=",
        "holds no huggingface_hub",
    ),
    _fixture(
        "writer_release_missing",
        f"hub_remote.writer('acme/tiny', release={RELEASES} / '0.0.1')",
        REMOTE,
        "release=",
        "no such folder",
    ),
]

"""Generated misuses of what a fake repo is built from (its content, its file names, its
revision and repo id, on the fake cache and on the loopback hub) and of the ``startup_races``
marker's values; see misuse_generated.py for how each is judged."""

from __future__ import annotations

import functools
import json
import math
import string
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from misuse_generated import Family

from pytest_startup_guard.cache.hubcache import FakeHubCache
from pytest_startup_guard.races.catalog import RACES
from pytest_startup_guard.remote.repos import RemoteRepos
from pytest_startup_guard.verdicts.cases import cases_from_marker

# -- strict JSON, and values that are not -------------------------------------------------------

SAFE_TEXT = st.text(string.ascii_letters + string.digits + "_-. ", max_size=8)
JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    SAFE_TEXT,
)
VALID_JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(SAFE_TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)
NOT_JSON_VALUE = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.builds(object),
    st.sets(st.integers(0, 9), max_size=3),
    st.frozensets(SAFE_TEXT, max_size=2),
    st.binary(max_size=4),
    st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
    st.just(Ellipsis),
    st.builds(Path, SAFE_TEXT),
    st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2),  # lone surrogates
)
NOT_STRING_KEY = st.one_of(
    st.integers(-9, 9), st.floats(allow_nan=False), st.none(), st.booleans(), st.tuples(SAFE_TEXT)
)


def _in_list(parts: tuple[list[Any], Any, list[Any]]) -> list[Any]:
    before, bad, after = parts
    return [*before, bad, *after]


def _in_dict(parts: tuple[dict[str, Any], str, Any]) -> dict[str, Any]:
    around, key, bad = parts
    return {**around, key: bad}


def _with_bad_key(parts: tuple[dict[str, Any], Any, Any]) -> dict[Any, Any]:
    around, key, value = parts
    return {**around, key: value}


def _containing(bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A dict or list with ``bad`` somewhere inside it, among strict JSON values."""
    return st.recursive(
        bad,
        lambda inner: st.one_of(
            st.tuples(
                st.lists(VALID_JSON, max_size=2), inner, st.lists(VALID_JSON, max_size=2)
            ).map(_in_list),
            st.tuples(st.dictionaries(SAFE_TEXT, VALID_JSON, max_size=2), SAFE_TEXT, inner).map(
                _in_dict
            ),
        ),
        max_leaves=4,
    ).filter(lambda value: isinstance(value, (dict, list)))


def _cycle(parts: tuple[dict[str, Any], str]) -> dict[str, Any]:
    value, key = parts
    value[key] = [value]
    return value


def _nested(depth: int) -> list[Any]:
    return functools.reduce(lambda inner, _: [inner], range(depth), [])


NOT_STRICT_JSON = st.one_of(
    _containing(NOT_JSON_VALUE),
    _containing(
        st.tuples(
            st.dictionaries(SAFE_TEXT, VALID_JSON, max_size=2), NOT_STRING_KEY, VALID_JSON
        ).map(_with_bad_key)
    ),
    st.tuples(st.dictionaries(SAFE_TEXT, VALID_JSON, max_size=2), SAFE_TEXT).map(_cycle),
    st.integers(101, 5000).map(_nested),
)
FILENAMES = st.sampled_from(["config.json", "tokenizer_config.json", "sub/generation.json"])


def _add_to_cache(files: dict[Any, Any], folder: Path, revision: Any = "main") -> object:
    return FakeHubCache(folder / "cache").add_model("org/generated", files, revision)


def _add_to_remote(files: dict[Any, Any], folder: Path, revision: Any = "main") -> object:
    return RemoteRepos().add_model("acme/generated", files, revision, "hub_remote.add_model()")


def _read_back(files: dict[Any, Any], folder: Path) -> None:
    """What a server does next: read every JSON file of the repo, strictly."""
    repo = FakeHubCache(folder / "cache").repo("org/generated")
    for name in repo.files:
        if name.endswith(".json"):
            json.loads(repo.pointer(name).read_text(), parse_constant=_refuse_constant)


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# -- names a file system, git and the hub refuse ------------------------------------------------

NAME_CORE = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=6)


def _inserted(parts: tuple[str, int, str]) -> str:
    core, at, bad = parts
    at %= len(core) + 1
    return core[:at] + bad + core[at:]


def _with_bad(bad: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(NAME_CORE, st.integers(0, 8), bad).map(_inserted)


CONTROL = st.characters(min_codepoint=0, max_codepoint=31) | st.just("\x7f")
LONG_PART = st.one_of(
    st.integers(256, 600).map(lambda n: "a" * n),
    st.integers(128, 300).map(lambda n: "é" * n),  # two bytes each in UTF-8
    st.integers(64, 150).map(lambda n: "😀" * n),  # four
)
BAD_FILENAME = st.one_of(
    _with_bad(CONTROL),
    _with_bad(st.text(st.characters(categories=["Cs"]), min_size=1, max_size=1)),
    st.tuples(NAME_CORE, LONG_PART).map(lambda parts: f"{parts[0]}/{parts[1]}"),
    st.tuples(NAME_CORE, st.sampled_from(["..", "."])).map(lambda p: f"{p[0]}/{p[1]}/x.json"),
    NAME_CORE.map(lambda name: f"/{name}"),
    _with_bad(st.just("\\")),
    st.just(""),
    st.one_of(
        st.integers(), st.none(), st.binary(min_size=1, max_size=4), st.builds(Path, NAME_CORE)
    ),
)
# A file and a folder of one name, or one file named twice.
CLASHING_FILES = st.one_of(
    st.tuples(NAME_CORE, NAME_CORE).map(lambda p: {p[0]: "1", f"{p[0]}/{p[1]}": "2"}),
    st.tuples(NAME_CORE, NAME_CORE).map(lambda p: {f"{p[0]}/{p[1]}": "1", f"{p[0]}//{p[1]}": "2"}),
)
BAD_REVISION = st.one_of(
    _with_bad(st.sampled_from(list("/ ~^:?*[\\")) | CONTROL),
    _with_bad(st.sampled_from(["..", "@{"])),
    NAME_CORE.map(lambda name: "." + name),
    NAME_CORE.map(lambda name: "-" + name),
    NAME_CORE.map(lambda name: name + "."),
    NAME_CORE.map(lambda name: name + ".lock"),
    LONG_PART,
    st.just(""),
    st.one_of(st.integers(), st.none(), st.binary(max_size=3)),
)


def _named(value: Any) -> list[str]:
    return [repr(value)]


# -- the startup_races marker's values ----------------------------------------------------------

WHERE = "@pytest.mark.startup_races of test_generated.py::test_x"
NOT_A_NAME = st.one_of(
    st.lists(st.sampled_from(sorted(RACES)), min_size=0, max_size=2),
    st.sets(st.sampled_from(sorted(RACES)), max_size=2),
    st.dictionaries(SAFE_TEXT, st.integers(), max_size=2),
    st.none(),
    st.integers(),
    st.floats(),
    st.binary(max_size=3),
    SAFE_TEXT.map(lambda text: f"no-such-{text}"),  # in no catalog, and never 'all'
)
KINDS = st.sampled_from(["transient", "corrupt", "stale", "rebuild"])


def _names_with_bad(parts: tuple[str, list[str], Any, list[str]]) -> dict[str, object]:
    kind, before, bad, after = parts
    return {kind: [*before, bad, *after]}


NAMES = st.lists(st.sampled_from(["pointer_swap", "ref_rewrite"]), max_size=2)
BAD_MARKER = st.one_of(
    st.tuples(KINDS, NAMES, NOT_A_NAME, NAMES).map(_names_with_bad),
    st.tuples(KINDS, NOT_A_NAME.filter(lambda v: not isinstance(v, list))).map(
        lambda p: {p[0]: p[1]}
    ),
    st.tuples(
        st.sampled_from(["hold", "trigger", "explore"]),
        st.one_of(
            st.sampled_from([math.nan, math.inf, -1.0, "yes", [1], {}, object()]),
            st.lists(st.integers(), min_size=1, max_size=2),
        ),
    ).map(lambda p: {"transient": ["pointer_swap"], p[0]: p[1]}),
)

FAMILIES = [
    Family(
        "hub_cache.add_model(content)",
        st.tuples(FILENAMES, NOT_STRICT_JSON),
        lambda v, folder: _add_to_cache({v[0]: v[1]}, folder),
        lambda v: [repr(v[0]), "strict JSON"],
        after=lambda v, folder: _read_back({v[0]: v[1]}, folder),
    ),
    Family(
        "hub_cache.add_model(file names)",
        BAD_FILENAME,
        lambda name, folder: _add_to_cache({name: "1"}, folder),
        _named,
    ),
    Family(
        "hub_cache.add_model(a file and a folder)",
        CLASHING_FILES,
        lambda files, folder: _add_to_cache(files, folder),
        lambda files: [repr(name) for name in files],
    ),
    Family(
        "hub_cache.add_model(revision)",
        BAD_REVISION,
        lambda revision, folder: _add_to_cache({"config.json": {}}, folder, revision),
        _named,
    ),
    Family(
        "hub_remote.add_model(content)",
        st.tuples(FILENAMES, NOT_STRICT_JSON),
        lambda v, folder: _add_to_remote({v[0]: v[1]}, folder),
        lambda v: [repr(v[0]), "hub_remote.add_model()"],
    ),
    Family(
        "hub_remote.add_model(file names)",
        st.one_of(BAD_FILENAME.map(lambda name: {name: "1"}), CLASHING_FILES),
        lambda files, folder: _add_to_remote(files, folder),
        lambda files: ["hub_remote.add_model()"],
    ),
    Family(
        "@pytest.mark.startup_races(values)",
        BAD_MARKER,
        lambda kwargs, folder: cases_from_marker((), kwargs, WHERE),
        lambda kwargs: [WHERE],
    ),
]

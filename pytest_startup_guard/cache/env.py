"""Point the test process at a fake cache, and put everything back afterwards.

huggingface_hub (and transformers, datasets) read their cache paths and offline flags from the
environment once, at import. Setting ``os.environ`` is enough for modules imported later; for
modules already imported, their module-level constants are rewritten in place. On restore both
are undone, including constants of modules that were first imported during the test (they were
computed from the fake environment). ``outer_environ`` tells what the environment was before
the fake caches in force were applied: where the user's own cache is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

# Libraries whose module constants cache hub paths or offline flags.
_LIBRARIES = ("huggingface_hub", "transformers", "datasets", "diffusers")
# The same, for a warm template's judge (``fleet/warm/equivalence.py``): the packages whose
# constants ``repoint_libraries`` points at a forked member's cache.
REPOINTED_LIBRARIES = _LIBRARIES
# Module-level booleans that must be True while the fake cache is in use.
_OFFLINE_FLAGS = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DISABLE_UPDATE_CHECK",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN",
    "_is_offline_mode",
)
_TRUE = ("1", "ON", "YES", "TRUE")


def _is_true(value: str | None) -> bool:
    return value is not None and value.upper() in _TRUE


def _expand(path: str) -> str:
    return os.path.expandvars(os.path.expanduser(path))


def hub_paths(environ: Mapping[str, str]) -> dict[str, str]:
    """The folders huggingface_hub would use under ``environ`` (constants.py's rules)."""
    default_home = os.path.join(os.path.expanduser("~"), ".cache")
    home = _expand(
        environ.get(
            "HF_HOME", os.path.join(environ.get("XDG_CACHE_HOME", default_home), "huggingface")
        )
    )
    hub = _expand(
        environ.get("HF_HUB_CACHE", environ.get("HUGGINGFACE_HUB_CACHE", os.path.join(home, "hub")))
    )
    return {"HF_HOME": home, "HF_HUB_CACHE": hub}


def offline_flags(environ: Mapping[str, str]) -> dict[str, bool]:
    offline = _is_true(environ.get("HF_HUB_OFFLINE") or environ.get("TRANSFORMERS_OFFLINE"))
    return {
        "HF_HUB_OFFLINE": offline,
        "_is_offline_mode": offline,
        "HF_DATASETS_OFFLINE": _is_true(environ.get("HF_DATASETS_OFFLINE")) or offline,
        "HF_HUB_DISABLE_TELEMETRY": any(
            _is_true(environ.get(name))
            for name in ("HF_HUB_DISABLE_TELEMETRY", "DISABLE_TELEMETRY", "DO_NOT_TRACK")
        ),
        "HF_HUB_DISABLE_UPDATE_CHECK": _is_true(environ.get("HF_HUB_DISABLE_UPDATE_CHECK")),
        "HF_HUB_DISABLE_IMPLICIT_TOKEN": _is_true(environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN")),
    }


def _library_modules() -> list[ModuleType]:
    modules = []
    for name, module in list(sys.modules.items()):
        if module is not None and name.split(".", 1)[0] in _LIBRARIES:
            modules.append(module)
    return modules


def _remap(value: str, prefixes: list[tuple[str, str]]) -> str | None:
    for old, new in prefixes:
        if value == old or value.startswith(old + os.sep):
            return new + value[len(old) :]
    return None


# huggingface_hub's default endpoint, what ``constants.ENDPOINT`` is without ``HF_ENDPOINT``.
DEFAULT_ENDPOINT = "https://huggingface.co"


def _endpoint(environ: Mapping[str, str]) -> str:
    return (environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _prefix_pairs(source: Mapping[str, str], target: Mapping[str, str]) -> list[tuple[str, str]]:
    pairs = [(source[key], target[key]) for key in ("HF_HUB_CACHE", "HF_HOME")]
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)  # longest prefix first


def _endpoint_pairs(source: Mapping[str, str], target: Mapping[str, str]) -> list[tuple[str, str]]:
    """The endpoint to rewrite in URL constants (``ENDPOINT``, ``HUGGINGFACE_CO_URL_TEMPLATE``),
    where the env names one (a loopback hub's ``HF_ENDPOINT``)."""
    old, new = _endpoint(source), _endpoint(target)
    return [] if old == new else [(old, new)]


# The environments in force, in the order they were applied (the hub_cache fixture's).
_APPLIED: list[HubEnvironment] = []


def outer_environ() -> dict[str, str]:
    """``os.environ`` without the fake caches' env now in force: the user's own hub settings.

    A variable the test set again after a fake cache's env was applied is the test's own and
    is kept.
    """
    environ = dict(os.environ)
    for applied in reversed(_APPLIED):
        for key, saved in applied._saved_environ.items():
            if environ.get(key) != applied.env[key]:
                continue
            if saved is None:
                environ.pop(key, None)
            else:
                environ[key] = saved
    return environ


class HubEnvironment:
    """Apply a fake cache's env to ``os.environ`` and to already imported libraries."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self._saved_environ: dict[str, str | None] = {}
        self._saved_attributes: list[tuple[object, str, object]] = []
        self._modules_before: set[int] = set()
        self._applied = False

    def apply(self) -> None:
        if self._applied:
            return
        original = dict(os.environ)
        self._saved_environ = {key: original.get(key) for key in self.env}
        os.environ.update(self.env)
        modules = _library_modules()
        self._modules_before = {id(module) for module in modules}
        _repoint(
            modules,
            original,
            self.env,
            endpoint="HF_ENDPOINT" in self.env,
            saved=self._saved_attributes,
        )
        self._applied = True
        _APPLIED.append(self)

    @contextmanager
    def applied(self) -> Iterator[None]:
        """``apply()`` for the ``with`` block, ``restore()`` after it, whatever happens."""
        self.apply()
        try:
            yield
        finally:
            self.restore()

    def restore(self) -> None:
        if not self._applied:
            return
        if self in _APPLIED:
            _APPLIED.remove(self)
        fake = dict(os.environ)
        for key, saved in self._saved_environ.items():
            if saved is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = saved
        for module, attribute, original in reversed(self._saved_attributes):
            setattr(module, attribute, original)
        # Modules first imported during the test computed their constants from the fake env.
        new = [m for m in _library_modules() if id(m) not in self._modules_before]
        _repoint(new, fake, os.environ, endpoint="HF_ENDPOINT" in self.env, saved=None)
        self._saved_attributes.clear()
        self._applied = False


def repoint_libraries(source: Mapping[str, str], target: Mapping[str, str]) -> None:
    """Point the already imported libraries' constants computed under the environment
    ``source`` at ``target``: cache paths, offline flags, the endpoint (a member forked from a
    warm template, ``fleet/warm/template.py``, whose imports ran under the template's env)."""
    _repoint(_library_modules(), source, target, endpoint=True, saved=None)


# (owner, attribute, value before): what ``_repoint`` changed, to put back
_Saved = list[tuple[object, str, object]]


def _repoint(
    modules: list[ModuleType],
    source: Mapping[str, str],
    target: Mapping[str, str],
    *,
    endpoint: bool,
    saved: _Saved | None,
) -> None:
    """Rewrite the modules' constants computed under ``source`` for ``target``: paths under
    its hub folders, the offline flags, and (``endpoint``) the hub endpoint in URLs. What was
    changed goes to ``saved``, where given."""
    prefixes = _prefix_pairs(hub_paths(source), hub_paths(target))
    if endpoint:
        prefixes += _endpoint_pairs(source, target)
    flags = offline_flags(target)
    for module in modules:
        _rewrite(module, prefixes, flags, saved)


def _rewrite(
    module: ModuleType,
    prefixes: list[tuple[str, str]],
    flags: Mapping[str, bool],
    saved: _Saved | None,
) -> None:
    namespace = vars(module)
    for attribute, value in list(namespace.items()):
        replacement: object
        if type(value).__name__ == "HfApi" and isinstance(getattr(value, "endpoint", 0), str):
            # huggingface_hub's module-level client (``hf_api.api``, behind
            # ``huggingface_hub.model_info``) kept the endpoint of its import.
            _rewrite_endpoint(value, prefixes, saved)
            continue
        if attribute.startswith("_HF_DEFAULT"):
            continue  # the library's own default, which it compares ENDPOINT against
        if isinstance(value, str) and value.startswith((os.sep, "http")):
            remapped = _remap(value, prefixes)
            if remapped is None:
                continue
            replacement = remapped
        elif isinstance(value, bool) and attribute in flags:
            replacement = flags[attribute]
        else:
            continue
        if replacement != value:
            if saved is not None:
                saved.append((module, attribute, value))
            namespace[attribute] = replacement


def _rewrite_endpoint(client: Any, prefixes: list[tuple[str, str]], saved: _Saved | None) -> None:
    endpoint: str = client.endpoint
    remapped = _remap(endpoint, prefixes)
    if remapped is not None and remapped != endpoint:
        if saved is not None:
            saved.append((client, "endpoint", endpoint))
        client.endpoint = remapped

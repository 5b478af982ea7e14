"""Users import the public names from ``pytest_startup_guard``: each imports, each is shown in the
docs, each is typed for ``mypy --strict``, and importing the package itself stays cheap (every
process of a test under a plan imports it at interpreter start).

The one list of the public names is the ``if TYPE_CHECKING:`` block of the package's
``__init__.py``; ``__all__``, ``dir()`` and the lazy imports are read from it.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_startup_guard

ROOT = Path(__file__).resolve().parent.parent
INIT = Path(pytest_startup_guard.__file__).resolve()
PUBLIC = pytest_startup_guard.__all__


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )


def type_checking_block() -> list[ast.stmt]:
    tree = ast.parse(INIT.read_text())
    blocks = [
        node.body
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "__init__.py must have exactly one `if TYPE_CHECKING:` block"
    return blocks[0]


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_imports_from_its_module(name: str) -> None:
    value = getattr(pytest_startup_guard, name)
    assert value is not None
    assert name in dir(pytest_startup_guard)
    if isinstance(value, type) or inspect.isfunction(value):
        assert value.__module__.startswith("pytest_startup_guard."), value


def test_all_is_every_line_of_the_type_checking_block_and_nothing_else() -> None:
    names = []
    for statement in type_checking_block():
        assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
        for alias in statement.names:
            # ``as`` the same name: what mypy --strict takes as an explicit re-export.
            assert alias.asname == alias.name, f"{ast.unparse(statement)}: write `as {alias.name}`"
            names.append(alias.name)
    assert len(names) == len(set(names)), "a public name is listed twice"
    assert sorted(names) == PUBLIC
    star: dict[str, object] = {}
    exec("from pytest_startup_guard import *", star)
    assert sorted(name for name in star if not name.startswith("__")) == PUBLIC
    assert set(PUBLIC) <= set(dir(pytest_startup_guard))


def test_ready_is_the_fleets_readiness_module() -> None:
    from pytest_startup_guard import ready
    from pytest_startup_guard.fleet import ready as fleet_ready

    assert ready is fleet_ready
    assert callable(ready.http)


def test_unknown_public_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'FakeHubCash'"):
        _ = pytest_startup_guard.FakeHubCash  # type: ignore[attr-defined]
    assert not hasattr(pytest_startup_guard, "__wrapped__")


def shown_code(text: str) -> str:
    """The code a Markdown page shows: its fenced blocks and its inline code spans."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    rest = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return "\n".join([*fenced, *re.findall(r"`([^`\n]+)`", rest)])


def test_every_public_name_is_shown_in_the_docs() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    shown = "\n".join(shown_code(page.read_text()) for page in pages)
    missing = [name for name in PUBLIC if not re.search(rf"\b{name}\b", shown)]
    assert not missing, (
        f"public but never shown in README.md or docs/*.md: {missing}; document them, or take "
        "their line out of the TYPE_CHECKING block of __init__.py"
    )


def test_importing_the_package_loads_built_in_modules_only() -> None:
    """No submodule, no ``typing``, no ``ast``: the names are read and imported on first use."""
    loaded = run_python(
        "import json, sys; before = set(sys.modules); import pytest_startup_guard; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    new = set(json.loads(loaded.stdout)) - set(sys.builtin_module_names)
    assert new == {"pytest_startup_guard", "pytest_startup_guard._version"}


def test_a_public_name_imports_only_its_own_module() -> None:
    loaded = run_python(
        "import json, sys; before = set(sys.modules); "
        "from pytest_startup_guard import StartupGuardError; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    ours = {name for name in json.loads(loaded.stdout) if name.startswith("pytest_startup_guard")}
    assert ours == {
        "pytest_startup_guard",
        "pytest_startup_guard._version",
        "pytest_startup_guard.errors",
    }


def test_every_public_name_is_typed_for_mypy_strict(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    user = tmp_path / "user_test.py"
    user.write_text(
        "import pytest_startup_guard\n"
        "from pytest_startup_guard import *\n"
        + "".join(f"reveal_type({name})\n" for name in PUBLIC)
        + "pytest_startup_guard.FakeHubCash\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            user.name,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    revealed = re.findall(r":(\d+): note: Revealed type is \"(.*)\"", result.stdout)
    assert len(revealed) == len(PUBLIC), result.stdout
    untyped = [PUBLIC[int(line) - 3] for line, kind in revealed if kind == "Any"]
    assert not untyped, f"typed Any for mypy: {untyped}"
    # The only error: a misspelt name is one, not Any.
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, result.stdout
    assert 'no attribute "FakeHubCash"' in errors[0]

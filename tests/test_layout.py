"""The package's architecture, read from its imports with ``ast``: data flows one way.

Each sub-package may import only the parts listed on the ``May import:`` line of its
``__init__.py`` docstring (plus the root's ``errors``), and those lines must follow the data
flow (``DATA_FLOW`` below, lowest first). No module import cycle, anywhere in the package,
counting imports inside functions and under ``TYPE_CHECKING`` too: a lazy import that goes
upward is still an upward dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import pytest_startup_guard

PACKAGE = "pytest_startup_guard"
PACKAGE_DIR = Path(pytest_startup_guard.__file__).resolve().parent

# Lowest first. A part may import only parts before it (CONTRIBUTING.md, "How the parts fit":
# cache -> remote -> races -> faults -> fleet -> verdicts -> report; runtime, targets and settings sit
# below them, imports beside).
DATA_FLOW = (
    "targets",
    "settings",
    "runtime",
    "imports",
    "cache",
    "remote",
    "races",
    "faults",
    "fleet",
    "verdicts",
    "report",
)
# Modules at the package root: the pytest-facing top, and what every part may use (``outcomes``:
# the one outcome type of a raced start-up, for the cases, the explorations and the report).
TOP = {"__init__", "plugin", "hooks"}
SHARED = {"errors", "checks", "wording", "outcomes", "lifetimes", "_version"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_DIR.rglob("*.py"))}


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every module of the package that ``path`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from pkg.part import name``: ``name`` is a module when the package has one.
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}: relative import; the package uses absolute imports")
        else:
            continue
        found.update(name for name in names if name in known)
    if path.is_relative_to(PACKAGE_DIR):
        found.discard(module_name(path))
    return found


def part_of(module: str) -> str:
    """``pytest_startup_guard.races.armed`` -> ``races``; a root module -> its own name."""
    return module.split(".")[1] if "." in module else "__init__"


def may_import(part: str) -> set[str]:
    docstring = ast.get_docstring(ast.parse((PACKAGE_DIR / part / "__init__.py").read_text()))
    assert docstring, f"{part}/__init__.py has no docstring saying what it owns"
    line = re.search(r"^May import: (.*)$", docstring, re.MULTILINE)
    assert line, f"{part}/__init__.py: its docstring has no 'May import:' line"
    if line.group(1).startswith("nothing"):
        return set()
    return {name.strip(" .") for name in line.group(1).split(",")}


def test_every_part_is_a_sub_package_and_the_root_holds_only_the_top() -> None:
    parts = {path.parent.name for path in PACKAGE_DIR.glob("*/__init__.py")}
    assert parts == set(DATA_FLOW)
    root = {path.stem for path in PACKAGE_DIR.glob("*.py")}
    assert root == TOP | SHARED


@pytest.mark.parametrize("part", DATA_FLOW)
def test_may_import_lines_follow_the_data_flow(part: str) -> None:
    below = set(DATA_FLOW[: DATA_FLOW.index(part)])
    allowed = may_import(part)
    assert allowed <= set(DATA_FLOW), f"{part}: unknown parts {sorted(allowed - set(DATA_FLOW))}"
    assert allowed <= below, f"{part} may import {sorted(allowed - below)}, above it in the flow"


@pytest.mark.parametrize("part", DATA_FLOW)
def test_each_part_imports_only_what_its_docstring_allows(part: str) -> None:
    modules = package_modules()
    allowed = may_import(part) | {part} | SHARED
    wrong = [
        f"{name} imports {target}"
        for name, path in modules.items()
        if part_of(name) == part
        for target in sorted(imported_modules(path, set(modules)))
        if part_of(target) not in allowed
    ]
    assert not wrong, f"{part} may import only {sorted(allowed)}:\n" + "\n".join(wrong)


def test_shared_modules_import_nothing_but_each_other() -> None:
    """``checks`` raises ``errors``' exceptions; neither reaches into a part."""
    modules = package_modules()
    shared = {f"{PACKAGE}.{name}" for name in SHARED}
    for name in SHARED:
        imported = imported_modules(PACKAGE_DIR / f"{name}.py", set(modules))
        assert imported <= shared, f"{name} imports {sorted(imported - shared)}"


def test_sub_package_inits_import_nothing() -> None:
    """Children import ``runtime`` (and so every ``__init__`` on the way) at interpreter start."""
    for init in PACKAGE_DIR.glob("*/__init__.py"):
        tree = ast.parse(init.read_text())
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not imports, f"{init.relative_to(PACKAGE_DIR)} imports something"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_import_cycle() -> None:
    modules = package_modules()
    known = set(modules)
    # A module's own package __init__ runs first anyway: an edge to it is not a dependency.
    graph = {
        name: {
            target for target in imported_modules(path, known) if not name.startswith(target + ".")
        }
        for name, path in modules.items()
    }
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text(f"def late():\n    from {PACKAGE}.report import record\n")
    known = {f"{PACKAGE}.report", f"{PACKAGE}.report.record"}
    assert imported_modules(module, known) == known
    assert part_of(f"{PACKAGE}.report.record") == "report"

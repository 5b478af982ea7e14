"""A static scan for imports that run in background threads (the incident: docs/imports.md).

``scan_background_imports(path)`` parses every ``.py`` file under ``path`` (a package folder, a
folder of modules, or one file) with ``ast`` only; nothing is imported or run. It finds the
functions started as threads and every import they reach, and reports each as ``file:line``.

What starts a thread (the *entry*):

- ``threading.Thread(target=f)`` (or ``Thread(None, f)``), ``threading.Timer(t, f)``,
  ``_thread.start_new_thread(f, ...)``;
- ``executor.submit(f, ...)`` on any receiver not known to be a process pool;
  ``executor.map(f, ...)`` on a receiver bound in the same file to ``ThreadPoolExecutor(...)``
  or ``ThreadPool(...)`` (``x = ...``, ``self.x = ...``, ``with ... as x``);
- ``loop.run_in_executor(executor, f)`` (not on a known process pool), ``asyncio.to_thread(f)``;
- the ``run`` method of a class whose base is named ``Thread``.

What a target ``f`` may be: a function defined in an enclosing function or at module level, a
method referenced as ``self.m`` or ``cls.m`` (of the enclosing class or a base class in the same
file), a function imported from another scanned module (``from .workers import warm``,
``import pkg.workers as w`` then ``w.warm``), ``functools.partial(f, ...)``, a ``lambda``, or
``importlib.import_module``/``__import__`` itself (with the module as first argument). Targets
it cannot resolve (an attribute of an unknown object, a function outside the scanned files) are
listed in ``ScanReport.unresolved`` rather than guessed.

What an import is: ``import m``, ``from m import x``, ``importlib.import_module("m")``,
``__import__("m")``. From the entry the scan follows calls it can resolve the same way, so an
import in a helper the thread calls is found too, with the chain of calls. Code in nested
``def``s runs only when called and is reached only through calls. Imports of standard library
modules are left out unless ``include_stdlib=True``; ``ignore=`` leaves out more.

Severity: ``error`` when something on the way swallows the import's failure, so that a race
goes unseen: ``suppress(Exception)`` (or ``BaseException``, ``ImportError``,
``AttributeError``), a bare ``except:``, ``except Exception`` (or ``BaseException``,
``ImportError``, ``AttributeError``) whose handler does not raise. ``warning`` otherwise: the
import still races the main thread's, but a failure is at least printed by
``threading.excepthook`` (an exception in an executor job is kept in its ``Future``, unseen
unless someone asks for ``result()``).

Run it from a shell: ``python -m pytest_startup_guard.imports.scan PATH`` (exit 1 on errors).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_startup_guard.checks import flag, texts
from pytest_startup_guard.checks import path as checked_path
from pytest_startup_guard.errors import InvalidArgumentError, StartupGuardError
from pytest_startup_guard.wording import count

ERROR = "error"
WARNING = "warning"
SEVERITIES = (WARNING, ERROR)

_SWALLOWED_TYPES = {
    "Exception": "Exception",
    "BaseException": "BaseException",
    "ImportError": "ImportError",
    "AttributeError": "AttributeError",
}
_IMPORT_FUNCTIONS = {"import_module", "__import__"}
_THREAD_POOLS = {"ThreadPoolExecutor", "ThreadPool"}
_PROCESS_POOLS = {"ProcessPoolExecutor", "Pool"}
_MAX_DEPTH = 12
_SKIPPED_FOLDERS = {"__pycache__", "node_modules", "site-packages"}

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_TRY_NODES: tuple[type[ast.AST], ...] = tuple(
    node for node in (getattr(ast, "Try", None), getattr(ast, "TryStar", None)) if node
)


class ScanError(StartupGuardError, ValueError):
    """The path given to the scan is not a Python file or a folder."""


@dataclass(frozen=True)
class BackgroundImport:
    """One import statement that runs in a background thread."""

    path: str
    line: int
    column: int
    statement: str  # "import transformers", "importlib.import_module('x')"
    module: str  # the module it imports ("" when not a constant)
    entry: str  # the function started as a thread
    how: str  # "threading.Thread(target=...)", "executor.submit(...)", ...
    started_at: str  # "file:line" of the thread start
    chain: tuple[str, ...]  # entry, then each function called on the way to the import
    guard: str | None  # "suppress(Exception)", "bare except", "except Exception", ...
    guard_at: str | None  # "file:line" of the guard
    severity: str  # "error" or "warning"

    def __str__(self) -> str:
        via = " -> ".join(self.chain)
        text = (
            f"{self.path}:{self.line}: {self.severity}: `{self.statement}` runs in a background"
            f" thread ({self.how} at {self.started_at}, via {via})"
        )
        if self.guard:
            text += f" under {self.guard} at {self.guard_at}: a failed import is swallowed"
        return text


@dataclass
class ScanReport:
    """Every background import found under ``root`` (``.findings``), worst first."""

    root: str
    files: int = 0
    findings: list[BackgroundImport] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # "file:line: target `x`"
    unparsed: list[str] = field(default_factory=list)  # "file: SyntaxError ..."

    @property
    def errors(self) -> list[BackgroundImport]:
        return [item for item in self.findings if item.severity == ERROR]

    @property
    def warnings(self) -> list[BackgroundImport]:
        return [item for item in self.findings if item.severity == WARNING]

    def __str__(self) -> str:
        lines = [
            f"background imports under {self.root}: {count(len(self.errors), 'error')},"
            f" {count(len(self.warnings), 'warning')} in {count(self.files, 'file')}"
        ]
        lines += [f"  {item}" for item in self.findings]
        lines += [f"  unresolved thread target: {item}" for item in self.unresolved]
        lines += [f"  not parsed: {item}" for item in self.unparsed]
        return "\n".join(lines)

    def assert_clean(self, severity: str = WARNING) -> None:
        """Fail, listing every finding, if any finding is at least ``severity``."""
        __tracebackhide__ = True
        if severity not in SEVERITIES:
            raise ScanError(f"unknown severity {severity!r}; known: {', '.join(SEVERITIES)}")
        floor = SEVERITIES.index(severity)
        bad = [item for item in self.findings if SEVERITIES.index(item.severity) >= floor]
        if bad or self.unparsed:
            raise AssertionError(f"imports run in background threads\n{self}")


# -- one module ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Guard:
    kind: str
    at: str


@dataclass
class _Module:
    name: str
    path: Path
    display: str
    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    functions: dict[str, FunctionNode] = field(default_factory=dict)  # module level
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imported: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin
    thread_pools: set[str] = field(default_factory=set)  # receivers bound to a thread pool
    process_pools: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, name: str, path: Path, display: str) -> _Module:
        tree = ast.parse(path.read_bytes(), filename=str(path))
        module = cls(name, path, display, tree)
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                module.parents[child] = parent
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                module.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                module.classes[node.name] = node
        for any_node in ast.walk(tree):
            if isinstance(any_node, ast.Import):
                for alias in any_node.names:
                    if alias.asname:
                        module.imported[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        module.imported.setdefault(top, top)
            elif isinstance(any_node, ast.ImportFrom):
                origin = module.absolute(any_node)
                for alias in any_node.names:
                    module.imported[alias.asname or alias.name] = f"{origin}.{alias.name}"
            module.note_pool(any_node)
        return module

    def absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = self.name.split(".")
        if self.path.name != "__init__.py":
            package = package[:-1]
        base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
        return ".".join([*base, *([node.module] if node.module else [])])

    def note_pool(self, node: ast.AST) -> None:
        pairs: list[tuple[ast.expr, ast.expr | None]] = []
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.AnnAssign):
            pairs = [(node.target, node.value)]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            pairs = [
                (item.optional_vars, item.context_expr)
                for item in node.items
                if item.optional_vars is not None
            ]
        for target, value in pairs:
            if isinstance(value, ast.Call):
                kind = _last_name(value.func)
                if kind in _THREAD_POOLS:
                    self.thread_pools.add(ast.unparse(target))
                elif kind in _PROCESS_POOLS:
                    self.process_pools.add(ast.unparse(target))

    def where(self, node: ast.AST) -> str:
        return f"{self.display}:{getattr(node, 'lineno', 0)}"

    def enclosing(self, node: ast.AST) -> Iterator[ast.AST]:
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)


def _last_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


# -- the scan --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    module: _Module
    function: FunctionNode
    label: str


@dataclass(frozen=True)
class _Entry:
    module: _Module
    expression: ast.expr | None  # the target expression (None: a Thread subclass's run)
    call: ast.AST
    how: str
    arguments: Sequence[ast.expr] = ()  # args= of the thread, for an import function target


class _Scanner:
    def __init__(self, modules: dict[str, _Module], include_stdlib: bool, ignore: Sequence[str]):
        self.modules = modules
        self.include_stdlib = include_stdlib
        self.ignore = tuple(ignore)
        self.findings: dict[tuple[str, int, int, str, str], BackgroundImport] = {}
        self.unresolved: list[str] = []

    # -- entries --

    def entries(self, module: _Module) -> Iterator[_Entry]:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef) and any(
                _last_name(base) == "Thread" for base in node.bases
            ):
                yield _Entry(module, None, node, f"{node.name}(Thread).run()")
            if not isinstance(node, ast.Call):
                continue
            name = _last_name(node.func)
            receiver = ast.unparse(node.func.value) if isinstance(node.func, ast.Attribute) else ""
            keywords = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
            args_keyword = keywords.get("args")
            thread_args = (
                list(args_keyword.elts) if isinstance(args_keyword, (ast.Tuple, ast.List)) else []
            )
            if name == "Thread":
                target = keywords.get("target") or _positional(node, 1)
                if target is not None:
                    yield _Entry(module, target, node, "threading.Thread(target=...)", thread_args)
            elif name == "Timer":
                target = keywords.get("function") or _positional(node, 1)
                if target is not None:
                    yield _Entry(module, target, node, "threading.Timer(...)", thread_args)
            elif name in ("start_new_thread", "start_new"):
                target = _positional(node, 0)
                if target is not None:
                    rest = _positional(node, 1)
                    extra = list(rest.elts) if isinstance(rest, (ast.Tuple, ast.List)) else []
                    yield _Entry(module, target, node, "_thread.start_new_thread(...)", extra)
            elif name == "submit" and receiver and receiver not in module.process_pools:
                target = _positional(node, 0)
                if target is not None:
                    yield _Entry(module, target, node, f"{receiver}.submit(...)", node.args[1:])
            elif name == "map" and receiver in module.thread_pools:
                target = _positional(node, 0)
                if target is not None:
                    yield _Entry(module, target, node, f"{receiver}.map(...)")
            elif name == "run_in_executor":
                executor = _positional(node, 0)
                target = _positional(node, 1)
                pool = ast.unparse(executor) if executor is not None else ""
                if target is not None and pool not in module.process_pools:
                    yield _Entry(module, target, node, "loop.run_in_executor(...)", node.args[2:])
            elif name == "to_thread":
                target = _positional(node, 0)
                if target is not None:
                    yield _Entry(module, target, node, "asyncio.to_thread(...)", node.args[1:])

    # -- resolving names to functions --

    def resolve(self, module: _Module, expression: ast.expr, site: ast.AST) -> list[_Target]:
        if isinstance(expression, ast.Lambda):
            return [_Target(module, expression, "<lambda>")]
        if isinstance(expression, ast.Call) and _last_name(expression.func) == "partial":
            first = _positional(expression, 0)
            return self.resolve(module, first, site) if first is not None else []
        if isinstance(expression, ast.Name):
            for scope in module.enclosing(site):
                if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for statement in ast.walk(scope):
                        if (
                            isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and statement is not scope
                            and statement.name == expression.id
                            and module.parents.get(statement) is scope
                        ):
                            return [_Target(module, statement, statement.name)]
            if expression.id in module.functions:
                return [_Target(module, module.functions[expression.id], expression.id)]
            origin = module.imported.get(expression.id)
            return self.from_origin(origin) if origin else []
        if isinstance(expression, ast.Attribute) and isinstance(expression.value, ast.Name):
            owner = expression.value.id
            if owner in ("self", "cls"):
                for scope in module.enclosing(site):
                    if isinstance(scope, ast.ClassDef):
                        return self.method(module, scope, expression.attr)
                return []
            if owner in module.classes:
                return self.method(module, module.classes[owner], expression.attr)
            origin = module.imported.get(owner)
            if origin:
                return self.from_origin(f"{origin}.{expression.attr}")
        return []

    def method(
        self, module: _Module, cls: ast.ClassDef, name: str, depth: int = 0
    ) -> list[_Target]:
        for statement in cls.body:
            if (
                isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
                and statement.name == name
            ):
                return [_Target(module, statement, f"{cls.name}.{name}")]
        if depth < 5:
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id in module.classes:
                    found = self.method(module, module.classes[base.id], name, depth + 1)
                    if found:
                        return found
        return []

    def from_origin(self, origin: str) -> list[_Target]:
        module_name, _, attribute = origin.rpartition(".")
        module = self.modules.get(module_name)
        if module is None or attribute not in module.functions:
            return []
        return [_Target(module, module.functions[attribute], f"{module_name}.{attribute}")]

    # -- walking what a thread runs --

    def scan_entry(self, entry: _Entry) -> None:
        module = entry.module
        started_at = module.where(entry.call)
        if entry.expression is None:
            assert isinstance(entry.call, ast.ClassDef)
            targets = self.method(module, entry.call, "run")
        elif _last_name(entry.expression) in _IMPORT_FUNCTIONS:
            # The thread's target is the import function itself: Thread(target=import_module,
            # args=("transformers",)).
            name = _constant(entry.arguments[0]) if entry.arguments else ""
            label = ast.unparse(entry.expression)
            self.report(
                module, entry.call, f"{label}({name!r})", name, label, entry, started_at, (label,), None
            )  # fmt: skip
            return
        else:
            targets = self.resolve(module, entry.expression, entry.call)
        if not targets:
            if entry.expression is not None:
                self.unresolved.append(
                    f"{started_at}: target `{ast.unparse(entry.expression)}` of {entry.how}"
                )
            return
        for target in targets:
            self.walk(target, entry, started_at, (target.label,), None, set())

    def walk(
        self,
        target: _Target,
        entry: _Entry,
        started_at: str,
        chain: tuple[str, ...],
        outer_guard: _Guard | None,
        visited: set[int],
    ) -> None:
        if id(target.function) in visited or len(chain) > _MAX_DEPTH:
            return
        visited = visited | {id(target.function)}
        module, function = target.module, target.function
        body: list[ast.AST] = (
            [function.body] if isinstance(function, ast.Lambda) else list(function.body)
        )
        for node in _executed_nodes(body):
            guard = _guard_of(module, node, function) or outer_guard
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.report(
                        module, node, f"import {alias.name}", alias.name, target.label, entry,
                        started_at, chain, guard,
                    )  # fmt: skip
            elif isinstance(node, ast.ImportFrom):
                origin = module.absolute(node)
                names = ", ".join(alias.name for alias in node.names)
                statement = f"from {'.' * node.level}{node.module or ''} import {names}"
                self.report(
                    module, node, statement, origin, target.label, entry, started_at, chain, guard
                )  # fmt: skip
            elif isinstance(node, ast.Call):
                if _last_name(node.func) in _IMPORT_FUNCTIONS:
                    name = _constant(node.args[0]) if node.args else ""
                    self.report(
                        module, node, ast.unparse(node), name, target.label, entry, started_at,
                        chain, guard,
                    )  # fmt: skip
                    continue
                for callee in self.resolve(module, node.func, node):
                    self.walk(callee, entry, started_at, (*chain, callee.label), guard, visited)

    def report(
        self,
        module: _Module,
        node: ast.AST,
        statement: str,
        imported: str,
        function: str,
        entry: _Entry,
        started_at: str,
        chain: tuple[str, ...],
        guard: _Guard | None,
    ) -> None:
        top = imported.split(".")[0]
        if not self.include_stdlib and top in sys.stdlib_module_names:
            return
        if any(imported == prefix or imported.startswith(prefix + ".") for prefix in self.ignore):
            return
        line, column = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        key = (module.display, line, column, statement, started_at)
        finding = BackgroundImport(
            path=module.display,
            line=line,
            column=column,
            statement=statement,
            module=imported,
            entry=chain[0],
            how=entry.how,
            started_at=started_at,
            chain=chain,
            guard=guard.kind if guard else None,
            guard_at=guard.at if guard else None,
            severity=ERROR if guard else WARNING,
        )
        known = self.findings.get(key)
        if known is None or (known.severity == WARNING and finding.severity == ERROR):
            self.findings[key] = finding


def _positional(call: ast.Call, index: int) -> ast.expr | None:
    if len(call.args) > index and not isinstance(call.args[index], ast.Starred):
        return call.args[index]
    return None


def _constant(node: ast.expr) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _executed_nodes(body: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """Every node a call of the function executes itself: not the bodies of nested defs."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
    pending = [node for node in body if not isinstance(node, nested)]
    while pending:
        node = pending.pop(0)
        yield node
        pending += [child for child in ast.iter_child_nodes(node) if not isinstance(child, nested)]


def _guard_of(module: _Module, node: ast.AST, function: FunctionNode) -> _Guard | None:
    """The innermost construct between ``node`` and ``function`` that swallows its failure."""
    child = node
    for parent in module.enclosing(node):
        if parent is function:
            return None
        if isinstance(parent, (ast.With, ast.AsyncWith)) and child in parent.body:
            for item in parent.items:
                kind = _suppressed(item.context_expr)
                if kind:
                    return _Guard(kind, module.where(parent))
        if isinstance(parent, _TRY_NODES) and child in getattr(parent, "body", ()):
            for handler in getattr(parent, "handlers", ()):
                kind = _swallowing_handler(handler)
                if kind:
                    return _Guard(kind, module.where(handler))
        child = parent
    return None


def _exception_names(node: ast.expr | None) -> list[str]:
    if node is None:
        return []
    if isinstance(node, ast.Tuple):
        return [name for element in node.elts for name in _exception_names(element)]
    return [_last_name(node)]


def _suppressed(expression: ast.expr) -> str | None:
    if not isinstance(expression, ast.Call) or _last_name(expression.func) != "suppress":
        return None
    names = [name for argument in expression.args for name in _exception_names(argument)]
    caught = [name for name in names if name in _SWALLOWED_TYPES]
    return f"suppress({caught[0]})" if caught else None


def _swallowing_handler(handler: ast.ExceptHandler) -> str | None:
    if any(isinstance(node, ast.Raise) for node in _executed_nodes(handler.body)):
        return None
    if handler.type is None:
        return "bare except"
    caught = [name for name in _exception_names(handler.type) if name in _SWALLOWED_TYPES]
    return f"except {caught[0]}" if caught else None


# -- files -----------------------------------------------------------------------------------


def _python_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(
            name for name in subfolders if not name.startswith(".") and name not in _SKIPPED_FOLDERS
        )
        files += [Path(folder) / name for name in sorted(names) if name.endswith(".py")]
    return files


def _import_base(root: Path) -> Path:
    """The folder module names are relative to: above the outermost package holding root."""
    base = root if root.is_dir() else root.parent
    while (base / "__init__.py").is_file() and base.parent != base:
        base = base.parent
    return base


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def scan_background_imports(
    path: str | os.PathLike[str],
    *,
    include_stdlib: bool = False,
    ignore: Iterable[str] = (),
) -> ScanReport:
    """Find the imports that run in background threads under ``path``; see the module docs."""
    where = "scan_background_imports()"
    try:
        root = Path(checked_path("path", path, where))
        flag("include_stdlib", include_stdlib, where)
        ignored = texts("ignore", ignore, where, meaning="module names")
    except InvalidArgumentError as error:
        raise ScanError(str(error)) from None
    if not root.exists():
        raise ScanError(f"scan_background_imports: no such file or folder {os.fspath(path)!r}")
    if root.is_file() and root.suffix != ".py":
        raise ScanError(
            f"scan_background_imports: {os.fspath(path)!r} is not a .py file;"
            " give a package folder, a folder of modules or one .py file"
        )
    base = _import_base(root.resolve())
    report = ScanReport(root=os.fspath(path))
    modules: dict[str, _Module] = {}
    for file in _python_files(root):
        display = os.fspath(file)
        report.files += 1
        try:
            module = _Module.parse(_module_name(file.resolve(), base), file, display)
        except (SyntaxError, ValueError, UnicodeDecodeError) as error:
            report.unparsed.append(f"{display}: {type(error).__name__}: {error}")
            continue
        modules[module.name] = module
    scanner = _Scanner(modules, include_stdlib, ignored)
    for module in modules.values():
        for entry in scanner.entries(module):
            scanner.scan_entry(entry)
    report.findings = sorted(
        scanner.findings.values(),
        key=lambda item: (
            -SEVERITIES.index(item.severity),
            item.path,
            item.line,
            item.column,
            item.started_at,
        ),
    )
    report.unresolved = scanner.unresolved
    return report


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m pytest_startup_guard.imports.scan",
        description="List imports that run in background threads; exit 1 when any is swallowed.",
    )
    parser.add_argument("paths", nargs="+", help="package folders or .py files")
    parser.add_argument("--include-stdlib", action="store_true")
    parser.add_argument("--ignore", action="append", default=[], metavar="MODULE")
    args = parser.parse_args(argv)
    status = 0
    for path in args.paths:
        try:
            report = scan_background_imports(
                path, include_stdlib=args.include_stdlib, ignore=args.ignore
            )
        except ScanError as error:
            print(error, file=sys.stderr)
            return 2
        print(report)
        status = max(status, 1 if report.errors else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())

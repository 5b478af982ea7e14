"""docs/incidents.md is kept true: its table of the public start-up incidents, the API it says
reproduces them, and the figure it states.

- The table has one row per incident (60), each id ``owner/repo#number``, unique, linked to
  that issue on GitHub; its class links to a section of the page that cites it.
- A row's status is ``reproducible``, ``not yet: <feature>`` or ``out of scope: <why>``.
- Every name in backticks of a reproducible row exists: a race of the catalogs (``RACES``:
  hub races, generic races, stale locks), a corruption, a public name of
  ``pytest_startup_guard``, a fixture or a marker the plugin registers, with attributes that
  exist and calls whose arguments the callable takes (``on_access(op=...)``,
  ``startup_races(rebuild=[...])``); a race or errno named in a call exists too. A failure
  lists every unknown name with its row.
- The figure sentence (``**N of 60 incidents (P %) are reproducible**``) is stated once and
  equals the count of reproducible rows.
- Every incident a section cites is a row of the table.
"""

from __future__ import annotations

import ast
import errno
import importlib
import inspect
import pathlib
import pkgutil
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from test_docs import anchors, read_lines  # the one reader of Markdown headings and blocks

import pytest_startup_guard
import pytest_startup_guard.cache

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "incidents.md"
PLUGIN = ROOT / "pytest_startup_guard" / "plugin.py"

INCIDENTS = 60
HEADER = ["id", "class", "reproduced with", "status"]
ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+#\d+")
CITATION = re.compile(r"(?<![\w/.#-])" + ID.pattern + r"(?!\d)")
LINK = re.compile(r"^\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)$")
STATUS = re.compile(r"^(?:reproducible|not yet: \S.{2,}|out of scope: \S.{2,})$")
FIGURE = re.compile(
    r"\*\*(?P<count>\d+) of (?P<total>\d+) incidents \((?P<percent>\d+) %\) are reproducible\*\*"
    r" with the documented API\."
)
CODE_SPAN = re.compile(r"`([^`]+)`")
# What a startup_races marker takes besides its kinds of case (verdicts/cases.py).
MARKER_TIMING = ("explore", "hold", "trigger")


# -- reading the page ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    line: int
    id: str
    link: str  # the id cell's link target ("" if none)
    section: str  # the anchor the class cell links to ("" if none)
    used: str  # the "reproduced with" cell
    status: str

    @property
    def reproducible(self) -> bool:
        return self.status == "reproducible"

    def names(self) -> list[str]:
        return CODE_SPAN.findall(self.used)


def cells(line: str) -> list[str]:
    """A table row's cells; a ``|`` inside a code span does not split."""
    found, current, in_code = [], "", False
    for char in line.strip().strip("|"):
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            found.append(current.strip())
            current = ""
        else:
            current += char
    return [*found, current.strip()]


def table(text: str) -> tuple[list[Row], list[str]]:
    """The rows of the page's incident table, and what is wrong with its shape."""
    lines = text.splitlines()
    starts = [n for n, line in enumerate(lines) if line.startswith("|") and cells(line) == HEADER]
    if len(starts) != 1:
        return [], [f"expected one table headed {' | '.join(HEADER)}, found {len(starts)}"]
    rows, problems = [], []
    for number in range(starts[0] + 2, len(lines)):
        line = lines[number]
        if not line.startswith("|"):
            break
        row = cells(line)
        if len(row) != len(HEADER):
            problems.append(f"line {number + 1}: {len(row)} cells, expected {len(HEADER)}: {line}")
            continue
        identity, section, used, status = row
        id_link, section_link = LINK.match(identity), LINK.match(section)
        rows.append(
            Row(
                line=number + 1,
                id=id_link["text"] if id_link else identity,
                link=id_link["target"] if id_link else "",
                section=section_link["target"].removeprefix("#") if section_link else "",
                used=used,
                status=status,
            )
        )
    return rows, problems


def shape_problems(rows: list[Row]) -> list[str]:
    problems = []
    if len(rows) != INCIDENTS:
        problems.append(f"the table has {len(rows)} rows, expected {INCIDENTS} (one per incident)")
    seen: dict[str, int] = {}
    for row in rows:
        where = f"line {row.line} ({row.id})"
        if not ID.fullmatch(row.id):
            problems.append(f"{where}: the id is not owner/repo#number")
            continue
        if row.id in seen:
            problems.append(f"{where}: the id is also on line {seen[row.id]}")
        seen.setdefault(row.id, row.line)
        repo, number = row.id.split("#")
        if row.link != f"https://github.com/{repo}/issues/{number}":
            problems.append(f"{where}: links to {row.link!r}, not the issue on GitHub")
        if not STATUS.match(row.status):
            problems.append(
                f"{where}: status {row.status!r}: expected 'reproducible', 'not yet: <feature>'"
                " or 'out of scope: <why>'"
            )
        if row.reproducible and not row.names():
            problems.append(f"{where}: reproducible, but names no API in backticks")
    return problems


def sections(text: str) -> dict[str, tuple[str, set[str]]]:
    """Each heading's anchor: its title and the incidents its prose cites (code and tables
    aside)."""
    found: dict[str, tuple[str, set[str]]] = {}
    anchor = ""
    for line in read_lines(text):
        if line.in_code:
            continue
        if line.text.startswith("#"):
            title = line.text.lstrip("#").strip()
            (anchor,) = anchors(line.text) or {""}
            found[anchor] = (title, set())
        elif anchor and not line.text.startswith("|"):
            found[anchor][1].update(CITATION.findall(line.text))
    return found


def section_problems(text: str, rows: list[Row]) -> list[str]:
    by_id = {row.id: row for row in rows}
    cited = sections(text)
    problems = []
    for title, ids in cited.values():
        missing = sorted(ids - set(by_id))
        problems += [f"section {title!r} cites {id}, which is not in the table" for id in missing]
    for row in rows:
        if row.section not in cited:
            problems.append(
                f"line {row.line} ({row.id}): its class links to #{row.section}, no heading"
            )
        elif row.id not in cited[row.section][1]:
            title = cited[row.section][0]
            problems.append(f"line {row.line} ({row.id}): section {title!r} does not cite it")
    return problems


def figure_problems(text: str, rows: list[Row]) -> list[str]:
    figures = list(FIGURE.finditer(text))
    if len(figures) != 1:
        return [f"the page states the figure {len(figures)} times, expected once: {FIGURE.pattern}"]
    figure = figures[0]
    count = sum(row.reproducible for row in rows)
    stated = (int(figure["count"]), int(figure["total"]), int(figure["percent"]))
    counted = (count, len(rows), round(100 * count / len(rows)) if rows else 0)
    if stated != counted:
        told = f"{counted[0]} of {counted[1]} ({counted[2]} %)"
        return [f"the page says {figure[0]!r}; the table counts {told}"]
    return []


# -- what exists -----------------------------------------------------------------------------


@dataclass
class Known:
    """The names a reproducible row may use, read from the package."""

    races: dict[str, type]
    corruptions: set[str]
    public: set[str]
    fixtures: dict[str, object]  # name -> the type it hands out (None where not public)
    markers: set[str]
    marker_arguments: set[str]

    def kind(self, name: str) -> str | None:
        if name in self.races:
            return "race"
        if name in self.corruptions:
            return "corruption"
        if name in self.public:
            return "public name"
        if name in self.fixtures:
            return "fixture"
        if name in self.markers:
            return "marker"
        return None


@cache
def known() -> Known:
    from pytest_startup_guard.plugin import MARKERS
    from pytest_startup_guard.verdicts.kinds import KINDS

    return Known(
        races=dict(pytest_startup_guard.RACES),
        corruptions=corruption_names(),
        public=set(pytest_startup_guard.__all__),
        fixtures=fixtures(PLUGIN.read_text()),
        markers={re.match(r"\w+", marker)[0] for marker in MARKERS},
        marker_arguments={*KINDS, *MARKER_TIMING},
    )


def corruption_names() -> set[str]:
    """Every name of a ``...CORRUPTIONS`` mapping in the cache part (hub files, plain files)."""
    names: set[str] = set()
    for module_info in pkgutil.iter_modules(pytest_startup_guard.cache.__path__):
        module = importlib.import_module(f"pytest_startup_guard.cache.{module_info.name}")
        for attribute, value in vars(module).items():
            if attribute.endswith("CORRUPTIONS") and isinstance(value, dict):
                names.update(value)
    return names


def fixtures(plugin_source: str) -> dict[str, object]:
    """The fixtures plugin.py registers, each with the public type it hands out."""
    found: dict[str, object] = {}
    for node in ast.walk(ast.parse(plugin_source)):
        if isinstance(node, ast.FunctionDef) and any(is_fixture(d) for d in node.decorator_list):
            found[node.name] = handed_out(node.returns)
    return found


def is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) == "pytest.fixture"


def handed_out(annotation: ast.expr | None) -> object:
    """``Iterator[HubRace]`` -> HubRace; ``Path`` -> Path; a type that is not public: None."""
    names = (
        [node.id for node in ast.walk(annotation) if isinstance(node, ast.Name)]
        if annotation
        else []
    )
    for name in names:
        if name in pytest_startup_guard.__all__:
            return getattr(pytest_startup_guard, name)
        if name == "Path":
            return pathlib.Path
    return None


# -- checking a name or a call -------------------------------------------------------------------


class Unknown(Exception):
    """A name, attribute or argument the package does not have."""


@dataclass(frozen=True)
class Resolved:
    value: object
    name: str
    method: bool  # a function of a fixture's type: its first parameter is the instance


PLACEHOLDER = object()  # a value the page leaves open (``path``, ``startup``)


def name_problems(span: str, names: Known) -> list[str]:
    """What is wrong with one backticked span of a reproducible row ([] when it all exists)."""
    keyword = re.fullmatch(r"(\w+)=", span)
    if keyword:  # `op=`: an argument of on_access() or of the startup_races marker
        accepted = set(inspect.signature(pytest_startup_guard.on_access).parameters)
        if keyword[1] in accepted | names.marker_arguments:
            return []
        return [f"{keyword[1]}= is an argument of neither on_access() nor startup_races"]
    try:
        expression = ast.parse(span, mode="eval").body
    except SyntaxError:
        return [f"{span!r} is neither a name nor a call"]
    try:
        check(expression, names)
    except Unknown as problem:
        return [str(problem)]
    return []


def check(node: ast.expr, names: Known) -> object:
    """Check a name, an attribute or a call; return a stand-in for its value in a call."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [check(element, names) for element in node.elts]
    if isinstance(node, ast.Call):
        return check_call(node, names)
    if isinstance(node, (ast.Name, ast.Attribute)):
        resolve(node, names)
        return PLACEHOLDER
    raise Unknown(f"{ast.unparse(node)!r} is neither a name nor a call")


def argument(node: ast.expr, names: Known) -> object:
    """A call's argument: a constant as itself, a call checked, anything else (``path``,
    ``shared_dir / "lock"``) a value the page leaves open."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return [argument(element, names) for element in node.elts]
    if isinstance(node, ast.Call):
        return check_call(node, names)
    return PLACEHOLDER


def resolve(node: ast.expr, names: Known) -> Resolved:
    if isinstance(node, ast.Name):
        kind = names.kind(node.id)
        if kind is None:
            raise Unknown(
                f"{node.id}: no race, corruption, public name, fixture or marker of that name"
            )
        if kind == "public name":
            return Resolved(getattr(pytest_startup_guard, node.id), node.id, method=False)
        if kind == "fixture":
            return Resolved(names.fixtures[node.id], node.id, method=False)
        return Resolved(None, node.id, method=False)
    if isinstance(node, ast.Attribute):
        base = resolve(node.value, names)
        dotted = f"{base.name}.{node.attr}"
        if base.value is None:
            raise Unknown(
                f"{dotted}: {base.name} hands out no public type to look {node.attr} up on"
            )
        if not hasattr(base.value, node.attr):
            raise Unknown(f"{dotted}: {base.name} has no attribute {node.attr!r}")
        from_fixture = isinstance(base.value, type) and base.name in names.fixtures
        value = getattr(base.value, node.attr)
        return Resolved(value, dotted, method=from_fixture and inspect.isfunction(value))
    raise Unknown(f"{ast.unparse(node)!r} is not a name")


def check_call(node: ast.Call, names: Known) -> object:
    if isinstance(node.func, ast.Name) and node.func.id == "startup_races":
        return check_marker(node, names)
    function = resolve(node.func, names)
    if isinstance(function.value, type) and function.name in names.fixtures:
        function = Resolved(function.value.__call__, function.name, method=True)
    if not callable(function.value):
        raise Unknown(f"{function.name} is not callable")
    signature = inspect.signature(function.value)
    if function.method:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    args = [argument(value, names) for value in node.args]
    kwargs = {
        keyword.arg: argument(keyword.value, names) for keyword in node.keywords if keyword.arg
    }
    try:
        bound = signature.bind_partial(*args, **kwargs)
    except TypeError as error:
        raise Unknown(f"{ast.unparse(node)}: {function.name}() {error}") from None
    for parameter, value in bound.arguments.items():
        check_value(function.name, parameter, value, names)
    return PLACEHOLDER


def check_value(function: str, parameter: str, value: object, names: Known) -> None:
    """A race or an errno named by its string: it must exist (and suit the call)."""
    if not isinstance(value, str):
        return
    if parameter == "race":
        if value not in names.races:
            raise Unknown(f"{function}({value!r}, ...): no race {value!r} in RACES")
        if function.endswith("arm_path") and not getattr(names.races[value], "on_paths", False):
            raise Unknown(f"{function}({value!r}, ...): race {value!r} does not race a path")
    if parameter == "error" and not (value.startswith("E") and hasattr(errno, value)):
        raise Unknown(f"{function}({value!r}, ...): {value!r} is no errno name")


def check_marker(node: ast.Call, names: Known) -> object:
    """``startup_races(kind=[names...])``: each argument taken, each name of its kind."""
    if node.args:
        raise Unknown(f"{ast.unparse(node)}: startup_races takes keyword arguments only")
    for keyword in node.keywords:
        if keyword.arg not in names.marker_arguments:
            raise Unknown(
                f"{ast.unparse(node)}: startup_races takes no {keyword.arg}= (it takes"
                f" {', '.join(sorted(names.marker_arguments))})"
            )
        listed = argument(keyword.value, names)
        accepted = names.corruptions if keyword.arg in ("corrupt", "rebuild") else set(names.races)
        for name in listed if isinstance(listed, list) else []:
            if isinstance(name, str) and name not in accepted:
                raise Unknown(f"{ast.unparse(node)}: {name!r} is no {keyword.arg}= name")
    return PLACEHOLDER


def unknown_names(rows: list[Row], names: Known) -> list[str]:
    return [
        f"line {row.line} ({row.id}): `{span}`: {problem}"
        for row in rows
        if row.reproducible
        for span in row.names()
        for problem in name_problems(span, names)
    ]


# -- the checks ----------------------------------------------------------------------------------

TEXT = PAGE.read_text(encoding="utf-8")


def fail_with(problems: list[str], what: str) -> None:
    __tracebackhide__ = True
    if problems:
        pytest.fail(f"{PAGE.relative_to(ROOT)}: {what}:\n  " + "\n  ".join(problems), pytrace=False)


def test_the_table_has_one_row_per_incident() -> None:
    rows, problems = table(TEXT)
    fail_with(problems + shape_problems(rows), "the incident table")


def test_every_name_a_reproducible_row_uses_exists() -> None:
    rows, _ = table(TEXT)
    fail_with(unknown_names(rows, known()), "names that do not exist (row: name: why)")


def test_the_figure_is_the_count_of_reproducible_rows() -> None:
    rows, _ = table(TEXT)
    fail_with(figure_problems(TEXT, rows), "the figure")


def test_every_incident_a_section_cites_is_in_the_table_under_its_class() -> None:
    rows, _ = table(TEXT)
    fail_with(section_problems(TEXT, rows), "sections and table disagree")


# -- the checker itself --------------------------------------------------------------------------

SAMPLE = """
# Sample

**1 of 3 incidents (50 %) are reproducible** with the documented API.

## Ports

acme/server#1 and acme/server#2 and acme/other#9.

| id | class | reproduced with | status |
|---|---|---|---|
| [acme/server#1](https://github.com/acme/server/issues/1) | [ports](#ports) | `port_taken(member=0, hodl=1)`, `no_such_race`, `on_access(nth=1)` | reproducible |
| [acme/server#1](https://github.com/acme/server/issues/2) | [ports](#nowhere) | - | not yet |
| [acme server 3](https://github.com/acme/server/issues/3) | [ports](#ports) | `same_port(members=(0, 1))` | reproducible |
"""


def test_the_checker_catches_each_kind_of_mistake() -> None:
    rows, problems = table(SAMPLE)
    assert not problems and len(rows) == 3
    shape = "\n".join(shape_problems(rows))
    expected_problems = [
        "3 rows, expected 60",
        "also on line",
        "not the issue on GitHub",
        "status 'not yet'",
        "not owner/repo#number",
    ]
    for expected in expected_problems:
        assert expected in shape, (expected, shape)
    unknown = unknown_names(rows, known())
    assert len(unknown) == 2, unknown
    assert "hodl" in unknown[0] and "no_such_race" in unknown[1]
    assert "acme/server#1" in unknown[0]
    assert "the table counts 2 of 3 (67 %)" in figure_problems(SAMPLE, rows)[0]
    sections_text = "\n".join(section_problems(SAMPLE, rows))
    assert "cites acme/other#9, which is not in the table" in sections_text
    assert "#nowhere, no heading" in sections_text


@pytest.mark.parametrize(
    ("span", "problem"),
    [
        ("pointer_swap", None),
        ("hub_race.arm_path", None),
        ("ready.http(expect=...)", None),
        ('startup_races(stale=["stale_lock"])', None),
        ("start_methods.check(startup, timeout=30)", None),
        ("hub_race.arm_pth", "has no attribute 'arm_pth'"),
        ('hub_race.arm_path("pointer_swap", path)', "does not race a path"),
        ('hub_race.arm_path("no_race", path)', "no race 'no_race'"),
        ('startup_races(transient=["nope"])', "'nope' is no transient= name"),
        ('startup_races(corrupt=["pointer_swap"])', "is no corrupt= name"),
        ("startup_races(when=1)", "takes no when="),
        ("on_access(nth=1, hold=0.5, sometimes=True)", "sometimes"),
        ("pointer_swap(1)", "not callable"),
        ("stale_lock.open", "hands out no public type"),
        ("a + b", "neither a name nor a call"),
        ("hold=", None),
        ("never=", "neither on_access() nor startup_races"),
    ],
)
def test_the_name_checker(span: str, problem: str | None) -> None:
    found = name_problems(span, known())
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found


def test_an_errno_name_is_checked_where_a_call_takes_one() -> None:
    names = known()
    check_value("fs_error", "error", "ESTALE", names)
    with pytest.raises(Unknown, match="'ESTAIL' is no errno name"):
        check_value("fs_error", "error", "ESTAIL", names)


def test_a_fixture_is_read_with_the_type_it_hands_out() -> None:
    found = fixtures(PLUGIN.read_text())
    assert found["hub_race"] is pytest_startup_guard.HubRace
    assert found["shared_dir"] is pathlib.Path
    assert {"server_fleet", "startup_case", "start_methods", "import_race"} <= set(found)

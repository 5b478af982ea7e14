"""The docs are checked like code: links resolve, runnable examples run.

- Every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md and docs/*.md points to a file
  of the repository (not one git ignores), and every ``#anchor`` matches a heading of its target
  page under GitHub's slug rules. One test per link, named by file, line and link.
- Every code block marked as a runnable example (``<!-- test: pytest ... -->`` or
  ``<!-- test: python ... -->`` on the line before a python block; CONTRIBUTING.md, "Runnable
  examples in the docs") is run: a pytest block as a user's test file under
  ``pytest -p startup_guard``, a python block as a script. One test per block.
- A marker that does not parse, or marks no block or an empty one, fails: a typo never skips.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import urllib.parse
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from test_layout import may_import  # the one reader of the 'May import:' lines

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE_DIR = ROOT / "pytest_startup_guard"


def doc_files() -> list[Path]:
    named = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md"]
    return [path for path in named if path.is_file()] + sorted(DOCS.glob("*.md"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# -- reading Markdown ----------------------------------------------------------------------------

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
HTML_LINK = re.compile(r"""<(?:a|img)\s[^>]*\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]"  # [text], one level of nested brackets
    r"\(\s*(?:<([^<>]*)>|([^\s()]*(?:\([^\s()]*\)[^\s()]*)*))"  # (target) or (<target>)
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"  # optional title
)
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")


@dataclass
class Line:
    number: int  # 1-based
    text: str
    in_code: bool  # inside a fenced block, fences included


def read_lines(text: str) -> list[Line]:
    lines = []
    fence: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        match = FENCE.match(raw)
        if fence is None and match:
            fence = match["fence"]
            lines.append(Line(number, raw, True))
        elif fence is not None:
            if closes(match, fence):
                fence = None
            lines.append(Line(number, raw, True))
        else:
            lines.append(Line(number, raw, False))
    return lines


def closes(match: re.Match[str] | None, fence: str) -> bool:
    """Whether a line matched by ``FENCE`` closes a block opened by ``fence``."""
    if match is None or match["info"].strip():
        return False
    return match["fence"][0] == fence[0] and len(match["fence"]) >= len(fence)


def plain_text(markdown: str) -> str:
    """A heading's text as GitHub renders it (links to their text, markup dropped)."""
    parts = []
    position = 0
    for span in CODE_SPAN.finditer(markdown):  # code spans keep their content as is
        parts.append(_strip_markup(markdown[position : span.start()]))
        parts.append(span[2].strip() if span[2].strip() else span[2])
        position = span.end()
    parts.append(_strip_markup(markdown[position:]))
    return "".join(parts)


def _strip_markup(text: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("*", "")
    return re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped but - and _, spaces to -."""
    text = plain_text(heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a page: heading slugs (duplicates get -1, -2, ...) and HTML ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in read_lines(text):
        if line.in_code:
            continue
        heading = ATX_HEADING.match(line.text)
        if heading:
            base = slug(heading[2] or "")
            anchor = base
            while anchor in found:
                seen[base] = seen.get(base, 0) + 1
                anchor = f"{base}-{seen[base]}"
            found.add(anchor)
        found.update(HTML_ANCHOR.findall(line.text))
    return found


@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str

    def __str__(self) -> str:
        return f"{rel(self.source)}:{self.line}:{self.target}"


def links_in(path: Path, text: str) -> list[Link]:
    found = []
    for line in read_lines(text):
        if line.in_code:
            continue
        prose = HTML_COMMENT.sub("", CODE_SPAN.sub("", line.text))
        targets = [a or b for a, b in INLINE_LINK.findall(prose)]
        targets += REFERENCE_DEFINITION.findall(prose) + HTML_LINK.findall(prose)
        found += [Link(path, line.number, target) for target in targets]
    return found


def is_relative(target: str) -> bool:
    return not SCHEME.match(target)


def link_problem(link: Link, source_text: str | None = None) -> str | None:
    """What is wrong with a relative link, or None (``source_text``: the linking page's text,
    read from disk if not given)."""
    address, _, anchor = link.target.partition("#")
    anchor = urllib.parse.unquote(anchor)
    if not address:
        target = link.source
    else:
        target = (link.source.parent / urllib.parse.unquote(address)).resolve()
        if not target.is_relative_to(ROOT):
            return f"{address} is outside the repository: a forge cannot show it"
        if not target.exists():
            return f"{address} does not exist (resolved to {target})"
        if rel(target) in git_ignored((rel(target),)):
            return f"{address} is ignored by git: it is never on the forge"
    if not anchor:
        return None
    if target.suffix != ".md":
        if re.fullmatch(r"L\d+(-L\d+)?", anchor):  # a forge's line anchor
            return None
        return f"#{anchor}: only Markdown pages have heading anchors"
    if target == link.source and source_text is not None:
        known = anchors(source_text)
    else:
        known = anchors(target.read_text(encoding="utf-8"))
    if anchor not in known:
        close = sorted(a for a in known if anchor.split("-")[0] in a)[:8]
        return f"no heading of {rel(target)} has the anchor #{anchor} (similar: {close})"
    return None


@cache
def git_ignored(paths: tuple[str, ...]) -> frozenset[str]:
    try:
        completed = subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "--no-index", *paths],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    if completed.returncode not in (0, 1):  # not a git checkout: nothing to compare with
        return frozenset()
    return frozenset(completed.stdout.split())


# -- runnable examples ---------------------------------------------------------------------------

KINDS = ("pytest", "python")
OUTCOMES = ("passed", "failed", "skipped", "errors", "xfailed", "xpassed")
OPTIONS = {"pytest": {*OUTCOMES, "args", "exit", "match"}, "python": {"exit", "match"}}
NUMERIC = {*OUTCOMES, "exit"}
MARKER = re.compile(r"^\s*<!--(?P<body>.*?)-->\s*$")
EXAMPLE_TIMEOUT = 180  # seconds a block may run; the docs' examples take a few seconds each


@dataclass
class Example:
    source: Path
    line: int  # of the marker
    kind: str = ""
    options: dict[str, str] = field(default_factory=dict)
    code: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{rel(self.source)}:{self.line}"


def parse_marker(body: str) -> tuple[str, dict[str, str], list[str]]:
    """``test: pytest passed=2 args="-rs"`` -> ("pytest", {...}, problems)."""
    head, colon, rest = body.strip().partition(":")
    if head.strip() != "test" or not colon:
        return "", {}, [f"a marker reads 'test: KIND [OPTION=VALUE ...]', not {body.strip()!r}"]
    try:
        words = shlex.split(rest)
    except ValueError as error:
        return "", {}, [f"cannot split {rest.strip()!r}: {error}"]
    if not words or words[0] not in KINDS:
        given = words[0] if words else ""
        return "", {}, [f"unknown kind {given!r}: expected one of {', '.join(KINDS)}"]
    kind, options, problems = words[0], {}, []
    for word in words[1:]:
        key, equals, value = word.partition("=")
        if not equals or key not in OPTIONS[kind]:
            known = ", ".join(sorted(OPTIONS[kind]))
            problems.append(
                f"unknown option {word!r} for {kind}: expected KEY=VALUE, KEY one of {known}"
            )
        elif key in NUMERIC and not value.isdigit():
            problems.append(f"{key}={value!r}: expected a whole number")
        else:
            options[key] = value
    return kind, options, problems


def examples_in(path: Path, text: str) -> list[Example]:
    """Every marker (and every comment that looks meant as one) with the block it marks."""
    lines = read_lines(text)
    found = []
    for index, line in enumerate(lines):
        if line.in_code:
            continue
        marker = MARKER.match(line.text)
        if not marker or not looks_like_a_marker(marker["body"], lines, index):
            continue
        example = Example(path, line.number)
        found.append(example)
        example.kind, example.options, example.problems = parse_marker(marker["body"])
        example.code, problem = block_after(lines, index)
        if problem:
            example.problems.append(problem)
    return found


def looks_like_a_marker(body: str, lines: list[Line], index: int) -> bool:
    """A whole-line comment that mentions "test", or that stands right before a code block: a
    typo in a marker must fail, not skip the example."""
    following = lines[index + 1].text if index + 1 < len(lines) else ""
    return re.search(r"\btests?\b", body, re.IGNORECASE) is not None or bool(FENCE.match(following))


def block_after(lines: list[Line], index: int) -> tuple[str, str | None]:
    """The python block that starts on the line after ``index``, or why there is none."""
    following = lines[index + 1] if index + 1 < len(lines) else None
    opening = FENCE.match(following.text) if following else None
    if following is None or opening is None:
        return "", "the marker is not followed (on the next line) by a ```python block"
    if opening["info"].strip().split(" ")[0] != "python":
        return "", f"the block after the marker is {opening['info'].strip()!r}, not python"
    body = []
    for line in lines[index + 2 :]:
        if closes(FENCE.match(line.text), opening["fence"]):
            break
        body.append(line.text)
    else:
        return "", "the block after the marker is never closed"
    code = textwrap.dedent("\n".join(body))
    if not code.strip():
        return "", "the marked block is empty"
    return code + "\n", None


def all_examples() -> list[Example]:
    return [
        example
        for path in doc_files()
        for example in examples_in(path, path.read_text(encoding="utf-8"))
    ]


def all_links() -> list[Link]:
    return [
        link
        for path in doc_files()
        for link in links_in(path, path.read_text(encoding="utf-8"))
        if is_relative(link.target)
    ]


LINKS = all_links()
EXAMPLES = all_examples()
RUNNABLE = [example for example in EXAMPLES if not example.problems]


# -- the checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("link", LINKS, ids=str)
def test_relative_link_resolves(link: Link) -> None:
    problem = link_problem(link)
    assert problem is None, f"{link}: {problem}"


def test_the_docs_are_found_and_link_to_each_other() -> None:
    pages = {path.name for path in DOCS.glob("*.md")} - {"README.md"}
    assert pages, "docs/ has no pages"
    index = DOCS / "README.md"
    linked = {
        Path(link.target.partition("#")[0]).name
        for link in links_in(index, index.read_text(encoding="utf-8"))
    }
    assert not pages - linked, f"docs/README.md does not list {sorted(pages - linked)}"
    readme_links = {
        link.target.partition("#")[0] for link in LINKS if link.source.name == "README.md"
    }
    assert "docs/README.md" in readme_links, "README.md does not link the docs' index"


def test_every_marker_is_well_formed() -> None:
    problems = [
        f"{example.name}: {problem}" for example in EXAMPLES for problem in example.problems
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "page",
    [
        "README.md",
        *(
            f"docs/{part}.md"
            for part in ("cache", "races", "fleet", "verdicts", "imports", "targets")
        ),
    ],
)
def test_page_has_a_runnable_example(page: str) -> None:
    assert any(rel(example.source) == page for example in RUNNABLE), (
        f"{page} has no runnable example"
    )


@pytest.mark.parametrize("example", RUNNABLE, ids=lambda example: example.name)
def test_runnable_example(example: Example, guard_pytester: pytest.Pytester) -> None:
    copy_examples_into(guard_pytester.path)
    if example.kind == "pytest":
        stem = "test_" + re.sub(r"\W", "_", example.name).lower()
        guard_pytester.makepyfile(**{stem: example.code})
        result = guard_pytester.runpytest_subprocess(
            "-p",
            "startup_guard",
            "-p",
            "no:cacheprovider",
            *shlex.split(example.options.get("args", "")),
            f"{stem}.py",
            timeout=EXAMPLE_TIMEOUT,
        )
    else:
        script = guard_pytester.path / "example.py"
        script.write_text(example.code, encoding="utf-8")
        result = guard_pytester.run(sys.executable, script, timeout=EXAMPLE_TIMEOUT)
    check_outcome(example, result)


def check_outcome(example: Example, result: pytest.RunResult) -> None:
    __tracebackhide__ = True
    output = "\n".join(["--- stdout", *result.outlines, "--- stderr", *result.errlines])
    counts = {key: int(example.options[key]) for key in OUTCOMES if key in example.options}
    failing = counts.get("failed", 0) + counts.get("errors", 0)
    expected_exit = int(example.options.get("exit", 1 if failing else 0))
    if result.ret != expected_exit:
        pytest.fail(f"{example.name}: exit status {result.ret}, expected {expected_exit}\n{output}")
    if counts:
        observed = result.parseoutcomes()
        observed = {key: observed.get(key, observed.get(key.rstrip("s"), 0)) for key in OUTCOMES}
        expected = {key: counts.get(key, 0) for key in OUTCOMES}
        if observed != expected:
            pytest.fail(f"{example.name}: outcomes {observed}, expected {expected}\n{output}")
    pattern = example.options.get("match")
    if pattern and not any(
        fnmatch.fnmatch(line, pattern) for line in result.outlines + result.errlines
    ):
        pytest.fail(f"{example.name}: no line of the output matches {pattern!r}\n{output}")


def copy_examples_into(folder: Path) -> None:
    """What the docs' examples refer to: ``examples/servers/...`` by path, the packages of
    ``examples/imports`` by import (next to the test file, where ``import_race`` looks)."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "examples" / "servers", folder / "examples" / "servers", ignore=skip)
    for package in sorted((ROOT / "examples" / "imports").iterdir()):
        if (package / "__init__.py").is_file():
            shutil.copytree(package, folder / package.name, ignore=skip)


# -- CONTRIBUTING.md's table of the parts --------------------------------------------------------


def test_contributing_table_of_the_parts_matches_the_docstrings() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)/` \|[^|]*\|([^|]*)\|$", text, re.MULTILINE)
    table = {part: set(re.findall(r"\w+", allowed)) for part, allowed in rows}
    parts = {path.parent.name for path in PACKAGE_DIR.glob("*/__init__.py")}
    assert set(table) == parts, (
        f"CONTRIBUTING.md lists {sorted(table)}; the package has {sorted(parts)}"
    )
    wrong = {
        part: (sorted(table[part]), sorted(may_import(part)))
        for part in parts
        if table[part] != may_import(part)
    }
    assert not wrong, (
        f"CONTRIBUTING.md's 'may import' differs from the docstrings (table, docstring): {wrong}"
    )


# -- the checker itself --------------------------------------------------------------------------


def test_slugs_follow_github() -> None:
    assert slug("Verdicts: survive the race, fail closed on real corruption") == (
        "verdicts-survive-the-race-fail-closed-on-real-corruption"
    )
    assert slug("The `child_runtime` fixture") == "the-child_runtime-fixture"
    assert slug("Suites with a cpu, cuda or rocm marker of their own") == (
        "suites-with-a-cpu-cuda-or-rocm-marker-of-their-own"
    )
    assert slug("`__init__.py` and *emphasis*") == "__init__py-and-emphasis"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1", "a-2"}


def test_the_checker_catches_a_broken_link_and_a_bad_marker() -> None:
    page = DOCS / "README.md"
    text = (
        "# Title\n[ok](#title) [gone](#nowhere) [file](no-such-page.md) `[code](x.md)`\n"
        "<!-- test: pytset -->\n```python\nx = 1\n```\n"
        "<!-- tset: pytest -->\n```python\nx = 1\n```\n"
        "<!-- test: pytest passd=1 -->\n```python\nx = 1\n```\n"
        "<!-- test: python -->\n```python\n\n```\n"
        "<!-- test: python -->\ntext\n"
    )
    links = links_in(page, text)
    assert [link.target for link in links] == ["#title", "#nowhere", "no-such-page.md"]
    problems = [link_problem(link, text) for link in links]
    assert problems[0] is None
    assert problems[1] is not None and problems[2] is not None
    assert link_problem(Link(page, 1, "../../outside.md")) is not None
    examples = examples_in(page, text)
    assert len(examples) == 5
    assert all(example.problems for example in examples), [e.problems for e in examples]

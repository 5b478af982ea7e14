"""``startup-guard-report``: the console script that works on JSON reports after the run.

``startup-guard-report merge REPORT... [-o FILE] [--format {html,markdown}]`` merges the
reports of a CI matrix into one table (``merge``). Without ``-o`` it prints to stdout; the
format is ``--format`` when given, else HTML when ``-o`` ends in ``.html`` or ``.htm`` and
markdown otherwise (so ``--format markdown >> "$GITHUB_STEP_SUMMARY"`` and ``-o matrix.html``
need nothing else). A report path that does not exist is a warning on stderr and its target is
left out; every other problem is an error on stderr.

Exit status: 0 written; 2 nothing written (a usage error, a file that is not JSON, a report of
another schema or version, two reports of one target, no report at all, an output file that
cannot be written). Standard library only: it starts without importing pytest.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_startup_guard.report.atomic import write_atomically
from pytest_startup_guard.report.merge import (
    READS_VERSION,
    MergeError,
    merge,
    render_html,
    render_markdown,
)

PROG = "startup-guard-report"
FORMATS = ("html", "markdown")
HTML_SUFFIXES = (".html", ".htm")


def parser() -> argparse.ArgumentParser:
    """The command line: one subcommand, ``merge``, for now."""
    main_parser = argparse.ArgumentParser(
        prog=PROG, description="Work on pytest-startup-guard JSON reports (--startup-guard-report)."
    )
    commands = main_parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    merge_parser = commands.add_parser(
        "merge",
        help="merge the reports of a CI matrix into one table",
        description=(
            "Merge the JSON reports of a CI matrix (one per target) into one table: a row per"
            " start-up test, a column per target. Tests that fail on one target only come first."
            f" Reads version {READS_VERSION} reports. A report path that does not exist is a"
            " warning, and its target is left out."
        ),
    )
    merge_parser.add_argument(
        "reports",
        nargs="+",
        type=Path,
        metavar="REPORT",
        help="a JSON report (--startup-guard-report), one per target",
    )
    merge_parser.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write here (default: stdout)"
    )
    merge_parser.add_argument(
        "--format",
        choices=FORMATS,
        help="default: html when FILE ends in .html or .htm, else markdown",
    )
    return main_parser


def output_format(given: str | None, output: Path | None) -> str:
    """``--format`` when given; else html for an ``.html``/``.htm`` output, else markdown."""
    if given is not None:
        return given
    if output is not None and output.suffix.lower() in HTML_SUFFIXES:
        return "html"
    return "markdown"


def output_problem(output: Path | None, reports: Sequence[Path]) -> str | None:
    """What is wrong with ``-o FILE`` before anything is read or written: a folder, a folder
    that does not exist (none is created), or one of the reports being merged."""
    if output is None:
        return None
    if output.is_dir():
        return (
            f"argument -o/--output: {output} is a folder; expected a file in it, such as"
            f" {output / 'matrix.html'}"
        )
    folder = output.parent if str(output.parent) else Path(".")
    if not folder.is_dir():
        return (
            f"argument -o/--output: folder {folder} does not exist (for {output}); create it"
            " first (nothing is created for it)"
        )
    resolved = output.resolve()
    for report in reports:
        if report.resolve() == resolved:
            return f"argument -o/--output: {output} is also a REPORT to merge; write elsewhere"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = parser().parse_args(argv)
    problem = output_problem(args.output, list(args.reports))
    if problem is not None:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2
    try:
        matrix = merge(list(args.reports))
    except MergeError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    for path in matrix.missing:
        print(
            f"{PROG}: warning: {path} does not exist (did its job run and upload it?);"
            " its target is left out",
            file=sys.stderr,
        )
    kind = output_format(args.format, args.output)
    text = render_html(matrix) if kind == "html" else render_markdown(matrix)
    if args.output is None:
        _write_stdout(text)
        return 0
    try:
        write_atomically(args.output, text)  # whole or not at all, never via a planted name
    except OSError as error:
        print(
            f"{PROG}: error: cannot write {args.output}: {error.strerror or error}", file=sys.stderr
        )
        return 2
    return 0


def _write_stdout(text: str) -> None:
    """UTF-8 whatever the locale says (the markdown has ✅ and ❌)."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
    else:
        buffer.write(text.encode("utf-8"))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

"""``make demo`` judges reasons, not only pass against fail: a row that fails (or passes) for
another reason than the expected one makes the demo say its verdicts differ.

Each test runs the demo's own code (``examples/run_demo.py``: the inner pytest run with the
plugin, then the table) on a few of its cases, with the servers' ``transformers`` replaced by
one that cannot be imported: the naive servers still die, and the corrupt cases still fail
closed, but of an ImportError, not of the race or the corruption.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import run_demo  # noqa: E402 - the demo as make demo runs it


@pytest.fixture
def broken_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process of the inner runs imports a ``transformers`` that raises ImportError."""
    fake = tmp_path / "fake"
    (fake / "transformers").mkdir(parents=True)
    (fake / "transformers" / "__init__.py").write_text(
        "raise ImportError('transformers is broken in this environment')\n"
    )
    path = [str(fake), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))


def row_line(output: str, start: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith(start)]
    assert len(lines) == 1, output
    return lines[0]


@pytest.mark.usefixtures("broken_transformers")
def test_a_zoo_row_that_fails_of_an_import_error_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = "naive and autoconfig and (transient-pointer_swap or corrupt-no_model_type)"
    rows = run_demo.run_pytest(1, tmp_path, "zoo", "test_zoo.py", "-k", cases)
    assert not run_demo.zoo_table(rows)
    output = capsys.readouterr().out
    # It failed, as expected, but of the ImportError before any read of config.json
    died = row_line(output, "naive       transient pointer_swap")
    assert died.split()[3:6] == ["fail", "fail", "DIFFERENT"], output
    assert "ImportError: transformers is broken" in died, output
    # Its verdict (failed closed) holds, as expected, but not of the corruption's ValueError
    closed = row_line(output, "naive       corrupt no_model_type")
    assert closed.split()[3:6] == ["pass", "pass", "DIFFERENT"], output
    assert "ImportError" in closed, output


@pytest.mark.usefixtures("broken_transformers")
def test_a_dead_uvicorn_worker_of_an_import_error_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = run_demo.run_workers(1, tmp_path)
    assert not run_demo.workers_table(rows)
    output = capsys.readouterr().out
    # uvicorn's naive workers die (exit code 3) and the test fails, as expected, but of the
    # ImportError in their lifespan, not of the race on config.json
    naive = row_line(output, "naive    transient pointer_swap")
    assert naive.split()[3:6] == ["fail", "fail", "DIFFERENT"], output
    assert "ImportError" in naive, output


@pytest.mark.usefixtures("broken_transformers")
def test_a_model_stack_dead_of_an_import_error_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = run_demo.run_model_stack(1, tmp_path)
    assert not run_demo.stack_table(rows)
    output = capsys.readouterr().out
    # The naive stack's test fails, as expected, but of the ImportError (building its model, in
    # the test), not of the race on model.safetensors: no process met the change.
    for topology in ("single", "workers"):
        naive = row_line(output, f"naive {topology}")
        assert naive.split()[4:7] == ["fail", "fail", "DIFFERENT"], output
        assert "ImportError" in naive and "met by 2 processes" not in naive, output

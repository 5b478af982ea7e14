"""The ``truth`` benchmark's rule: a verdict against the servers' own account.

``benchmarks/truth_stack.py`` reads what each process of the example model stack said (its
load errors with their files, then loaded or failed) and counts the plugin's verdict as a
false green, a vacuous green, a false red or in agreement. The rule is checked here on
accounts written by hand; ``tests/test_benchmarks.py`` runs the benchmark itself (quick).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from truth_stack import Account, Case, accounts_of

MET = Account(errors=["model.safetensors: LocalEntryNotFoundError"], loaded=True)
UNMET = Account(loaded=True)
DIED = Account(errors=["model.safetensors: LocalEntryNotFoundError"], failed=True)
CLOSED = Account(errors=["model.safetensors: SafetensorError"] * 7, failed=True)


def case(
    kind: str, passed: bool, *accounts: Account, exits: dict[int, int | None] | None = None
) -> Case:
    return Case(
        name="test_stack[x]",
        kind=kind,
        what="pointer_swap" if kind == "transient" else "truncated",
        filename="model.safetensors",
        policy="retry",
        topology="single",
        plugin_passed=passed,
        accounts=dict(enumerate(accounts, start=100)),
        member_exits=exits or {},
    )


@pytest.mark.parametrize(
    ("built", "truth", "judgement"),
    [
        (case("transient", True, MET, MET), "survived", "agree"),
        (case("transient", False, MET, MET), "survived", "false red"),
        (case("transient", True, MET, DIED), "died", "false green"),
        (case("transient", False, DIED, DIED), "died", "agree"),
        (case("transient", True, MET), "died", "false green"),  # a process that said nothing
        (case("transient", True, MET, MET, exits={100: 0, 101: None}), "died", "false green"),
        (case("transient", True, MET, UNMET), "unmet", "vacuous green"),
        (case("transient", False, MET, UNMET), "unmet", "agree"),
        (case("corrupt", True, CLOSED, CLOSED), "closed", "agree"),
        (case("corrupt", False, CLOSED, CLOSED), "closed", "false red"),
        (case("corrupt", True, CLOSED, MET), "open", "false green"),
        (case("corrupt", False, CLOSED, UNMET), "open", "agree"),
    ],
)
def test_each_verdict_is_counted_against_the_servers_account(
    built: Case, truth: str, judgement: str
) -> None:
    assert (built.truth, built.judgement) == (truth, judgement)


def test_the_accounts_are_read_per_process_from_the_servers_lines(tmp_path: Path) -> None:
    log = tmp_path / "case.log"
    log.write_text(
        "pid 7: load error on model.safetensors: LocalEntryNotFoundError: An error happened\n"
        "pid 8: load error on tokenizer.json: WrongModel: the tokenizer's ids are [0]\n"
        "pid 7: loaded acme/stack\n"
        "loading acme/stack: LocalEntryNotFoundError: ...; retrying in 0.1 s\n"
        "pid 8: failed to load acme/stack: load error on tokenizer.json: WrongModel: ...\n"
    )
    accounts = accounts_of(log)
    assert accounts == {
        7: Account(["model.safetensors: LocalEntryNotFoundError"], loaded=True),
        8: Account(["tokenizer.json: WrongModel"], failed=True),
    }
    assert accounts_of(tmp_path / "absent.log") == {}

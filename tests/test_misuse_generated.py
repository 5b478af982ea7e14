"""The generated misuses (misuse_generated.py): every example of every family must end in the
plugin's own error at the call, naming the value. Derandomized: the same examples every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from misuse_generated import Family, examples_settings, families, judge

EXAMPLES = 60
FAMILIES = families()


@pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])
def test_generated_misuse_is_a_clear_error(
    family: Family, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("generated")

    @examples_settings(EXAMPLES)
    @given(family.strategy)
    def each(value: Any) -> None:
        verdict = judge(family, value, folder)
        assert verdict.kind == "clear", (
            f"{family.name} given {value!r:.300}: {verdict.kind}: {verdict.detail:.600}"
        )

    each()


def test_every_family_has_a_name_of_its_own() -> None:
    names = [family.name for family in FAMILIES]
    assert len(FAMILIES) >= 7
    assert len(set(names)) == len(names)


def test_a_value_the_plugin_takes_is_judged_silent(tmp_path: Path) -> None:
    """The judge itself can fail a family: a valid value is ``silent``, not ``clear``."""
    add = next(family for family in FAMILIES if family.name == "hub_cache.add_model(content)")
    assert judge(add, ("config.json", {"a": 1}), tmp_path).kind == "silent"

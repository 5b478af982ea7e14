"""The run's target as test-suite properties of the JUnit XML, for the CI matrix."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from pytest_startup_guard.targets.detection import TargetChoice

JUNIT_PROPERTIES = ("startup_guard_target", "startup_guard_target_reason")


def record_in_junit_xml(config: pytest.Config, choice: TargetChoice) -> bool:
    """Add the target as test-suite properties of the JUnit XML this process writes, if any.

    Only the process that writes the XML holds pytest's ``LogXML`` (the xdist controller, not
    its workers), which is why the ``record_testsuite_property`` fixture does not work under
    xdist (pytest issue 7767). pytest has no public way to reach that object outside a test, so
    this uses the stash key its own ``record_testsuite_property`` uses. Returns whether it did.
    """
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest that moved it: leave the XML without the property
        return False
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return False
    for name, value in zip(JUNIT_PROPERTIES, (choice.target, choice.reason), strict=True):
        xml.add_global_property(name, value)
    return True

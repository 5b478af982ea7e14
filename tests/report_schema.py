"""The check that every JSON report a test of this suite writes holds to the shipped schema.

``jsonschema`` validates with the draft the schema declares (its ``$schema``), after checking
the schema itself against that draft's metaschema.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from pytest_startup_guard.report.run_report import SCHEMA_FILE

EDITED = "hand_edited"  # reports under a folder of this name are broken on purpose


@cache
def validator() -> Any:
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)  # the declared draft
    cls.check_schema(schema)  # raises SchemaError where the schema breaks its metaschema
    return cls(schema)


def validate(document: Any) -> list[str]:
    """Every way ``document`` breaks the schema, as ``<JSON path>: <message>``."""
    errors = sorted(validator().iter_errors(document), key=lambda error: error.json_path)
    return [f"{error.json_path}: {error.message}" for error in errors]


def reports_under(folder: Path) -> list[Path]:
    """The JSON reports of the plugin under ``folder`` (read by their ``schema`` field), but
    for those under an ``EDITED`` folder."""
    found = []
    for path in folder.rglob("*.json"):
        if EDITED in path.relative_to(folder).parts or not path.is_file():
            continue  # broken on purpose (misuse_cases_report), or a FIFO that would block
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(document, dict) and document.get("schema") == "pytest-startup-guard-report":
            found.append(path)
    return found

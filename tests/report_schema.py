"""A small JSON Schema checker (the subset ``report-schema.json`` uses), and the check that
every JSON report a test of this suite writes holds to the shipped schema.

The plugin ships the schema; its tests do not depend on a validator package, so this one reads
exactly the keywords the schema uses (``KNOWN_KEYWORDS``; a test fails when the schema uses
another one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_startup_guard.report.run_report import SCHEMA_FILE

KNOWN_KEYWORDS = {
    "$schema",
    "$defs",
    "$ref",
    "title",
    "description",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "oneOf",
}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def schema_errors(
    value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$"
) -> list[str]:
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return schema_errors(value, root["$defs"][name], root, where)
    if "oneOf" in schema:
        matching = [s for s in schema["oneOf"] if not schema_errors(value, s, root, where)]
        return (
            [] if len(matching) == 1 else [f"{where}: {len(matching)} of oneOf match {value!r:.80}"]
        )
    errors = []
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[name](value) for name in types):
            return [*errors, f"{where}: {value!r:.80} is not {types}"]
    if "minimum" in schema and TYPES["number"](value) and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        errors += [f"{where}: no {key!r}" for key in schema.get("required", []) if key not in value]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                errors += schema_errors(item, properties[key], root, f"{where}.{key}")
            elif extra is False:
                errors.append(f"{where}: unexpected {key!r}")
            elif isinstance(extra, dict):
                errors += schema_errors(item, extra, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += schema_errors(item, schema["items"], root, f"{where}[{index}]")
    return errors


def schema_keywords(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    found |= schema_keywords(sub)
            elif key in ("items", "additionalProperties", "oneOf"):
                for sub in value if isinstance(value, list) else [value]:
                    found |= schema_keywords(sub)
    return found


def validate(document: Any) -> list[str]:
    schema = json.loads(SCHEMA_FILE.read_text())
    return schema_errors(document, schema, schema)


def reports_under(folder: Path) -> list[Path]:
    """The JSON reports of the plugin under ``folder`` (read by their ``schema`` field)."""
    found = []
    for path in folder.rglob("*.json"):
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(document, dict) and document.get("schema") == "pytest-startup-guard-report":
            found.append(path)
    return found

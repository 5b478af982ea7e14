"""A JSON document checked against the report's JSON Schema, first problem first.

``startup-guard-report`` reads reports that may come from anywhere (a CI artifact, a file
edited by hand); it checks each one against ``report-schema.json`` before it reads a field, so
that a field of the wrong type is an error that names it, never an exception of the code that
reads it. ``jsonschema`` is not a dependency of the plugin: this checks the subset of JSON
Schema (draft 2020-12) that the report's schema uses (``KEYWORDS``), and refuses a schema that
uses any other keyword (``SchemaKeywordError``), so that the schema cannot grow a rule this
check would silently skip. The suite checks it against ``jsonschema`` on the same documents.

``first_problem(document, schema)`` is None for a valid document, else ``(pointer, what)``: the
field as a JSON Pointer (``/tests/0/reruns``; ``""`` is the document itself) and what is wrong
with it (``expected an integer >= 0, found "two"``). Fields are checked in the order the schema
names them, so the problem told is the same on every run.

It recurses as deep as the schema does, never deeper: a document nested deeper than its schema
describes is refused where the schema stops (``additionalProperties: false``, a type). Standard
library only: the ``startup-guard-report`` command starts without pytest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# Every keyword this module checks or may ignore; any other in a schema is refused.
CHECKED = frozenset(
    {
        "type",
        "const",
        "enum",
        "minimum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "oneOf",
        "$ref",
    }
)
ANNOTATIONS = frozenset({"description", "title", "$schema", "$defs"})  # say nothing of a value
KEYWORDS = CHECKED | ANNOTATIONS
_REF_PREFIX = "#/$defs/"
_TYPE_WORDS = {
    "null": "null",
    "boolean": "true or false",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "an object",
}
MAX_SHOWN = 60  # characters of a found value shown in a problem


class SchemaKeywordError(Exception):
    """The schema uses a keyword this module does not check (a change of the schema that needs
    one here): a bug of the plugin, never of the document."""


Problem = tuple[str, str]  # (JSON pointer of the field, what is wrong with it)


def first_problem(document: Any, schema: Mapping[str, Any]) -> Problem | None:
    """The first way ``document`` breaks ``schema``, or None when it holds to it."""
    return _Checker(schema).check(document, schema, "")


def json_type(value: Any) -> str:
    """The JSON type of a value ``json.loads`` returns (an integral float is a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__  # not a JSON value at all


def shown(value: Any) -> str:
    """A found value in a problem: JSON-like, cut to ``MAX_SHOWN`` characters."""
    if isinstance(value, (dict, list)):
        return f"{'an object' if isinstance(value, dict) else 'a list'} of {len(value)}"
    text = "null" if value is None else str(value).lower() if isinstance(value, bool) else None
    if text is None:
        text = f'"{value}"' if isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def pointer_part(key: str | int) -> str:
    """One step of a JSON Pointer (RFC 6901: ``~`` and ``/`` escaped)."""
    return "/" + str(key).replace("~", "~0").replace("/", "~1")


class _Checker:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """``schema`` itself, or what its ``$ref`` (``#/$defs/NAME``) names."""
        while "$ref" in schema:
            reference = schema["$ref"]
            if not isinstance(reference, str) or not reference.startswith(_REF_PREFIX):
                raise SchemaKeywordError(f"$ref {reference!r}: only {_REF_PREFIX}NAME is read")
            schema = self.root["$defs"][reference[len(_REF_PREFIX) :]]
        return schema

    def check(self, value: Any, schema: Mapping[str, Any], where: str) -> Problem | None:
        unknown = set(schema) - KEYWORDS
        if unknown:
            raise SchemaKeywordError(f"schema keyword(s) {sorted(unknown)} at {where or '/'}")
        schema = self.resolve(schema)
        if "oneOf" in schema:
            return self.one_of(value, schema["oneOf"], where)
        problem = self.check_value(value, schema)
        if problem is not None:
            return where, problem
        if isinstance(value, dict):
            return self.check_object(value, schema, where)
        if isinstance(value, list) and "items" in schema:
            for index, item in enumerate(value):
                found = self.check(item, schema["items"], where + pointer_part(index))
                if found is not None:
                    return found
        return None

    def check_value(self, value: Any, schema: Mapping[str, Any]) -> str | None:
        """What is wrong with the value itself (type, const, enum, minimum), or None."""
        if "const" in schema and not _equal(value, schema["const"]):
            return f"expected {shown(schema['const'])}, found {shown(value)}"
        if "enum" in schema and not any(_equal(value, allowed) for allowed in schema["enum"]):
            choices = ", ".join(shown(allowed) for allowed in schema["enum"])
            return f"expected one of {choices}, found {shown(value)}"
        if "type" in schema and not _is_type(value, schema["type"]):
            return f"expected {describe(schema)}, found {shown(value)}"
        minimum = schema.get("minimum")
        number = json_type(value) in ("integer", "number")
        if minimum is not None and number and not value >= minimum:
            return f"expected {describe(schema)}, found {shown(value)}"
        return None

    def check_object(
        self, value: dict[str, Any], schema: Mapping[str, Any], where: str
    ) -> Problem | None:
        for name in schema.get("required", ()):
            if name not in value:
                return where + pointer_part(name), "missing (a required field)"
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name, sub in properties.items():
            if name in value:
                found = self.check(value[name], sub, where + pointer_part(name))
                if found is not None:
                    return found
        extra = schema.get("additionalProperties", True)
        for name in value:
            if name in properties or extra is True:
                continue
            if extra is False:
                known = ", ".join(properties) or "none"
                return where + pointer_part(name), f"not a field of this report (fields: {known})"
            found = self.check(value[name], extra, where + pointer_part(name))
            if found is not None:
                return found
        return None

    def one_of(self, value: Any, choices: list[Mapping[str, Any]], where: str) -> Problem | None:
        """Exactly one choice must hold; where none does, the problem told is that of the choice
        of the value's own type (the closest), else a list of what each choice expects."""
        problems = [self.check(value, choice, where) for choice in choices]
        holding = [
            choice for choice, problem in zip(choices, problems, strict=True) if problem is None
        ]
        if len(holding) == 1:
            return None
        if holding:
            return where, f"matches {len(holding)} of its {len(choices)} alternatives, not one"
        for choice, problem in zip(choices, problems, strict=True):
            if _is_type(value, self.resolve(choice).get("type", ())) and problem is not None:
                return problem
        expected = " or ".join(describe(self.resolve(choice)) for choice in choices)
        return where, f"expected {expected}, found {shown(value)}"


def describe(schema: Mapping[str, Any]) -> str:
    """What a schema's value is, in words: ``an integer >= 0``, ``a string or null``."""
    if "const" in schema:
        return shown(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(shown(allowed) for allowed in schema["enum"])
    kinds = schema.get("type", ())
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    words = " or ".join(_TYPE_WORDS.get(kind, kind) for kind in kinds) or "a value"
    if "minimum" in schema:
        words += f" >= {schema['minimum']}"
    return words


def _is_type(value: Any, kinds: str | list[str] | tuple[str, ...]) -> bool:
    found = json_type(value)
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind == found or (kind == "number" and found == "integer"):
            return True
        if kind == "integer" and found == "number" and math.isfinite(value):
            return bool(value.is_integer())  # JSON Schema: 1.0 is an integer
    return False


def _equal(value: Any, expected: Any) -> bool:
    """JSON equality: true is not 1, and 1 is 1.0."""
    if isinstance(value, bool) or isinstance(expected, bool):
        return type(value) is type(expected) and value == expected
    return bool(value == expected)


__all__ = ["KEYWORDS", "SchemaKeywordError", "describe", "first_problem", "json_type", "shown"]

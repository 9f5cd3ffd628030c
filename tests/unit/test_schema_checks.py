"""The test processes' remembered meta-schema check keeps every validation of a value (kip848_harness/schema_checks.py)."""

from __future__ import annotations

import jsonschema
import pytest
from jsonschema import Draft202012Validator, FormatChecker

from kip848_harness import schema_checks


@pytest.fixture
def checks(monkeypatch) -> list[object]:
    """The schemas Draft202012Validator.check_schema was called with during the test."""
    seen: list[object] = []
    original = Draft202012Validator.check_schema

    def counting(schema, *args, **kwargs):
        seen.append(schema)
        return original(schema, *args, **kwargs)

    monkeypatch.setattr(Draft202012Validator, "check_schema", counting)
    return seen


def test_installed_for_the_test_session():
    assert jsonschema.validate is schema_checks.validate


def test_a_schema_is_checked_once_and_every_value_still_validated(checks):
    schema = {"type": "integer", "minimum": 1, "maximum": 5, "x-unique": "once"}
    for value in (1, 3, 5):
        schema_checks.validate(value, schema, cls=Draft202012Validator, format_checker=FormatChecker())
    with pytest.raises(jsonschema.ValidationError, match="7 is greater than the maximum of 5"):
        schema_checks.validate(7, schema, cls=Draft202012Validator)
    with pytest.raises(jsonschema.ValidationError, match="'3' is not of type 'integer'"):
        schema_checks.validate("3", schema, cls=Draft202012Validator)
    assert checks == [schema]
    # another schema (or the same one changed) is checked again
    schema_checks.validate(2, {**schema, "maximum": 2}, cls=Draft202012Validator)
    assert len(checks) == 2


def test_an_invalid_schema_raises_every_time():
    bad = {"type": "no-such-type", "x-unique": "bad"}
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            schema_checks.validate(1, bad)


def test_the_same_errors_as_jsonschema():
    schema = {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"]}}, "required": ["a"]}
    for value in ({}, {"a": "z"}, {"a": 1}):
        with pytest.raises(jsonschema.ValidationError) as ours:
            schema_checks.validate(value, schema)
        with pytest.raises(jsonschema.ValidationError) as theirs:
            schema_checks._ORIGINAL(value, schema)
        assert str(ours.value) == str(theirs.value)

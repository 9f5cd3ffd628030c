"""Check each JSON schema against its meta-schema once per test process, not once per validation.

Why: Airflow 3.3's ``Param.resolve`` calls ``jsonschema.validate``, which first checks the *schema* against the
draft's meta-schema (``check_schema``: ``$ref`` and ``allOf`` resolution, milliseconds a call) and only then the
value. DAG serialization resolves every Param of every task several times (``ParamsDict.dump``, ``__eq__`` and
``__repr__`` all resolve), so a ``dag.test()`` run of a DAG with twenty Params and a dozen tasks spends about
5 CPU-seconds checking the same unchanged schemas: measured with py-spy, 26% of an end-to-end test worker's CPU.

:func:`install` replaces ``jsonschema.validate`` in the test process with the same function whose meta-schema
check is remembered per (validator class, schema content). The value is still validated on every call, with the
same error (``best_match``) as before; a schema that fails its check raises as before and is never remembered.
Only the harness installs it (``tests/conftest.py`` in the test processes, ``kip848_harness/demo.py`` in ``make demo``);
a deployment's Airflow runs unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from jsonschema import exceptions, validators

_ORIGINAL = jsonschema.validate
#: (validator class, schema as canonical JSON) of the schemas that passed ``check_schema``
_CHECKED: set[tuple[Any, str]] = set()


def _schema_key(cls: Any, schema: Any) -> tuple[Any, str] | None:
    try:
        return cls, json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):  # not plain JSON (a callable default, say): check it every time
        return None


def validate(instance: Any, schema: Any, cls: Any = None, *args: Any, **kwargs: Any) -> None:
    """``jsonschema.validate`` with the meta-schema check of an already checked schema skipped."""
    if cls is None:
        cls = validators.validator_for(schema)
    key = _schema_key(cls, schema)
    if key is None or key not in _CHECKED:
        cls.check_schema(schema)
        if key is not None:
            _CHECKED.add(key)
    validator = cls(schema, *args, **kwargs)
    error = exceptions.best_match(validator.iter_errors(instance))
    if error is not None:
        raise error


def install() -> None:
    """Make this process's ``jsonschema.validate`` the remembering one (idempotent)."""
    jsonschema.validate = validate


def uninstall() -> None:
    jsonschema.validate = _ORIGINAL

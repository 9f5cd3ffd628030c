"""The arguments a controller class declares, and the one strict check of what a registry or a run gives it.

A controller is configured in two places: the deployment's registry holds its
*target* (hosts, commands, a namespace), and a run may set the few arguments
the class marks ``run=True`` (a stop mode, a region of a templated command).
Both go through :func:`check_arguments` before anything is built or executed:
an unknown key, a wrong type (a bool is not a number), a value outside an
enum or a pattern, a missing required argument: each is refused, all of them
at once, with what the class does declare. A number is finite and within
``[minimum, maximum]``, and never beyond +-2^53 (:data:`NUMBER_LIMIT`, the
integers JSON carries exactly) whatever the declaration; a string holds no NUL. A ``pattern`` is compiled
with RE2 (:mod:`airflow_provider_kip848.kafka.patterns`): a run chooses the value it is matched against, so a
pattern with nested quantifiers must not let a run stall the worker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.patterns import NamePattern, compile_name_pattern

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
    "array": (list, tuple),
}
#: no number of a registry or a run goes beyond this (2^53: every integer up to it is exact in JSON and a float)
NUMBER_LIMIT = 2**53


@lru_cache(maxsize=256)
def _pattern(pattern: str) -> NamePattern:
    """An argument's ``pattern``, compiled once for linear-time matching (InvalidArgument: RE2 refuses it)."""
    return compile_name_pattern(pattern, "pattern")


def number_problem(name: str, value: object) -> str | None:
    """Why ``value`` is not a usable number (NaN, an infinity, beyond +-2^53), or None; bool and non-numbers pass
    (their type is checked elsewhere)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name} must be a finite number, not {value!r}"
    if abs(value) > NUMBER_LIMIT:
        return f"{name} must be between -2^53 and 2^53, not {value!r}"
    return None


@dataclass(frozen=True)
class Arg:
    """One keyword argument of a controller class.

    ``type`` is a JSON type (``string``, ``integer``, ``number``, ``boolean``, ``object``, ``array``);
    ``run``: a run may set it (otherwise only the registry's target may); ``required``: it must be given
    by one of them; ``enum`` / ``pattern`` (a full match) / ``minimum`` / ``maximum`` / ``max_length`` (of a
    string) bound the value; ``default`` is used when nobody gives it; ``description`` is shown where the
    argument is listed.
    """

    type: str
    required: bool = False
    run: bool = False
    enum: tuple[Any, ...] = ()  # Any: values of the type the Arg declares
    pattern: str | None = None
    minimum: float | None = None
    default: Any = None  # Any: values of the type the Arg declares
    description: str = ""
    maximum: float | None = None
    max_length: int | None = None

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"Arg type {self.type!r} is not one of {', '.join(_TYPES)}")
        for key in ("minimum", "maximum"):
            bound = getattr(self, key)
            if bound is None:
                continue
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise ValueError(f"{key} must be a number, not {bound!r}")
            if (problem := number_problem(key, bound)) is not None:
                raise ValueError(problem)
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum:g} is above maximum {self.maximum:g}")
        if self.max_length is not None and (isinstance(self.max_length, bool) or not isinstance(self.max_length, int)
                                            or self.max_length < 1):
            raise ValueError(f"max_length must be a positive integer, not {self.max_length!r}")
        for value in self.enum:
            if (problem := number_problem("an enum value", value)) is not None:
                raise ValueError(problem)
        if self.pattern is not None:
            try:
                _pattern(self.pattern)
            except InvalidArgument as exc:
                raise ValueError(exc.what) from None

    def problem(self, name: str, value: object) -> str | None:
        """Why ``value`` is not valid for this argument (None: it is)."""
        if value is None:
            return f"{name} is null" if self.required else None
        wanted = _TYPES[self.type]
        if isinstance(value, bool) and bool not in wanted:
            return f"{name} must be of type {self.type}, not a boolean"
        if not isinstance(value, wanted):
            return f"{name} must be of type {self.type}, not {type(value).__name__} ({value!r})"
        if (problem := number_problem(name, value)) is not None:
            return problem
        if isinstance(value, str) and "\x00" in value:
            return f"{name} holds a NUL character"
        if self.max_length is not None and isinstance(value, str) and len(value) > self.max_length:
            return f"{name} must be at most {self.max_length} characters long, not {len(value)}"
        if self.enum and value not in self.enum:
            return f"{name} must be one of {', '.join(map(repr, self.enum))}, not {value!r}"
        if self.pattern is not None and _pattern(self.pattern).fullmatch(str(value)) is None:
            return f"{name} {value!r} does not match {self.pattern}"
        if self.minimum is not None and isinstance(value, (int, float)) and value < self.minimum:
            return f"{name} must be at least {self.minimum:g}, not {value!r}"
        if self.maximum is not None and isinstance(value, (int, float)) and value > self.maximum:
            return f"{name} must be at most {self.maximum:g}, not {value!r}"
        return None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Arg:  # Any: JSON read back (XCom, a file, a response)
        """An argument declared in a registry (the ``params`` of a command controller)."""
        known = {"type", "required", "enum", "pattern", "minimum", "maximum", "max_length", "default",
                 "description"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(known))})")
        return cls(type=str(data.get("type", "string")), required=bool(data.get("required", False)), run=True,
                   enum=tuple(data.get("enum") or ()), pattern=data.get("pattern"), minimum=data.get("minimum"),
                   maximum=data.get("maximum"), max_length=data.get("max_length"),
                   default=data.get("default"), description=str(data.get("description") or ""))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, Any] = {"type": self.type}
        for key in ("required", "run"):
            if getattr(self, key):
                out[key] = True
        if self.enum:
            out["enum"] = list(self.enum)
        if self.pattern is not None:
            out["pattern"] = self.pattern
        for key in ("minimum", "maximum", "max_length"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.default is not None:
            out["default"] = self.default
        if self.description:
            out["description"] = self.description
        return out


def check_arguments(schema: Mapping[str, Arg], given: Mapping[str, Any], *, what: str,
                    # Any: registry arguments (YAML values), checked by the schema
                    allowed: Mapping[str, Arg] | None = None) -> list[str]:
    """Every problem of ``given`` against ``schema`` (empty: valid). ``allowed`` restricts which keys may be
    given at all (a run may give only the run arguments); ``what`` names the source in each message."""
    keys = allowed if allowed is not None else schema
    problems = []
    unknown = sorted(set(given) - set(keys))
    if unknown:
        declared = ", ".join(sorted(keys)) or "none"
        problems.append(f"{what}: undeclared argument(s) {', '.join(unknown)} (declared: {declared})")
    for name, value in sorted(given.items()):
        if name in keys and (problem := keys[name].problem(name, value)) is not None:
            problems.append(f"{what}: {problem}")
    return problems


def missing_required(  # Any: registry arguments (YAML values), checked by the schema
        schema: Mapping[str, Arg], *givens: Mapping[str, Any]) -> list[str]:
    """The required arguments that none of ``givens`` sets."""
    return sorted(n for n, a in schema.items() if a.required and all(g.get(n) is None for g in givens))


__all__ = ["NUMBER_LIMIT", "Arg", "check_arguments", "missing_required", "number_problem"]

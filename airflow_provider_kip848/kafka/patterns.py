"""Regular expressions from a deployment's documents, matched against names anyone may create, in linear time.

An ownership rule's ``regex`` is matched against every group id of the cluster, and anyone who may create a
consumer group chooses a group id. With Python's backtracking ``re``, ``(a+)+b`` against ``aaaa...a!`` (64
``a``) takes longer than the universe has existed; one such group stalls the fleet plan for good. These
patterns are compiled with RE2 (``google-re2``), whose matching time is linear in the name's length whatever
the pattern. RE2 has no backreferences (``\\1``, ``(?P=name)``) and no lookaround (``(?=``, ``(?!``,
``(?<=``, ``(?<!``): a pattern using them is refused when the document is read, saying so. Its ``\\d``,
``\\w``, ``\\s`` and ``\\b`` are ASCII (``[0-9]``, ``[0-9A-Za-z_]`` ...), where Python's are Unicode.

:func:`compile_name_pattern` is the one entry: the fleet's ownership map uses it, and so can any other reader
of a stored pattern (a controller registry's ``member_identity.match``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from airflow_provider_kip848.kafka.errors import InvalidArgument

#: The longest pattern accepted (characters); RE2 also refuses a pattern whose program outgrows its memory budget.
MAX_PATTERN_LENGTH = 2000
#: What RE2 cannot do, by the text of its error, in words a map's author reads.
_UNSUPPORTED = (("invalid escape sequence: \\", "a backreference (\\1 ...) or an escape RE2 does not know"),
                ("invalid perl operator: (?=", "a lookahead (?=...)"),
                ("invalid perl operator: (?!", "a negative lookahead (?!...)"),
                ("invalid perl operator: (?<", "a lookbehind (?<=... or (?<!...)"),
                ("invalid perl operator: (?P", "a named backreference (?P=...)"))


class NameMatch(Protocol):
    """A match of a :class:`NamePattern` (the part of ``re.Match`` the readers use)."""

    def group(self, index: int | str = 0) -> str | None: ...

    def groupdict(self) -> dict[str, str | None]: ...


class NamePattern(Protocol):
    """A compiled pattern (the part of ``re.Pattern`` the readers use), matched in linear time."""

    @property
    def pattern(self) -> str: ...

    @property
    def groupindex(self) -> Mapping[str, int]: ...

    def fullmatch(self, text: str) -> NameMatch | None: ...

    def search(self, text: str) -> NameMatch | None: ...


def _options() -> object:
    options = re2.Options()
    options.log_errors = False  # the refusal says why; RE2 would also print it to the worker's stderr
    return cast(object, options)


def compile_name_pattern(pattern: object, where: str) -> NamePattern:
    """``pattern`` compiled for linear-time matching, or :class:`InvalidArgument` naming ``where`` (e.g.
    ``rules[3].regex``) and what RE2 cannot do (a backreference, a lookaround) or what is wrong with it."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument(f"{where}: must be a non-empty regular expression, got {pattern!r}")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidArgument(f"{where}: the regular expression is {len(pattern):,} characters, more than "
                              f"{MAX_PATTERN_LENGTH:,}", remedy="Shorten it (split it into several rules).")
    try:
        return cast(NamePattern, re2.compile(pattern, _options()))
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        lacks = next((what for text, what in _UNSUPPORTED if reason.startswith(text)
                      and (not text.endswith("(?P") or "(?P=" in pattern)), None)
        shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
        if lacks is not None:
            raise InvalidArgument(
                f"{where}: {shown!r} uses {lacks}, which the provider's regular expressions (RE2, matched in "
                "linear time so that no group id can stall a plan) do not have: docs/fleet.md#regular-expressions",
                remedy="Write the pattern without backreferences or lookaround (e.g. list the alternatives, or use "
                       "two rules); see docs/fleet.md#regular-expressions.") from exc
        raise InvalidArgument(f"{where}: {shown!r} is not a valid regular expression ({reason})",
                              remedy="Fix the pattern; see docs/fleet.md#regular-expressions.") from exc


__all__ = ["MAX_PATTERN_LENGTH", "NameMatch", "NamePattern", "compile_name_pattern"]

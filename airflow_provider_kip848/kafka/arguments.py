"""Arguments checked where they enter the core: group ids, id lists and the flags that guard a change.

A flag such as ``dry_run`` decides whether a cluster is changed, so it is
parsed strictly: ``True``/``False`` and the usual spellings of them, anything
else an :class:`~airflow_provider_kip848.kafka.errors.InvalidArgument`. A
typo must never be read as "apply". One parser serves the whole package
(operators, sensors, hooks, change control, the connection form).
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_kip848.kafka.errors import InvalidArgument, InvalidGroupId

#: Spellings of true and false a flag accepts (compared case-insensitively, surrounding blanks ignored).
TRUE_WORDS = frozenset({"true", "t", "yes", "y", "on", "1"})
FALSE_WORDS = frozenset({"false", "f", "no", "n", "off", "0"})


def parse_flag(value: object, name: str = "flag") -> bool:
    """``value`` as a bool, or :class:`InvalidArgument` naming ``name`` when it is not clearly one.

    Accepts bools, the integers 0 and 1, and the words of :data:`TRUE_WORDS` /
    :data:`FALSE_WORDS` (a templated Param renders ``True`` as the text
    ``"True"``). ``None``, ``""``, other numbers and other words are refused.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise InvalidArgument(
        f"{name} must be true or false, not {value!r}.",
        remedy=f"Pass {name}=True or {name}=False (a Param of type boolean).",
    )


def parse_optional_flag(value: object, name: str = "flag") -> bool | None:
    """Like :func:`parse_flag`, but ``None`` (and the text a template renders for it) means "not given"."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    return parse_flag(value, name)


def require_group_id(group_id: object) -> str:
    """``group_id`` itself when it is a non-empty string, else :class:`InvalidGroupId`."""
    if not isinstance(group_id, str):
        raise InvalidGroupId(f"The group id must be a string, not {type(group_id).__name__} {group_id!r}.")
    if not group_id.strip():
        raise InvalidGroupId(f"The group id is empty ({group_id!r}).")
    return group_id


def id_list(name: str, ids: Iterable[str] | None) -> tuple[str, ...]:
    """Member or instance ids as a tuple; a bare string (one id, or a list rendered as text) is refused."""
    if ids is None:
        return ()
    if isinstance(ids, (str, bytes)):
        raise InvalidArgument(f"{name} must be a list of ids, not the string {ids!r}.",
                              remedy=f"Pass a list, e.g. {name}=[{ids!r}].")
    return tuple(ids)

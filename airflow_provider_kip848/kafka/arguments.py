"""Arguments checked where they enter the core: group ids, id lists and the flags that guard a change.

A flag such as ``dry_run`` decides whether a cluster is changed, so it is
parsed strictly: ``True``/``False`` and the usual spellings of them, anything
else an :class:`~airflow_provider_kip848.kafka.errors.InvalidArgument`. A
typo must never be read as "apply". One parser serves the whole package
(operators, sensors, hooks, change control, the connection form). Structured
text a deployment gives (an ownership map, a controller registry) is read with
:func:`load_strict`, which refuses a key given twice.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import yaml

from airflow_provider_kip848.kafka.errors import InvalidArgument, InvalidGroupId

#: A JSON-schema ``pattern`` for group-id form fields: what :func:`require_group_id` accepts (no
#: blanks around the id, no control or invisible characters), so a trigger form refuses it first.
GROUP_ID_PATTERN = r"^(?!.*[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff])\S(.*\S)?$"

#: What the name of an application controller in a deployment's registry looks like (never a module path:
#: no ':' or '/'); the ownership map, the registry and the DAGs' forms check names with it.
CONTROLLER_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"

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


def require_bool(value: object, name: str) -> bool:
    """``value`` when it is a ``bool``; anything else is :class:`InvalidArgument`.

    The typed API (hooks and backends) takes real booleans for the flags that
    guard a change: a string there is a caller's bug (``"false"`` is truthy),
    and neither silently applying nor silently validating is acceptable.
    Operators parse templated text with :func:`parse_flag` before calling it.
    """
    if isinstance(value, bool):
        return value
    raise InvalidArgument(
        f"{name} must be a bool (True or False), not {type(value).__name__} {value!r}.",
        remedy=f"Pass {name}=True or {name}=False; operators parse text such as 'true' before the hook sees it.",
    )


def require_choice(value: object, name: str, choices: Iterable[str]) -> str:
    """``value`` when it is one of ``choices`` (exact spelling), else :class:`InvalidArgument` listing them."""
    options = tuple(choices)
    if isinstance(value, str) and value in options:
        return value
    raise InvalidArgument(f"{name} must be one of {', '.join(options)}, not {value!r}.")


def is_template(value: object) -> bool:
    """Whether ``value`` is Jinja text rendered only at run time (checked then, not when the DAG is parsed)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def require_group_id(group_id: object) -> str:
    """``group_id`` itself when it is a usable group id, else :class:`InvalidGroupId`.

    Kafka accepts any string as a group id, so an id with a stray blank or an
    invisible character names a *different* group: a config set on it, or a
    wait on it, silently misses the real group. Leading or trailing whitespace
    and control characters are therefore refused everywhere.
    """
    if not isinstance(group_id, str):
        raise InvalidGroupId(f"The group id must be a string, not {type(group_id).__name__} {group_id!r}.")
    if not group_id.strip():
        raise InvalidGroupId(f"The group id is empty ({group_id!r}).")
    if group_id != group_id.strip():
        raise InvalidGroupId(f"The group id {group_id!r} has leading or trailing whitespace.",
                             remedy=f"Did you mean {group_id.strip()!r}? Remove the blanks around the id.")
    bad = sorted({c for c in group_id if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})
    if bad:
        shown = ", ".join(f"U+{ord(c):04X}" for c in bad)
        raise InvalidGroupId(f"The group id {group_id!r} contains control or invisible characters ({shown}).",
                             remedy="Copy the id from kafka-groups --list, or type it again.")
    return group_id


def id_list(name: str, ids: Iterable[str] | None) -> tuple[str, ...]:
    """Member or instance ids as a tuple; a bare string (one id, or a list rendered as text) is refused."""
    if ids is None:
        return ()
    if isinstance(ids, (str, bytes)):
        raise InvalidArgument(f"{name} must be a list of ids, not the string {ids!r}.",
                              remedy=f"Pass a list, e.g. {name}=[{ids!r}].")
    return tuple(ids)


def similar_group_ids(group_id: str, known: Iterable[str], limit: int = 5) -> list[str]:
    """Known ids a mistyped ``group_id`` probably meant: the same after Unicode normalisation and case
    folding (look-alike characters, blanks), or close by edit distance."""

    def folded(text: str) -> str:
        return "".join(c for c in unicodedata.normalize("NFKC", text).casefold()
                       if not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf"))

    ids = sorted(set(known) - {group_id})
    same = [g for g in ids if folded(g) == folded(group_id)]
    close = difflib.get_close_matches(group_id, ids, n=limit, cutoff=0.8)
    return list(dict.fromkeys(same + close))[:limit]


def parse_number(value: object, name: str, *, minimum: float = 0, integer: bool = False,
                 optional: bool = False) -> float | None:
    """``value`` as a finite number >= ``minimum`` (a whole one with ``integer``); text from a template
    is accepted. ``optional``: ``None`` and the text a template renders for it mean "not given"."""
    if optional and (value is None or (isinstance(value, str) and value.strip() in ("", "None"))):
        return None
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    kind = "a whole number" if integer else "a number"
    if number is None or not math.isfinite(number) or number < minimum or (integer and not number.is_integer()):
        raise InvalidArgument(f"{name} must be {kind} >= {minimum:g}, not {value!r}.")
    return int(number) if integer else number


def topic_list(value: object, name: str = "topics") -> list[str] | None:
    """Topic names from a list, or from comma-separated text (a form field, a rendered template);
    None or empty text: not given. Names are stripped; an empty name or a non-text item is refused."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "[]")):
        return None
    if isinstance(value, str):
        items: list[object] = [t for t in value.strip().strip("[]").split(",")]
        items = [str(t).strip().strip("'\"") for t in items]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise InvalidArgument(f"{name} must be a list of topic names, not {value!r}.")
    topics: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidArgument(f"{name} has an empty or non-text topic name: {value!r}.",
                                  remedy="List topic names, e.g. ['orders', 'payments'].")
        # Kafka's topic names are [a-zA-Z0-9._-]: anything else is another separator (';', '|', a blank, a
        # newline, '/'), and the text is not one topic name
        if not TOPIC_NAME.fullmatch(item.strip()):
            other = next(c for c in item.strip() if not TOPIC_NAME.fullmatch(c))
            raise InvalidArgument(
                f"{name} has {item.strip()!r}, which is not a topic name: it holds {_separator(other)}, and "
                f"{name} " + ("are separated by commas only." if isinstance(value, str) else "is a list of names."),
                remedy=f"Give {name} comma-separated (orders,payments) or as a list (['orders', 'payments']).")
        topics.append(item.strip())
    return topics


#: what a Kafka topic name is made of (``org.apache.kafka.common.internals.Topic``)
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
#: characters a list-valued argument must not hold inside one of its values: another separator than the one
#: documented (a value holding one would be taken as one value, meaning two)
LIST_SEPARATORS = re.compile(r"[,;|\s]")


def _separator(char: str) -> str:
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a blank"}
    return names.get(char, "a blank" if char.isspace() else repr(char))


def require_single_values(values: Iterable[object], name: str, documented: str) -> None:
    """Refuse a value of a list-valued argument that holds a list separator (``,``, ``;``, ``|``, a blank, a
    newline): it would be taken as one value. ``documented``: the form the argument documents, for the remedy."""
    for value in values:
        found = LIST_SEPARATORS.search(value) if isinstance(value, str) else None
        if found:
            raise InvalidArgument(
                f"{name} has the value {value!r}, which holds {_separator(found.group())}: it would be taken as one "
                "value.", remedy=f"Give {name} {documented}.")


# -- structured text (ownership maps, controller registries) -------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key repeated in one mapping (PyYAML keeps the last silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: the base constructor reports it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is repeated",
                                                    key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} is repeated")
        out[key] = value
    return out


def load_strict(text: str, *, json_only: bool = False) -> Any:
    """JSON or YAML text (a deployment's file, an Airflow Variable) parsed safely and strictly: a key repeated
    in one mapping is an error in both formats (neither silently keeps the last). Raises ValueError (JSON)
    or ``yaml.YAMLError`` (YAML)."""
    if json_only or text.lstrip().startswith(("{", "[")):
        return json.loads(text, object_pairs_hook=_no_duplicate_pairs)
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects


"""Arguments checked where they enter the core: group ids, id lists and the flags that guard a change.

A flag such as ``dry_run`` decides whether a cluster is changed, so it is
parsed strictly: ``True``/``False`` and the usual spellings of them, anything
else an :class:`~airflow_provider_kip848.kafka.errors.InvalidArgument`. A
typo must never be read as "apply". One parser serves the whole package
(operators, sensors, hooks, change control, the connection form). Structured
text a deployment gives (an ownership map, a controller registry) is read with
:func:`load_strict` (:mod:`~airflow_provider_kip848.kafka.documents`: bounded in
size, nesting and aliases, a key given twice refused). Numbers are read with
:func:`parse_number`: finite, within the minimum and maximum the caller names.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Iterable

from airflow_provider_kip848.kafka.code_points import INVISIBLE_RANGES, MARK_RANGES, as_ranges, is_invisible, is_mark
from airflow_provider_kip848.kafka.documents import load_strict as load_strict  # the one reader, re-exported
from airflow_provider_kip848.kafka.errors import InvalidArgument, InvalidGroupId


def _class_body(ranges: Iterable[tuple[int, int]]) -> str:
    """Inclusive code-point ranges as the body of a regex character class (``\\uXXXX`` / ``\\UXXXXXXXX``)."""
    def esc(c: int) -> str:
        return f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"
    return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges)


def _clip(ranges: Iterable[tuple[int, int]], planes: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The part of ``ranges`` inside ``planes`` (both inclusive and sorted), adjacent pieces joined."""
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        for lo, hi in planes:
            start, end = max(a, lo), min(b, hi)
            if start > end:
                continue
            if out and out[-1][1] + 1 == start:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
    return tuple(out)


# :data:`~airflow_provider_kip848.kafka.code_points.INVISIBLE_RANGES`: characters no identifier may hold
# (controls, format characters, surrogates, separators, every space but the plain one, invisible letters). Each
# prints as nothing or as a space, so an id holding one names another group than the one it shows. Combining
# marks (:data:`~airflow_provider_kip848.kafka.code_points.MARK_RANGES`) are refused with nothing to sit on (at
# the start of an id, or on a blank or an ASCII punctuation sign), where one prints over the quote or the dash
# around it. Both are literal tables (computing them at import cost every DAG parse 1.7 s).

#: What a combining mark may not sit on (besides the start): the plain space and ASCII punctuation/symbols.
_NO_BASE = frozenset(c for c in range(0x20, 0x7F) if not chr(c).isalnum())

#: The Basic Multilingual Plane without the surrogates: what a form's pattern can name portably. A JSON-schema
#: ``pattern`` is an ECMA-262 regex: a browser reads it without the ``u`` flag, where ``\\U`` escapes do not
#: exist and an astral character is two UTF-16 surrogates (a class holding the surrogates would refuse every
#: emoji), while Airflow's server reads it with Python's ``re``.
_FORM_PLANE = ((0x0000, 0xD7FF), (0xE000, 0xFFFF))

#: A JSON-schema ``pattern`` for group-id (and application-id, user-id) form fields: what
#: :func:`identifier_problem` accepts (no blanks around the id; none of the invisible code points; no combining mark
#: with nothing to sit on) within :data:`_FORM_PLANE`, in ``\\uXXXX`` escapes only, so the browser and the
#: server read it alike and a trigger form refuses such an id first. The few invisible characters beyond the
#: plane (tags, some format characters) are refused by the provider at the run's first task. Another
#: normalization form (a decomposed 'ü') is not refused: it is a different id, matched only exactly, and an id
#: the cluster does not know is refused at run time showing the code points that differ.
GROUP_ID_PATTERN = (rf"^(?!.*[{_class_body(_clip(INVISIBLE_RANGES, _FORM_PLANE))}])"
                    rf"(?!(?:.*[{_class_body(as_ranges(_NO_BASE))}])?[{_class_body(_clip(MARK_RANGES, _FORM_PLANE))}])"
                    r"\S(.*\S)?$")

#: What the name of an application controller in a deployment's registry looks like (never a module path:
#: no ':' or '/'); the ownership map, the registry and the DAGs' forms check names with it.
CONTROLLER_NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
#: :data:`CONTROLLER_NAME_PATTERN` as a form's JSON-schema ``pattern``: anchored with a lookahead, because a
#: ``$`` lets a trailing newline through (``re.search``, which jsonschema uses).
CONTROLLER_NAME_FORM_PATTERN = rf"^{CONTROLLER_NAME_PATTERN}(?![\s\S])"
#: A form's pattern for a user id (an approver): the rules of a group id (:func:`identifier_problem`).
USER_ID_PATTERN = GROUP_ID_PATTERN

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


def code_points(text: str) -> str:
    """``text`` as its code points, ``U+0068 U+0308 ...``: how two ids that print alike are told apart."""
    return " ".join(f"U+{ord(c):04X}" for c in text)


def show_id(text: str) -> str:
    """An id for a message: quoted, and followed by its code points when it holds anything but printable ASCII
    (a decomposed 'ü', a no-break space or a Cyrillic 'е' print like the id the user meant)."""
    if all(" " <= c <= "~" for c in text):
        return repr(text)
    return f"{text!r} ({code_points(text)})"


def _char_problem(text: str, index: int) -> str | None:
    code = ord(text[index])
    if is_invisible(code):
        return "space-like" if unicodedata.category(text[index]) == "Zs" else "invisible"
    if is_mark(code):
        base = index - 1
        while base >= 0 and is_mark(ord(text[base])):
            base -= 1
        if base < 0 or ord(text[base]) in _NO_BASE:
            return "a combining mark with no letter under it"
    return None


def is_hidden(text: str, index: int) -> bool:
    """Whether ``text[index]`` prints as nothing, as a blank or over its neighbours (the characters
    :func:`identifier_problem` refuses): what a rendering shows by its code point instead (:mod:`.inert`)."""
    return _char_problem(text, index) is not None


def hidden_characters(text: str) -> str | None:
    """What in ``text`` prints as nothing, as a blank or over its neighbours (see :func:`identifier_problem`),
    each character by code point, name and position; None when nothing does."""
    found = [(i, c, why) for i, c in enumerate(text) if (why := _char_problem(text, i)) is not None]
    if not found:
        return None
    listed = ", ".join(dict.fromkeys(f"U+{ord(c):04X}" for _, c, _ in found))
    shown = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')} at character {i + 1} ({why})"
                      for i, c, why in found[:6])
    more = f" and {len(found) - 6} more" if len(found) > 6 else ""
    return f"control or invisible characters ({listed}): {shown}{more}"


def identifier_problem(text: str) -> str | None:
    """Why ``text`` cannot be an identifier a person typed (a group id, an application id, a user id), or None.

    Refused: blanks around it; controls; every space-like character but the plain space (U+00A0, U+2007,
    U+202F, U+3000 ... print as a space); format and other invisible characters (zero-width, direction marks,
    the soft hyphen, variation selectors, the combining grapheme joiner, Hangul fillers, tags); a combining
    mark with nothing to sit on (at the start, or on a blank or an ASCII punctuation sign). The reason names
    each offending character by code point, because the id printed back looks like the one the user meant."""
    if not text.strip():
        return f"is empty ({text!r})"
    if text != text.strip():
        ends = dict.fromkeys(f"U+{ord(c):04X}" for c in (text[0], text[-1]) if c.isspace())
        return f"has leading or trailing whitespace ({', '.join(ends)})"
    hidden = hidden_characters(text)
    return None if hidden is None else f"contains {hidden}"


def require_group_id(group_id: object) -> str:
    """``group_id`` itself when it is a usable group id, else :class:`InvalidGroupId`.

    Kafka accepts any string as a group id, so an id with a stray blank or an
    invisible character names a *different* group: a config set on it, or a
    wait on it, silently misses the real group. :func:`identifier_problem` says
    what is refused; the message names each character by code point. An id in
    another Unicode normalization form than the real one is a different id too:
    it is not refused here (a group may really be named so) but matched only
    exactly, and one the cluster does not know is refused where it matters,
    naming the similar ids with the code points that differ.
    """
    if not isinstance(group_id, str):
        raise InvalidGroupId(f"The group id must be a string, not {type(group_id).__name__} {group_id!r}.")
    problem = identifier_problem(group_id)
    if problem is None:
        return group_id
    if not group_id.strip():
        raise InvalidGroupId(f"The group id {problem}.")
    if group_id != group_id.strip():
        raise InvalidGroupId(f"The group id {show_id(group_id)} {problem}.",
                             remedy=f"Did you mean {group_id.strip()!r}? Remove the blanks around the id.")
    raise InvalidGroupId(f"The group id {show_id(group_id)} {problem}.",
                         remedy="Copy the id from kafka-groups --list, or type it again (inside an id only the "
                                "plain space U+0020 may stand for a blank).")


def id_list(name: str, ids: Iterable[str] | None) -> tuple[str, ...]:
    """Member or instance ids as a tuple; a bare string (one id, or a list rendered as text) is refused."""
    if ids is None:
        return ()
    if isinstance(ids, (str, bytes)):
        raise InvalidArgument(f"{name} must be a list of ids, not the string {ids!r}.",
                              remedy=f"Pass a list, e.g. {name}=[{ids!r}].")
    return tuple(ids)


def folded(text: str) -> str:
    """``text`` as a person reads it: one normalization (NFKC), one case, no blanks or invisible characters."""
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold()
                   if not c.isspace() and not is_invisible(ord(c)))


def similar_group_ids(group_id: str, known: Iterable[str], limit: int = 5) -> list[str]:
    """Known ids a mistyped ``group_id`` probably meant: the same after Unicode normalisation and case
    folding (look-alike characters, another normalization form, blanks, invisible characters), or close by
    edit distance."""
    ids = sorted(set(known) - {group_id})
    same = [g for g in ids if folded(g) == folded(group_id)]
    close = difflib.get_close_matches(group_id, ids, n=limit, cutoff=0.8)
    return list(dict.fromkeys(same + close))[:limit]


def spell_difference(given: str, other: str) -> str | None:
    """Where ``other`` differs from ``given`` in code points, when the difference does not show in print
    (any character of it outside printable ASCII: a decomposed 'ü', a no-break space, a Cyrillic 'е');
    None for a difference one can see (an ASCII typo)."""
    matcher = difflib.SequenceMatcher(None, given, other, autojunk=False)
    parts, hidden = [], False
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        mine, theirs = given[i1:i2], other[j1:j2]
        hidden = hidden or any(not " " <= c <= "~" for c in mine + theirs)
        parts.append(f"at character {j1 + 1} it has {code_points(theirs) or 'nothing'} where the given id has "
                     f"{code_points(mine) or 'nothing'}")
    return "; ".join(parts) if hidden and parts else None


def describe_similar(given: str, near: Iterable[str]) -> str:
    """``similar ids: ...`` for a message (empty without any): each id quoted, with its code points where it
    differs from ``given`` only in a way print does not show (else the suggestion reads like the input)."""
    shown = []
    for other in near:
        diff = spell_difference(given, other)
        shown.append(f"{other!r} ({diff})" if diff else repr(other))
    return f"similar ids: {', '.join(shown)}" if shown else ""


#: The shortest poll interval of a wait, in seconds: each poll is a request to the group's coordinator (and a
#: Migrated wait's may ask the platform), so 0 is a busy loop on a group that is not there yet; 0.2 s is the
#: floor the DAGs' forms have always had (``poll_seconds``), five requests a second per wait at most.
MIN_POLL_SECONDS = 0.2
#: The longest poll interval of a wait (an hour): a wait polled more rarely sees a state change too late to act.
MAX_POLL_SECONDS = 3600.0
#: The longest duration any argument may give (a timeout, a window, a settle time): a week, in seconds. Longer is
#: a typo (minutes given as seconds ...) and past what ``time.sleep``, ``timedelta`` and the clients take.
MAX_SECONDS = 7 * 24 * 3600.0
#: :data:`MAX_SECONDS` in minutes, for the arguments given in minutes.
MAX_MINUTES = MAX_SECONDS / 60
#: The largest count of records (a lag, an offset): Kafka's offsets are signed 64-bit.
MAX_RECORDS = 2**63 - 1
#: Java's largest int: the largest value of a broker's int config (a session timeout in ms, standby replicas).
MAX_INT32 = 2**31 - 1
#: The largest count of members or instances (Java's int, which the group coordinator counts in).
MAX_MEMBERS = MAX_INT32
_WAIT_MINUTES = (0.0, MAX_MINUTES)
#: The range of each numeric argument the provider takes, by name: :func:`parse_number` applies it wherever the
#: name is parsed (a sensor, an operator, the fleet's moves, the lag Params), so they agree; a caller's own
#: ``minimum``/``maximum`` narrow it. docs/operators.md lists them.
RANGES: dict[str, tuple[float, float]] = {
    "poll_interval": (MIN_POLL_SECONDS, MAX_POLL_SECONDS), "poll_seconds": (MIN_POLL_SECONDS, MAX_POLL_SECONDS),
    "remove_members_after": (0.0, MAX_SECONDS), "settle_seconds": (0.0, MAX_SECONDS),
    "empty_settle_seconds": (0.0, MAX_SECONDS), "liveness_seconds": (0.0, MAX_SECONDS),
    "confirm_seconds": (0.0, MAX_SECONDS), "lag_window_seconds": (1.0, MAX_SECONDS),
    # a look at the platform during a wait is a command or an API read: at most one a second
    "platform_check_seconds": (1.0, MAX_POLL_SECONDS), "platform_look_timeout": (1.0, MAX_POLL_SECONDS),
    "timeout_minutes": _WAIT_MINUTES, "coordinator_unavailable_minutes": _WAIT_MINUTES,
    "first_instance_timeout_minutes": _WAIT_MINUTES, "instance_timeout_minutes": _WAIT_MINUTES,
    "expected_members": (1, MAX_MEMBERS), "expected_instances": (1, MAX_MEMBERS),
    "max_lag": (0, MAX_RECORDS), "max_partition_lag": (0, MAX_RECORDS), "lag_margin_records": (0, MAX_RECORDS),
    # the lag allowed over the lag before the change, as a fraction of it: 1000 is a thousand times that lag
    "lag_margin_fraction": (0.0, 1000.0),
}


def _num(bound: float) -> str:
    """A bound for a message: 3,600,000 rather than 3.6e+06."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _shown(value: object) -> str:
    """A refused value for a message, cut short (an int of thousands of digits cannot even be repr'd)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a whole number of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_number(value: object, name: str, *, minimum: float = 0, maximum: float | None = None,
                 integer: bool = False, optional: bool = False) -> float | None:
    """``value`` as a finite number within [``minimum``, ``maximum``] (a whole one with ``integer``); text from a
    template is accepted. ``optional``: ``None`` and the text a template renders for it mean "not given".
    Anything else (``NaN``, ``Infinity``, ``1e18`` past the maximum, ``"30s"``) is :class:`InvalidArgument`
    naming ``name`` and the range. A ``name`` of :data:`RANGES` is held to its range too."""
    if name in RANGES:
        low, high = RANGES[name]
        minimum, maximum = max(minimum, low), high if maximum is None else min(maximum, high)
    if optional and (value is None or (isinstance(value, str) and value.strip() in ("", "None"))):
        return None
    number: int | float | None = None  # an int stays exact: 2**63 - 1 is not rounded up past the maximum
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        for convert in (int, float):
            try:
                number = convert(text)
                break
            except ValueError:
                continue
    kind = "a whole number" if integer else "a number"
    span = f">= {_num(minimum)}" if maximum is None else f"from {_num(minimum)} to {_num(maximum)}"
    if (number is None or (isinstance(number, float) and not (math.isfinite(number) and (number.is_integer()
                                                                                      or not integer)))
            or number < minimum or (maximum is not None and number > maximum)):
        raise InvalidArgument(f"{name} must be {kind} {span}, not {_shown(value)}.")
    if integer:
        return int(number)
    return float(number)


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

"""Documents a deployment or a run gives (JSON, YAML) read within bounds, before anything formats them.

A controller registry, an ownership map, an Airflow Variable and a run's conf are text someone else wrote.
Read without bounds, a few hundred bytes of YAML aliases (a "billion laughs") expand into a value whose
``repr`` takes minutes to build, JSON nested ten thousand deep is a ``RecursionError`` in ``json``, and
``.nan``/``NaN``/``1e999`` are numbers every comparison answers "no" to. :func:`load_strict` is the one
reader: it refuses, naming the document and the limit, before the value exists:

* more than :data:`MAX_DOCUMENT_BYTES` of text;
* mappings and lists nested deeper than :data:`MAX_DEPTH`;
* YAML aliases that repeat more than :data:`MAX_ALIAS_NODES` nodes in all, or an alias inside its own anchor;
* a number that is not finite; a key given twice in one mapping (neither format silently keeps the last).

YAML's merge key (``<<: *defaults``) works as its specification says: the merged keys come first and a key
written in the mapping itself overrides them; two merge keys in one mapping are a repeated key.
:func:`check_value` holds an already parsed value (a run's conf, which Airflow parsed) to the same bounds.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, SequenceNode

from airflow_provider_kip848.kafka.errors import InvalidArgument

#: The longest document read (UTF-8 bytes): 1 MiB, some thousand ownership rules or registry entries.
MAX_DOCUMENT_BYTES = 1024 * 1024
#: The deepest nesting of mappings and lists (a registry needs 6 levels, an ownership map 5).
MAX_DEPTH = 64
#: The nodes (scalars, mappings, lists) YAML aliases may repeat in one document, all aliases together.
MAX_ALIAS_NODES = 100_000
#: The nodes an already parsed value may hold (a run's conf); a document's own are bounded by its size.
MAX_NODES = 200_000
#: Where the limits are documented, for the remedy.
LIMITS_DOC = "docs/reliability.md#readers-that-end-and-numbers-that-are-finite"
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: a JSON string or a bracket: what the depth pre-scan looks at (each alternative starts with another character,
#: so the scan is linear)
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class DocumentRefused(InvalidArgument):
    """A document (or a run's conf) is beyond the reader's bounds, or holds a number that is not finite."""

    remedy = f"Keep the document within the limits ({LIMITS_DOC}) and give it again; nothing was done with it."


def _refuse(source: str, what: str) -> DocumentRefused:
    return DocumentRefused(f"{source} is refused: {what}")


def _check_size(text: str, source: str) -> None:
    size = len(text) if len(text) > MAX_DOCUMENT_BYTES else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_DOCUMENT_BYTES:
        raise _refuse(source, f"it is {size:,} bytes or more, more than the limit of {MAX_DOCUMENT_BYTES:,} bytes")


def _too_deep(source: str) -> DocumentRefused:
    return _refuse(source, f"it nests mappings and lists deeper than {MAX_DEPTH} levels")


# -- JSON -------------------------------------------------------------------------------------------------------


def _json_depth(text: str, source: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` before ``json`` recurses into it (a linear scan)."""
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(source)
        elif char in "]}":
            depth -= 1


def _load_json(text: str, source: str, finite: bool) -> Any:  # Any: a document of any shape; callers check it
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:  # Any: JSON values
        out: dict[str, Any] = {}  # Any: JSON values
        for key, value in items:
            if key in out:
                raise ValueError(f"the key {key!r} is repeated")
            out[key] = value
        return out

    def constant(name: str) -> float:
        if not finite:
            return float(name)
        raise _refuse(source, f"it holds the number {name}: numbers must be finite")

    def number(text: str) -> float:
        value = float(text)
        if finite and not math.isfinite(value):
            raise _refuse(source, f"it holds the number {text[:40]}, beyond what a float holds: numbers must be "
                                  "finite")
        return value

    _json_depth(text, source)
    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant, parse_float=number)


# -- YAML -------------------------------------------------------------------------------------------------------


def _yaml_bounds(text: str, source: str) -> None:
    """Walk the document's parse events (PyYAML's parser keeps its own stack: no recursion) and refuse nesting
    deeper than :data:`MAX_DEPTH` and aliases that repeat more than :data:`MAX_ALIAS_NODES` nodes, counting
    each alias as the nodes of its anchor with their own aliases expanded, before any node is built."""
    frames: list[list[Any]] = []  # Any: [anchor (str | None), nodes so far (int)] of each open mapping or list
    sizes: dict[str, int] = {}
    repeated = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (MappingStartEvent, SequenceStartEvent)):
            if len(frames) >= MAX_DEPTH:
                raise _too_deep(source)
            frames.append([event.anchor, 1])
            continue
        if isinstance(event, (MappingEndEvent, SequenceEndEvent)):
            anchor, count = frames.pop()
            if anchor is not None:
                sizes[anchor] = count
        elif isinstance(event, ScalarEvent):
            count = 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, AliasEvent):
            if event.anchor not in sizes:
                if any(frame[0] == event.anchor for frame in frames):
                    raise _refuse(source, f"the alias *{event.anchor} stands inside its own anchor "
                                          f"&{event.anchor} (a value that contains itself has no end)")
                continue  # an undefined alias: the composer reports it, with its position
            count = sizes[event.anchor]
            repeated += count
            if repeated > MAX_ALIAS_NODES:
                raise _refuse(source, f"its aliases repeat more than {MAX_ALIAS_NODES:,} nodes (the last was "
                                      f"*{event.anchor[:40]}); a few lines of aliases can stand for billions")
        else:
            continue
        if frames:
            frames[-1][1] += count


class _StrictLoader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """PyYAML's safe loader, refusing a key repeated in one mapping (PyYAML keeps the last silently) and a number
    that is not finite; merge keys as YAML's merge specification says."""

    def __init__(self, stream: str, source: str, finite: bool = True) -> None:
        super().__init__(stream)
        self.source = source
        self.finite = finite
        self.checked: set[int] = set()


_MERGE = object()  # a merge key, as the repeated-key check sees it (never equal to a written key)


def _check_keys(loader: _StrictLoader, node: MappingNode) -> None:
    """Refuse a key written twice in ``node`` (and in the mappings it merges), before the merge flattens them:
    merged keys are not written in the mapping, so one written there overrides them (YAML's merge spec)."""
    if id(node) in loader.checked:
        return
    loader.checked.add(id(node))
    seen: set[Any] = set()  # Any: YAML keys (any hashable scalar)
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            key: Any = _MERGE  # Any: a YAML key
            sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
            for merged in sources:
                if isinstance(merged, MappingNode):
                    _check_keys(loader, merged)
        else:
            key = loader.construct_object(key_node)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: the base constructor reports it
            continue
        if duplicate:
            what = "the merge key <<" if key is _MERGE else f"the key {key!r}"
            raise yaml.constructor.ConstructorError(None, None, f"{what} is repeated", key_node.start_mark)
        seen.add(key)


def _construct_mapping(loader: _StrictLoader, node: MappingNode) -> dict[Any, Any]:  # Any: YAML values
    _check_keys(loader, node)
    mapping: dict[Any, Any] = loader.construct_mapping(node)  # Any: YAML values; flattens the merges
    return mapping


def _construct_float(loader: _StrictLoader, node: yaml.ScalarNode) -> float:
    value: float = loader.construct_yaml_float(node)
    if loader.finite and not math.isfinite(value):
        mark = node.start_mark
        raise _refuse(loader.source, f"it holds the number {str(node.value)[:40]} (line {mark.line + 1}, column "
                                     f"{mark.column + 1}): numbers must be finite")
    return value


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def _load_yaml(text: str, source: str, finite: bool) -> Any:  # Any: a document of any shape; callers check it
    _yaml_bounds(text, source)
    loader = _StrictLoader(text, source, finite)  # a SafeLoader subclass: no arbitrary objects
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_strict(text: str, *, json_only: bool = False, source: str = "the document",
                finite: bool = True) -> Any:  # Any: a document of any shape; callers check it
    """JSON or YAML text (a deployment's file, an Airflow Variable) parsed safely, strictly and within bounds.

    Text starting with ``{`` or ``[`` (or any text with ``json_only``) is JSON, anything else YAML. Refused
    with :class:`DocumentRefused` (a ``ValueError``) naming ``source`` and the limit: more than
    :data:`MAX_DOCUMENT_BYTES`, nesting deeper than :data:`MAX_DEPTH`, aliases repeating more than
    :data:`MAX_ALIAS_NODES` nodes or standing inside their own anchor, a number that is not finite. A key
    repeated in one mapping raises ValueError (JSON) or ``yaml.YAMLError`` (YAML), as a syntax error does.

    ``finite=False`` leaves non-finite numbers to the caller, for a document whose parts are judged one by one
    (the controller registry: a NaN blocks the one entry that holds it, named, not every entry of the
    deployment)."""
    _check_size(text, source)
    if json_only or text.lstrip().startswith(("{", "[")):
        return _load_json(text, source, finite)
    return _load_yaml(text, source, finite)


def check_value(value: object, source: str) -> None:
    """Hold an already parsed value (a run's conf) to the documents' bounds: nesting within :data:`MAX_DEPTH`, at
    most :data:`MAX_NODES` nodes and :data:`MAX_DOCUMENT_BYTES` of text, every number finite (the one that is not
    named by its path). Iterative: a value nested past Python's recursion limit is refused, not a RecursionError."""
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    nodes = chars = 0
    while stack:
        item, path, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise _refuse(source, f"it holds more than {MAX_NODES:,} values")
        if isinstance(item, float) and not math.isfinite(item):
            raise _refuse(source, f"{path.lstrip('.') or 'its value'} is {item!r}: numbers must be finite")
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, Mapping) or isinstance(item, (list, tuple)):
            if depth >= MAX_DEPTH:
                raise _too_deep(source)
            if isinstance(item, Mapping):
                for key, child in item.items():
                    chars += len(str(key)) if isinstance(key, str) else 0
                    stack.append((child, f"{path}.{str(key)[:80]}", depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))
        if chars > MAX_DOCUMENT_BYTES:
            raise _refuse(source, f"its text is more than {MAX_DOCUMENT_BYTES:,} characters")


__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "MAX_DOCUMENT_BYTES", "MAX_NODES", "DocumentRefused", "check_value",
           "load_strict"]

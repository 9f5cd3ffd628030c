"""Issue 45, item 3: the documents a deployment or a run gives are read within bounds, before anything formats them.

The readers are the real ones: the fleet's ownership map (``OwnershipMap.from_text``, which the fleet DAG's plan
and the fleet view read a Variable or a file with), the controller registry (``ControllerRegistry.from_text``,
which every worker reads ``[kip848] controllers`` with) and the reader both use, ``load_strict``. A reader that
used to hang (an alias bomb formatted with ``repr``/``str``) runs in a thread: the test asserts that it
finished, with a join far longer than any refusal needs, never a time.
"""

from __future__ import annotations

import json
import threading

import pytest
import yaml

from airflow_provider_kip848.controllers.errors import ControllerRegistryInvalid
from airflow_provider_kip848.controllers.registry import ControllerRegistry
from airflow_provider_kip848.fleet import OwnershipMap
from airflow_provider_kip848.fleet.ownership import OwnershipError
from airflow_provider_kip848.kafka.arguments import load_strict
from airflow_provider_kip848.kafka.documents import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    DocumentRefused,
    check_value,
)

#: seven levels of nine aliases: 9**7 (4.8 million) strings from 250 bytes of YAML (two levels more and its repr
#: outgrows a worker's memory: the size chosen lets today's code show its failure without taking the machine down)
BOMB_ANCHORS = "".join(f"  - &l{i} [" + ", ".join([f"*l{i - 1}" if i else '"lol"'] * 9) + "]\n" for i in range(7))


def finished(call, *args, **kwargs):
    """``call(*args)`` in a thread; (True, its result or exception) when it ended within a join far longer than
    any refusal takes (a hang is reported, not waited out), else (False, None)."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = call(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(120)
    if thread.is_alive():
        return False, None
    return True, outcome.get("error", outcome.get("value"))


def test_an_alias_bomb_in_the_ownership_map_is_refused_before_it_is_formatted():
    text = "anchors:\n" + BOMB_ANCHORS + "rules:\n  - prefix: orders-\n    app: *l6\n    team: commerce\n"
    ended, error = finished(OwnershipMap.from_text, text, source="Variable kip848_ownership_map")
    assert ended, "reading the map did not end"
    assert isinstance(error, OwnershipError), error
    message = str(error)
    assert message.startswith("the ownership map Variable kip848_ownership_map is not valid: is refused: its aliases "
                              f"repeat more than {MAX_ALIAS_NODES:,} nodes"), message
    assert "lol" not in message and len(message) < 600


def test_an_alias_bomb_in_the_controller_registry_is_refused_before_it_is_formatted():
    text = ("version: 1\nanchors:\n" + BOMB_ANCHORS
            + "controllers:\n  orders:\n    kind: command\n    description: *l6\n    target: {}\n")
    ended, error = finished(ControllerRegistry.from_text, text, "/etc/kip848/controllers.yaml")
    assert ended, "reading the registry did not end"
    assert isinstance(error, ControllerRegistryInvalid), error
    assert f"its aliases repeat more than {MAX_ALIAS_NODES:,} nodes" in str(error) and "lol" not in str(error)


def test_an_alias_inside_its_own_anchor_is_refused():
    with pytest.raises(DocumentRefused, match=r"the alias \*a stands inside its own anchor &a"):
        load_strict("rules: &a [*a]", source="the ownership map m.yaml")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_deep_nesting_is_refused_cleanly_not_a_recursion_error(fmt):
    deep = "[" * 50_000 + "]" * 50_000
    text = '{"rules": ' + deep + "}" if fmt == "json" else "rules:\n  - x: " + deep.replace("[", "{a: ").replace(
        "]", "}")
    with pytest.raises(OwnershipError) as refused:
        OwnershipMap.from_text(text, source="map." + fmt)
    assert f"is refused: it nests mappings and lists deeper than {MAX_DEPTH} levels" in str(refused.value)
    # the limit itself is fine: nesting up to it reads
    assert load_strict("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_an_oversize_document_is_refused_naming_the_limit():
    rule = {"prefix": "orders-", "app": "orders", "team": "commerce"}
    text = json.dumps({"rules": [dict(rule, prefix=f"orders-{i}-") for i in range(30_000)]})
    assert len(text) > MAX_DOCUMENT_BYTES
    with pytest.raises(OwnershipError) as refused:
        OwnershipMap.from_text(text, source="map.json")
    assert f"more than the limit of {MAX_DOCUMENT_BYTES:,} bytes" in str(refused.value)
    with pytest.raises(ControllerRegistryInvalid, match="more than the limit of 1,048,576 bytes"):
        ControllerRegistry.from_text("# " + "x" * MAX_DOCUMENT_BYTES + "\nversion: 1\n", "controllers.yaml")


@pytest.mark.parametrize("text, shown", [
    ("rules:\n  - {prefix: a, app: a, team: t, expected_instances: .nan}\n", "the number .nan (line 2, column"),
    ("rules:\n  - {prefix: a, app: a, team: t, expected_instances: .inf}\n", "the number .inf"),
    ("rules:\n  - {prefix: a, app: a, team: t, expected_instances: 1.0e+999}\n", "the number 1.0e+999"),
    ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "expected_instances": NaN}]}', "the number NaN"),
    ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "expected_instances": -Infinity}]}', "-Infinity"),
    ('{"rules": [{"prefix": "a", "app": "a", "team": "t", "expected_instances": 1e999}]}', "the number 1e999"),
])
def test_a_number_that_is_not_finite_is_refused_by_the_reader(text, shown):
    with pytest.raises(DocumentRefused) as refused:
        load_strict(text, source="the ownership map m.yaml")
    assert shown in str(refused.value) and "numbers must be finite" in str(refused.value)


MERGED_MAP = """
defaults: &commerce
  team: commerce
  app_controller: orders-k8s
  expected_instances: 3
rules:
  - <<: *commerce
    prefix: orders-
    app: orders
  - <<: *commerce
    prefix: carts-
    app: carts
    expected_instances: 2
"""


def test_a_merge_key_works_and_an_explicit_key_overrides_the_merged_one():
    data = load_strict(MERGED_MAP)
    assert data["rules"][0] == {"team": "commerce", "app_controller": "orders-k8s", "expected_instances": 3,
                                "prefix": "orders-", "app": "orders"}
    assert data["rules"][1]["expected_instances"] == 2  # written in the mapping: it overrides the merged 3
    merged = load_strict("a: &a {x: 1, z: 1}\nb: &b {x: 2, y: 2}\nr: {<<: [*a, *b], z: 9}\n")
    assert merged["r"] == {"x": 1, "y": 2, "z": 9}  # the first mapping merged wins, as YAML's merge spec says
    # through the real reader: the map's unknown top-level key is its own problem, not the merge key's
    with pytest.raises(OwnershipError) as refused:
        OwnershipMap.from_text(MERGED_MAP, source="map.yaml")
    assert str(refused.value) == ("the ownership map map.yaml is not valid: unknown top-level key(s) 'defaults' "
                                  "(known: version, rules). " + OwnershipError.remedy)
    ownership = OwnershipMap.from_text("rules:\n  - &orders {prefix: orders-, app: orders, team: commerce}\n"
                                       "  - {<<: *orders, prefix: orders2-}\n", source="map.yaml")
    assert [(r.prefix, r.app, r.team) for r in ownership.rules] == [("orders-", "orders", "commerce"),
                                                                     ("orders2-", "orders", "commerce")]


@pytest.mark.parametrize("text, repeated", [
    ("a: &a {x: 1}\nr: {<<: *a, y: 1, y: 2}\n", "the key 'y' is repeated"),
    ("a: &a {x: 1}\nr: {<<: *a, <<: *a}\n", "the merge key << is repeated"),
    ("r: {<<: {x: 1, x: 2}}\n", "the key 'x' is repeated"),
])
def test_a_key_written_twice_is_still_refused_with_merge_keys(text, repeated):
    with pytest.raises(yaml.YAMLError, match=repeated):
        load_strict(text)


def test_an_already_parsed_value_is_held_to_the_same_bounds():
    check_value({"group_id": "orders", "limits": [1, 2.5, {"x": None}]}, "the run's conf")
    with pytest.raises(DocumentRefused, match=r"the run's conf is refused: limits\[1\].x is nan"):
        check_value({"limits": [1, {"x": float("nan")}]}, "the run's conf")
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(DocumentRefused, match=f"deeper than {MAX_DEPTH} levels"):
        check_value({"x": deep}, "the run's conf")
    with pytest.raises(DocumentRefused, match="more than 1,048,576 characters"):
        check_value({"x": "y" * (MAX_DOCUMENT_BYTES + 1)}, "the run's conf")


@pytest.mark.parametrize("regex, what", [(r"(orders)-\1", "a backreference"),
                                         (r"(?!legacy)orders-.*", "a negative lookahead"),
                                         (r"(?<=x)orders", "a lookbehind"),
                                         (r"(?P<a>o)(?P=a)", "a named backreference")])
def test_a_pattern_the_linear_engine_lacks_is_refused_when_the_map_is_read(regex, what):
    """A backreference or a lookaround cannot be matched in linear time: refused when the map is read, naming the
    rule and the construct (the map with ``(a+)+b`` on a real broker: tests/integration/test_hostile_group_ids.py)."""
    text = json.dumps({"rules": [{"prefix": "pay-", "app": "payments", "team": "finance"},
                                 {"regex": regex, "app": "orders", "team": "commerce"}]})
    with pytest.raises(OwnershipError) as refused:
        OwnershipMap.from_text(text, source="map.json")
    message = str(refused.value)
    assert f"rules[1].regex: {regex!r} uses {what} (" in message, message
    assert "which the provider's regular expressions (RE2, matched in linear time" in message, message

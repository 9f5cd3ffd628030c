"""Issue 45, item 3: no group id stalls the fleet plan, whatever regex the ownership map holds.

Anyone who may create a consumer group chooses its id. The ownership map's rule ``(a+)+b`` is fine on the ids
it was written for, but Python's backtracking ``re`` tries 2**64 ways to fail on ``aaaa...a!`` (64 ``a``): the
plan hung for good (more than 90 s in the finding). On a real broker: such a group is created by a real
consumer, the inventory is read from the broker and the plan is made from the map. The plan runs in a child
process (a backtracking ``re`` holds the GIL: no thread of the test could even notice the hang): the test
asserts that it finished, with a join far longer than a plan takes (a hang is killed and reported), never a time.
"""

from __future__ import annotations

import multiprocessing
import re

from airflow_provider_kip848.fleet import OwnershipMap, plan_waves, select
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import consume, create_topics, produce
from tests.conftest import wait_until


def _facts(native, groups: list[str]) -> dict:
    return {g: (native.group_listing(g).type.value, native.describe_group(g).state.value,
                {str(tp): o for tp, o in native.group_offsets(g).committed.items()}) for g in groups}


def test_a_group_id_made_to_backtrack_does_not_stall_the_plan(native, bootstrap, unique):
    prefix = unique("hostile") + "-"
    topic = prefix + "topic"
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, (f"v{i}" for i in range(3)))
    legit, hostile = prefix + "aab", prefix + "a" * 64 + "!"
    for group in (legit, hostile):  # offset-only classic groups, as any consumer creates them
        assert consume(bootstrap, group, [topic], 3, group_protocol="classic")
    wait_until(lambda: all(native.describe_group(g).state.value == "Empty" for g in (legit, hostile)),
               timeout=60, what="both groups Empty")
    map_text = f"rules:\n  - regex: '{re.escape(prefix)}(a+)+b'\n    app: orders\n    team: commerce\n"
    before = _facts(native, [legit, hostile])

    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    child = spawn.Process(target=plan, args=(bootstrap, map_text, [legit, hostile], prefix, results), daemon=True)
    child.start()
    child.join(300)
    if child.is_alive():
        child.kill()
        child.join()
        raise AssertionError("the fleet plan did not finish: a group id stalled the ownership map's regex")
    assert child.exitcode == 0 and not results.empty(), child.exitcode
    unowned, planned = results.get()
    assert unowned == [hostile], unowned  # matched, in linear time: no rule owns it
    assert planned == [["orders", [legit]]], planned
    assert _facts(native, [legit, hostile]) == before, "planning changed the groups"


def plan(bootstrap: str, map_text: str, group_ids: list[str], prefix: str, results) -> None:
    """The fleet plan's reads and planning, in a process of its own: the real inventory of ``group_ids``, the map
    read from ``map_text``, the selection of the applications owning a group starting with ``prefix``, the waves."""
    ownership = OwnershipMap.from_text(map_text, source="map.yaml")
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        inventory = admin.inventory(group_ids=group_ids)
    selection = select(inventory, ownership, prefixes=[prefix])
    waves = plan_waves(selection, canary=0, wave_size=1)
    results.put((list(selection.unowned),
                 [[a.app, [g.group_id for g in a.groups]] for wave in waves.waves for a in wave.applications]))

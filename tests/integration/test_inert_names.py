"""Group ids read from the cluster are inert in the fleet's plan (issue 45, item 6).

Anyone who may create a consumer group chooses its id, and the fleet plan lists every group the inventory reads:
the owned ones in each wave's table (what a wave's approver signs), the others as unowned. Real classic groups
whose ids are the issue's forged approval, HTML, backticks and a pipe, a direction override with a ``www.`` host,
and a zero-width space with an e-mail address and a heading, are inventoried on the session broker, owned by an
application and a team whose names (from the ownership map) are as hostile, and planned; the same with plain
names. Both plans parse to the same structure (no link, emphasis, heading, HTML, cell or line from a name), nothing
in them would be autolinked by Airflow's UI, and every character of each name shows (tests/unit/
test_inert_names.py has the checks and every other rendering).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from airflow_provider_kip848.fleet import OwnershipMap, plan_waves, select
from airflow_provider_kip848.kafka.model import GroupState, GroupType
from kip848_harness.clients import consume, create_topics, produce
from tests.conftest import wait_until
from tests.unit.test_inert_names import FORGED, assert_inert


def _ours(native, groups: list[str]):
    """The cluster's whole inventory (as the fleet DAG takes it: no ids asked for, so an id holding an invisible
    character is listed as the cluster holds it; asked for by name, it is refused) with only ``groups`` kept
    (other tests share the broker)."""
    inventory = native.inventory()
    return replace(inventory, entries=tuple(e for e in inventory.entries if e.group_id in groups))


def _plan_markdown(native, groups: dict[str, str], app: str, team: str) -> dict[str, str]:
    """The first wave's approval and the whole plan, for ``groups`` (two owned by ``app`` of ``team``, two
    unowned), from an inventory of the real groups."""
    ownership = OwnershipMap.from_text(json.dumps({"version": 1, "rules": [
        {"regex": re.escape(groups[key]), "app": app, "team": team} for key in ("owned", "html")]}),
        source="test map")
    inventory = _ours(native, list(groups.values()))
    assert inventory.complete and sorted(e.group_id for e in inventory.entries) == sorted(groups.values())
    selection = select(inventory, ownership)
    assert sorted(selection.unowned) == sorted([groups["bidi"], groups["invisible"]])
    plan = plan_waves(selection, canary=0, wave_size=5)
    assert [w.apps for w in plan.waves] == [(app,)]
    return {"wave approval": plan.waves[0].render_markdown(), "fleet plan": plan.render_markdown()}


def test_group_ids_from_the_cluster_are_text_in_the_fleet_plan(native, bootstrap, unique):
    topic, tag = unique("inert-names"), unique("n")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, ["1", "2"])
    hostile = {"owned": f"{FORGED} {tag}", "html": f"<img src=x onerror=alert(1)> `t` | p {tag}",
               "bidi": f"rtl\u202edi www.evil.example {tag}", "invisible": f"zero\u200bwidth a@evil.example # h {tag}"}
    plain = {key: f"plain-{key}-{tag}" for key in hostile}
    for group in [*hostile.values(), *plain.values()]:
        assert consume(bootstrap, group, [topic], 1, group_protocol="classic")
    groups = [*hostile.values(), *plain.values()]

    def all_empty() -> bool:
        entries = _ours(native, groups).entries
        return len(entries) == len(groups) and all(
            e.type is GroupType.CLASSIC and e.state is GroupState.EMPTY for e in entries)

    wait_until(all_empty, timeout=60, what="every group Empty")
    assert set(hostile.values()) <= set(native.group_ids())  # the cluster holds the ids as they were given

    app, team = "app <b>billing</b> [x](https://evil.example)", "_team_ www.evil.example\u202e"
    rendered = _plan_markdown(native, hostile, app, team)
    expected = _plan_markdown(native, plain, "plain-app", "plain-team")
    for name in (hostile["owned"], hostile["html"], app, team):  # in the wave's approval and the whole plan
        assert_inert(rendered, expected, name)
    for name in (hostile["bidi"], hostile["invisible"]):  # the unowned groups: listed in the whole plan only
        assert_inert({"fleet plan": rendered["fleet plan"]}, expected, name)

"""Fleet planning on real groups: an inventory of the groups of four applications on the real broker, mapped
by an ownership map, planned into waves; the plan's content follows the real verdicts (librdkafka's
cooperative-sticky userData takes its application offline), and after one application's groups really move
to the consumer protocol, a fresh inventory makes the rest of the plan resume without it.

Only the groups this test creates are inventoried (``group_ids``): other tests share the broker.
"""

from __future__ import annotations

import json

from airflow_provider_kip848.fleet import ErrorBudget, OwnershipMap, plan_waves, remaining, select
from airflow_provider_kip848.kafka.inventory import Readiness
from airflow_provider_kip848.kafka.model import GroupState, GroupType
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import wait_until


def _member(bootstrap, group, topic, client, tmp_path, **kw) -> ConsumerProcess:
    return ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id=client,
                                 log_file=str(tmp_path / f"{client}.log"), **kw)


def _stable(native, group: str, members: int) -> bool:
    desc = native.describe_group(group)
    return desc.type is GroupType.CLASSIC and desc.state == "Stable" and len(desc.members) == members


def _empty(native, group: str, gtype: GroupType) -> bool:
    desc = native.describe_group(group)
    return desc.type is gtype and desc.state is GroupState.EMPTY


def test_a_fleet_plan_follows_the_real_verdicts_and_resumes(native, bootstrap, unique, tmp_path):
    topic = unique("fleet")
    create_topics(bootstrap, {topic: 2})
    for partition in range(2):
        produce(bootstrap, topic, (f"v{i}" for i in range(10)), partition=partition)
    billing = [unique("billing"), unique("billing")]  # offset-only classic groups
    orders_live, orders_idle = unique("orders"), unique("orders")  # a live classic group + an offset-only one
    coop = unique("coop")  # librdkafka cooperative-sticky: userData after the second join
    ledger = unique("ledger")  # already on the consumer protocol
    stray = unique("stray")  # no rule: unowned
    for group in [*billing, orders_idle, stray]:
        assert consume(bootstrap, group, [topic], 3, group_protocol="classic")
    assert consume(bootstrap, ledger, [topic], 3, group_protocol="consumer")
    for group in [*billing, orders_idle, stray]:
        wait_until(lambda g=group: _empty(native, g, GroupType.CLASSIC), timeout=60, what=f"{group} Empty")

    members = [_member(bootstrap, orders_live, topic, "ord-0", tmp_path, assignor="range"),
               _member(bootstrap, coop, topic, "coop-0", tmp_path, assignor="cooperative-sticky")]
    try:
        wait_until(lambda: _stable(native, coop, 1), timeout=90, what="first cooperative-sticky member Stable")
        members.append(_member(bootstrap, coop, topic, "coop-1", tmp_path, assignor="cooperative-sticky"))
        wait_until(lambda: _stable(native, orders_live, 1), timeout=90, what="orders member Stable")
        wait_until(lambda: _stable(native, coop, 2) and any(native.classic_assignment_user_data(coop).values()),
                   timeout=90, what="two cooperative-sticky members with assignment userData")

        ownership = OwnershipMap.from_text(json.dumps({"version": 1, "rules": [
            {"prefix": "billing-", "app": "billing", "team": "finance", "expected_instances": 1},
            {"prefix": "orders-", "app": "orders", "team": "commerce", "app_controller": "orders-k8s",
             "app_controller_args": {"name": "orders"}},
            {"regex": "coop-.*", "app": "coop", "team": "commerce"},
            {"prefix": "ledger-", "app": "ledger", "team": "finance"},
        ]}), source="test map")
        ids = [*billing, orders_live, orders_idle, coop, ledger, stray]
        inv = native.inventory(group_ids=ids)
        assert inv.complete and sorted(e.group_id for e in inv.entries) == sorted(ids)

        sel = select(inv, ownership)
        assert sel.unowned == (stray,)
        assert [a.app for a in sel.migrated] == ["ledger"]
        plan = plan_waves(sel, canary=1, wave_size=2, max_groups_per_wave=3, parallelism=2)

        # the canary is the smallest application: coop, one group, offline because of its real userData
        assert [(w.number, w.apps, w.canary) for w in plan.waves] == [
            (1, ("coop",), True), (2, ("orders",), False), (3, ("billing",), False)]
        coop_app = plan.waves[0].applications[0]
        verdict = inv.entry(coop).verdict("classic_to_consumer")
        assert verdict.readiness is Readiness.OFFLINE_ONLY and verdict.checks.get("custom_assignor") == "fail"
        assert coop_app.path == "offline" and "userData" in coop_app.reason
        assert [(g.group_id, g.readiness, g.path, g.member_count) for g in coop_app.pending] == [
            (coop, "offline_only", "offline", 2)]
        # every other selected group is what the inventory says: ready online, by the rolling upgrade
        for wave in plan.waves[1:]:
            for app in wave.applications:
                assert app.path == "online", app
                for g in app.pending:
                    real = inv.entry(g.group_id)
                    assert g.readiness == real.verdict("classic_to_consumer").readiness.value == "ready_online"
                    assert (g.type, g.state, g.member_count) == (real.type.value, real.state.value,
                                                                 real.member_count)
        orders = plan.waves[1].applications[0]
        assert orders.group_ids == tuple(sorted([orders_live, orders_idle]))
        assert (orders.app_controller, dict(orders.app_controller_args)) == ("orders-k8s", {"name": "orders"})
        assert plan.waves[2].applications[0].warnings == ()  # billing: 0 members is not a mismatch
        assert plan_waves(select(native.inventory(group_ids=ids), ownership), canary=1, wave_size=2,
                          max_groups_per_wave=3, parallelism=2).plan_hash == plan.plan_hash  # lag etc. aside
        md = plan.render_markdown()
        assert f"| `coop` | `commerce` | offline | - | `{coop}` | classic / Stable | 2 | offline_only |" in md
        assert f"`{stray}`" in md and "ledger" in md

        # the billing wave really runs: an Empty classic group converts when a consumer-protocol member joins
        for group in billing:
            assert consume(bootstrap, group, [topic], 1, group_protocol="consumer")
            wait_until(lambda g=group: _empty(native, g, GroupType.CONSUMER), timeout=60, what=f"{group} converted")
        verdict3 = ErrorBudget().judge_wave(plan.wave(3), {g: True for g in billing})
        assert verdict3.proceed and verdict3.failed_apps == ()

        fresh = native.inventory(group_ids=ids)
        left = remaining(plan, fresh)
        assert left.skipped == ("billing",) and left.completed_waves == (3,)
        assert [w.number for w in left.waves] == [1, 2] and left.done_groups == tuple(sorted(billing))
        replanned = plan_waves(select(fresh, ownership), canary=1, wave_size=2, max_groups_per_wave=3)
        assert [a.app for a in replanned.migrated] == ["billing", "ledger"]
        assert billing[0] not in replanned.group_ids
    finally:
        for m in members:
            m.stop()

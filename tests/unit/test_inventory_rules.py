"""The fleet inventory's pure parts: readiness verdicts, which migrations apply, entries, and how batched
answers are sorted (the real-broker counterparts are in tests/integration/test_inventory.py)."""

from __future__ import annotations

import gc
import json
import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, inventory_entry
from airflow_provider_kip848.kafka.model import (
    BrokerVersion,
    ClusterFeatures,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    Feature,
    GroupCoordinatorConfig,
    GroupListing,
    GroupOffsets,
    GroupState,
    GroupType,
    MemberProtocol,
    PartitionOffsets,
    StreamsGroupDescription,
)
from airflow_provider_kip848.kafka.native.admin.inventory import _group_offsets
from airflow_provider_kip848.kafka.native.batch import BatchReader, GroupAnswers, _describe_rows, collector_paused
from airflow_provider_kip848.kafka.rules.preflight import PreflightFacts
from airflow_provider_kip848.kafka.rules.readiness import (
    FleetJudge,
    Readiness,
    migration_verdict,
    relevant_migrations,
)

COORD = {"group.coordinator.rebalance.protocols": "classic,consumer,streams",
         "group.consumer.migration.policy": "bidirectional", "group.consumer.max.size": "10",
         "group.streams.max.size": "10"}


def cluster(release="4.3", group_version=1, streams_version=1, coord=None) -> PreflightFacts:
    features = ClusterFeatures({"metadata.version": Feature("metadata.version", 7, 30, 30),
                                "group.version": Feature("group.version", 0, 1, group_version),
                                "streams.version": Feature("streams.version", 0, 1, streams_version)})
    return PreflightFacts((BrokerVersion(1, release, f"{release}-IV0"),), features,
                          GroupCoordinatorConfig(1, {**COORD, **(coord or {})}))


def classic(group="g", members=2, assignor="range", protocol_type="consumer", gtype=GroupType.CLASSIC):
    ms = tuple(ConsumerGroupMember(f"m{i}", f"c{i}", "h", protocol=MemberProtocol.CLASSIC) for i in range(members))
    desc = ConsumerGroupDescription(group, gtype, "Stable" if members else "Empty", assignor if members else "", 1,
                                    ms)
    return GroupListing(group, gtype, desc.state, protocol_type), desc


def streams(group="app"):
    return GroupListing(group, GroupType.STREAMS, "Stable", "streams"), StreamsGroupDescription(group, "Stable", 1, 3,
                                                                                             3, 1)


def verdict(facts, listing, desc, migration, user_data=None, **kw):
    return migration_verdict(facts.for_group(listing, desc, user_data or {}), migration, listing.group_id, **kw)


# -- which path works ---------------------------------------------------------------------------------

def test_a_healthy_classic_group_is_ready_online():
    v = verdict(cluster(), *classic(), "classic_to_consumer")
    assert v.readiness is Readiness.READY_ONLINE and v.reason.startswith("every online check passes")


@pytest.mark.parametrize("coord, user_data, check", [
    ({}, {"m0": b"\x00custom", "m1": b""}, "custom_assignor"),
    ({"group.consumer.migration.policy": "disabled"}, None, "migration_policy"),
    ({"group.consumer.migration.policy": "downgrade"}, None, "migration_policy"),
])
def test_an_online_refusal_leaves_the_offline_path(coord, user_data, check):
    v = verdict(cluster(coord=coord), *classic(), "classic_to_consumer", user_data=user_data)
    assert v.readiness is Readiness.OFFLINE_ONLY, v
    assert v.checks[check] == "fail" and v.reason.startswith("the online path is refused: " + check)
    assert v.remedy


def test_librdkafka_cooperative_sticky_with_userdata_is_offline_only_and_says_so():
    listing, desc = classic(assignor="cooperative-sticky")
    v = verdict(cluster(), listing, desc, "classic_to_consumer", user_data={"m0": b"\x01", "m1": b"\x01"})
    assert v.readiness is Readiness.OFFLINE_ONLY and "userData" in v.reason
    assert "librdkafka" in v.remedy and "kip848_consumer_offline_migration" in v.remedy


@pytest.mark.parametrize("facts, check", [
    (cluster(group_version=0), "feature_finalized"),
    (cluster(coord={"group.coordinator.rebalance.protocols": "classic"}), "protocol_enabled"),
    (cluster(release="3.9"), "broker_version"),
])
def test_what_fails_both_paths_blocks(facts, check):
    v = verdict(facts, *classic(), "classic_to_consumer")
    assert v.readiness is Readiness.BLOCKED and v.checks[check] == "fail" and check in v.reason


def test_a_connect_group_is_blocked_with_the_reason():
    listing, desc = classic(protocol_type="connect")
    assert relevant_migrations(listing, desc) == ("classic_to_consumer",)
    v = verdict(cluster(), listing, desc, "classic_to_consumer")
    assert v.readiness is Readiness.BLOCKED and "protocol type 'connect'" in v.reason


def test_streams_migrations_are_offline_only_and_refuse_4_2_without_a_declared_patch_release():
    listing, desc = classic(assignor="stream")
    assert verdict(cluster(), listing, desc, "classic_to_streams").readiness is Readiness.OFFLINE_ONLY
    blocked = verdict(cluster(release="4.2"), listing, desc, "classic_to_streams")
    assert blocked.readiness is Readiness.BLOCKED and blocked.checks["broker_version"] == "fail"
    fixed = verdict(cluster(release="4.2"), listing, desc, "classic_to_streams", declared_broker_version="4.2.1")
    assert fixed.readiness is Readiness.OFFLINE_ONLY
    assert verdict(cluster(), *streams(), "streams_to_classic").readiness is Readiness.OFFLINE_ONLY


def test_running_members_do_not_block_an_offline_migration():
    v = verdict(cluster(), *classic(assignor="stream", members=3), "classic_to_streams")
    assert v.readiness is Readiness.OFFLINE_ONLY and v.checks.get("group_empty") == "warn"


# -- which migrations apply ----------------------------------------------------------------------------

def test_relevant_migrations_by_type_and_assignor():
    assert relevant_migrations(*classic(assignor="range")) == ("classic_to_consumer",)
    assert relevant_migrations(*classic(assignor="stream")) == ("classic_to_streams",)
    assert relevant_migrations(*classic(members=0)) == ("classic_to_consumer", "classic_to_streams")
    assert relevant_migrations(*classic(gtype=GroupType.CONSUMER)) == ("consumer_to_classic",)
    assert relevant_migrations(*streams()) == ("streams_to_classic",)
    assert relevant_migrations(GroupListing("s", GroupType.SHARE, "Stable"), None) == ()
    assert len(relevant_migrations(None, None)) == 4


# -- the fleet judge -----------------------------------------------------------------------------------

def test_unreadable_cluster_facts_make_every_verdict_unknown_with_the_reason():
    judge = FleetJudge(None, facts_error="node 2 did not answer ApiVersions")
    out = judge.verdicts(*classic(), {})
    assert [(v.readiness, v.reason) for v in out] == [(Readiness.UNKNOWN, "node 2 did not answer ApiVersions")]


def test_an_unreadable_group_is_unknown_never_guessed():
    judge = FleetJudge(cluster())
    listing, _ = classic()
    out = judge.verdicts(listing, None, {}, unknown_reason="its coordinator, node 3 did not answer")
    assert {v.readiness for v in out} == {Readiness.UNKNOWN} and out[0].reason.startswith("its coordinator")


def test_memberless_groups_share_one_judgment_and_groups_with_members_are_judged_each():
    judge = FleetJudge(cluster())
    a, b = judge.verdicts(*classic("a", members=0), {}), judge.verdicts(*classic("b", members=0), {})
    assert a is b and len(judge._memberless) == 1
    plain = judge.verdicts(*classic("c"), {"m0": b"", "m1": b""})
    custom = judge.verdicts(*classic("d"), {"m0": b"\x00", "m1": b""})
    assert plain[0].readiness is Readiness.READY_ONLINE and custom[0].readiness is Readiness.OFFLINE_ONLY


# -- entries and the inventory ---------------------------------------------------------------------------

def offsets(group, *rows):
    return GroupOffsets(group, tuple(PartitionOffsets("t", p, c, 0, e) for p, c, e in rows))


def test_an_entry_without_a_description_keeps_the_listing_and_no_count():
    listing, _ = classic()
    e = inventory_entry("g", listing, None, {}, None, FleetJudge(cluster()), error="node 3 did not answer")
    assert (e.type, e.state, e.member_count, e.members, e.lag) == (GroupType.CLASSIC, GroupState.STABLE, None,
                                                                    None, None)
    assert e.error == "node 3 did not answer" and {v.readiness for v in e.verdicts} == {Readiness.UNKNOWN}


def test_a_share_group_is_listed_without_verdicts_or_error():
    e = inventory_entry("s", GroupListing("s", GroupType.SHARE, "Stable", "share"), None, {}, None,
                        FleetJudge(cluster()))
    assert e.verdicts == () and e.error is None and e.member_count is None


def test_a_group_described_but_not_listed_is_judged_from_its_description():
    _, desc = classic()
    e = inventory_entry("g", None, desc, {"m0": b"", "m1": b""}, None, FleetJudge(cluster()))
    assert e.member_count == 2 and e.verdict("classic_to_consumer").readiness is Readiness.READY_ONLINE


def test_lag_is_unknown_when_a_committed_partitions_log_end_is():
    listing, desc = classic()
    judge = FleetJudge(cluster())
    known = inventory_entry("g", listing, desc, {}, offsets("g", (0, 3, 10), (1, None, 5)), judge)
    assert known.lag == 7  # an assigned partition without a commit counts 0, as GroupOffsets.total_lag does
    unknown = inventory_entry("g", listing, desc, {}, offsets("g", (0, 3, None)), judge,
                              offsets_error="log offsets unknown for t:0: no leader")
    assert unknown.lag is None and unknown.offsets_error


def test_the_inventory_summarises_and_serialises():
    judge = FleetJudge(cluster())
    entries = tuple(inventory_entry(g, *classic(g, members=m), {}, None, judge) for g, m in (("a", 0), ("b", 2)))
    inv = GroupInventory(datetime(2026, 1, 1, tzinfo=UTC), entries, 0.5, unanswered_brokers={3: "silent"},
                         requests={"ListGroups": 3})
    assert not inv.complete and len(inv) == 2 and inv.entry("b").member_count == 2
    assert inv.readiness_counts() == {"classic_to_consumer": {"ready_online": 2},
                                      "classic_to_streams": {"offline_only": 1}}
    with pytest.raises(KeyError):
        inv.entry("zz")
    data = json.loads(json.dumps(inv.to_dict()))
    assert data["unanswered_brokers"] == {"3": "silent"} and data["group_count"] == 2
    assert data["groups"][1]["members"][0]["client_version"] is None
    assert isinstance(entries[0], InventoryEntry)


# -- sorting batched answers (native.batch) ----------------------------------------------------------------

def sort(kind, code, message="", pending_kinds=("classic", "consumer", "streams")):
    pending, out, last = {"g": list(pending_kinds)}, GroupAnswers(), {}
    retry = BatchReader._sort_answer("g", 1, kind, code, message, "raw", pending, out, last)
    return retry, pending, out, last


def test_an_answer_is_kept_with_its_node():
    _, pending, out, _ = sort("classic", 0)
    assert out.answers == {"g": ("classic", 1, "raw")} and pending == {}


def test_a_group_of_another_type_is_tried_with_the_next_describe():
    retry, pending, out, _ = sort("classic", 69, "Group g is not a classic group.")
    assert pending == {"g": ["consumer", "streams"]} and not retry and not out.failed
    _, pending, out, _ = sort("streams", 69, "Group g is not a streams group.", pending_kinds=("streams",))
    assert pending == {} and "no describe" in out.failed["g"]


def test_not_found_is_gone_a_retriable_code_is_retried_and_a_refusal_fails():
    assert sort("consumer", 69, "Group g not found.")[2].gone == {"g"}
    retry, pending, _, last = sort("classic", 14)  # COORDINATOR_LOAD_IN_PROGRESS
    assert retry and pending and "CoordinatorLoadInProgress" in last["g"]
    retry, pending, out, _ = sort("classic", 30, "denied")  # GROUP_AUTHORIZATION_FAILED
    assert not retry and not pending and out.failed["g"].endswith("denied")


def test_a_dead_classic_answer_means_not_found():
    dead = SimpleNamespace(group_id="g", error_code=0, error_message=None, group_state="Dead")
    alive = SimpleNamespace(group_id="h", error_code=0, error_message=None, group_state="Empty")
    rows = list(_describe_rows("classic", SimpleNamespace(groups=[dead, alive])))
    assert [(g, code) for g, code, _, _ in rows] == [("g", 69), ("h", 0)]


# -- what the inventory does per group, made cheap ---------------------------------------------------------------

@pytest.mark.parametrize("text, state", [
    ("Stable", GroupState.STABLE), ("STABLE", GroupState.STABLE), ("stable", GroupState.STABLE),
    ("PreparingRebalance", GroupState.PREPARING_REBALANCE), ("preparing_rebalance", GroupState.PREPARING_REBALANCE),
    ("Preparing Rebalance", GroupState.PREPARING_REBALANCE), ("NOT_READY", GroupState.NOT_READY),
    (GroupState.RECONCILING, GroupState.RECONCILING), ("Unknown", GroupState.UNKNOWN), ("", GroupState.UNKNOWN),
    (None, GroupState.UNKNOWN), ("Rebalancing", GroupState.UNKNOWN),
])
def test_a_state_is_parsed_from_every_spelling_by_lookup(text, state):
    assert GroupState.parse(text) is state


def test_a_state_that_is_not_kafkas_is_refused_when_strict():
    with pytest.raises(InvalidArgument, match="'Rebalancing' is not a Kafka group state"):
        GroupState.parse("Rebalancing", strict=True)
    assert GroupState.parse("assigning", strict=True) is GroupState.ASSIGNING


@pytest.mark.parametrize("text, gtype", [
    ("classic", GroupType.CLASSIC), ("CONSUMER", GroupType.CONSUMER), (" streams ", GroupType.STREAMS),
    (GroupType.SHARE, GroupType.SHARE), (None, GroupType.UNKNOWN), ("", GroupType.UNKNOWN), ("kip", GroupType.UNKNOWN),
])
def test_a_type_is_parsed_from_every_spelling_by_lookup(text, gtype):
    assert GroupType.parse(text) is gtype


def test_inventory_offsets_rows_are_in_partition_order_with_assigned_partitions_and_unread_log_ends():
    committed = {("b", 0): (5, 3), ("a", 10): (7, None), ("a", 2): (1, None)}
    offsets, error = _group_offsets("g", committed, {("a", 3), ("a", 2)}, {("a", 2): 0, ("a", 3): 0, ("b", 0): 2},
                                    {("a", 2): 4, ("a", 3): 9, ("b", 0): 8}, {("a", 10): "no leader"})
    assert offsets == GroupOffsets("g", (
        PartitionOffsets("a", 2, 1, log_start=0, log_end=4), PartitionOffsets("a", 3, None, log_start=0, log_end=9),
        PartitionOffsets("a", 10, 7), PartitionOffsets("b", 0, 5, log_start=2, log_end=8, leader_epoch=3)))
    assert error == "log offsets unknown for a:10: no leader"
    assert _group_offsets("g", {("a", 0): (1, None)}, set(), {("a", 0): 0}, {("a", 0): 1}, {}) == (
        GroupOffsets("g", (PartitionOffsets("a", 0, 1, log_start=0, log_end=1),)), None)


def test_inventory_pauses_the_collector_and_restores_it():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "an inner pause ended the outer one"
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "a collector the caller had disabled was enabled"
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed inventory")
    assert gc.isenabled()


def test_inventory_collector_pauses_overlapping_in_threads_end_with_the_last():
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with collector_paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second():
        first_in.wait(10)
        with collector_paused():
            second_in.set()
            first_out.wait(10)
            seen["after the first ended"] = gc.isenabled()
        seen["after both ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {"after the first ended": False, "after both ended": True}

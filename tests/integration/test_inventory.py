"""The fleet inventory against real groups: classic, consumer (KIP-848), offset-only, Kafka Streams apps.

Each entry is checked against what the per-group reads say about the same group (describe_group,
group_offsets), the verdicts against what the broker does (librdkafka's cooperative-sticky userData
blocks the online upgrade), and the batching by the number of requests sent.
"""

from __future__ import annotations

import gc
import math
import time

import pytest

from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, Readiness
from airflow_provider_kip848.kafka.model import GroupState, GroupType, MemberProtocol, TopicPartition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.native.admin.offsets import committed_offsets
from airflow_provider_kip848.kafka.native.batch import BatchReader
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.faults import coordinator_node
from tests.conftest import wait_until


def _member(bootstrap, group, topic, protocol, client, tmp_path, **kw) -> ConsumerProcess:
    return ConsumerProcess.start(bootstrap, group, [topic], protocol=protocol, client_id=client,
                                 log_file=str(tmp_path / f"{client}.log"), **kw)


def _settled(native, group: str, members: int, gtype: GroupType) -> bool:
    """Stable with ``members`` members that own their target assignment, and everything consumed and committed."""
    desc = native.describe_group(group)
    return (desc.type is gtype and desc.state == "Stable" and len(desc.members) == members
            and all(m.target_assignment is None or m.target_assignment == m.assignment for m in desc.members)
            and (offsets := native.group_offsets(group)).total_lag == 0 and not offsets.uncommitted_with_records)


def _quiet_inventory(native, groups: list[str]):
    """An inventory taken while the groups' commits stood still (a Streams app commits its repartition topic
    on its own interval, a moment after its input): the offsets read just before and just after it agree,
    so the inventory can be compared with them exactly. Retried a few times, then the test fails."""
    for _ in range(10):
        before = {g: native.group_offsets(g) for g in groups}
        inv = native.inventory(groups)
        if before == {g: native.group_offsets(g) for g in groups}:
            return inv
    pytest.fail(f"the commits of {groups} never stood still for one inventory")


def _same_offsets(entry: InventoryEntry, native) -> None:
    """The entry's offsets are exactly what ``group_offsets()`` reports for the group."""
    assert entry.offsets is not None and entry.offsets_error is None
    assert entry.offsets == native.group_offsets(entry.group_id)
    assert entry.lag == native.group_offsets(entry.group_id).total_lag


def test_inventory_of_classic_consumer_and_offset_only_groups(native, bootstrap, unique, tmp_path):
    topic = unique("inv")
    create_topics(bootstrap, {topic: 4})
    for partition in range(4):
        produce(bootstrap, topic, (f"v{i}" for i in range(10)), partition=partition)
    classic, consumer, offsets_only, absent = unique("classic"), unique("consumer"), unique("offsets"), unique("no")
    native.alter_group_offsets(offsets_only, {TopicPartition(topic, 0): 3, TopicPartition(topic, 2): 1})
    members = [_member(bootstrap, classic, topic, "classic", f"cl-{i}", tmp_path, assignor="range") for i in range(2)]
    members += [_member(bootstrap, consumer, topic, "consumer", f"co-{i}", tmp_path) for i in range(2)]
    try:
        wait_until(lambda: _settled(native, classic, 2, GroupType.CLASSIC), timeout=90, what="classic group settled")
        wait_until(lambda: _settled(native, consumer, 2, GroupType.CONSUMER), timeout=90, what="consumer group settled")

        inv = native.inventory()
        assert isinstance(inv, GroupInventory) and inv.complete and inv.cluster_error is None
        assert {classic, consumer, offsets_only} <= {e.group_id for e in inv.entries}
        assert [e.group_id for e in inv.entries] == sorted(e.group_id for e in inv.entries)
        # batched: one ListGroups and one FindCoordinator per step, describes and OffsetFetch per coordinator
        assert inv.requests["ListGroups"] == 1 and inv.requests["ApiVersions"] == 1
        chunks = math.ceil(len(inv) / 1000)
        assert inv.requests["DescribeGroups"] <= chunks and inv.requests["OffsetFetch"] <= chunks
        # one for the describes: the offsets go to the nodes that answered them (see the 3-node test below)
        assert inv.requests["FindCoordinator"] == 1
        assert gc.isenabled()  # paused during the inventory only

        c = inv.entry(classic)
        assert (c.type, c.state, c.member_count, c.assignor, c.protocol_type) == (
            GroupType.CLASSIC, GroupState.STABLE, 2, "range", "consumer")
        assert sorted(m.client_id for m in c.members) == ["cl-0", "cl-1"]
        assert all(m.protocol is MemberProtocol.CLASSIC and m.client_version is None for m in c.members)
        assert c.coordinator_id == native.describe_group(classic).coordinator_id and c.error is None
        assert [v.migration for v in c.verdicts] == ["classic_to_consumer"]
        assert c.verdict("classic_to_consumer").readiness is Readiness.READY_ONLINE
        _same_offsets(c, native)

        k = inv.entry(consumer)
        assert (k.type, k.state, k.member_count, k.assignor) == (GroupType.CONSUMER, GroupState.STABLE, 2, "uniform")
        assert all(m.protocol is MemberProtocol.CONSUMER for m in k.members) and not k.is_mixed
        assert [v.migration for v in k.verdicts] == ["consumer_to_classic"]
        assert k.verdict("consumer_to_classic").readiness is Readiness.READY_ONLINE
        _same_offsets(k, native)

        o = inv.entry(offsets_only)
        assert (o.type, o.state, o.member_count, o.members) == (GroupType.CLASSIC, GroupState.EMPTY, 0, ())
        assert o.lag == (10 - 3) + (10 - 1) == native.group_offsets(offsets_only).total_lag
        _same_offsets(o, native)
        # an empty classic group: nothing tells a Streams app's group from a consumer app's, both are judged
        assert o.verdict("classic_to_consumer").readiness is Readiness.READY_ONLINE
        assert o.verdict("classic_to_streams").readiness is Readiness.OFFLINE_ONLY

        named = native.inventory([classic, offsets_only, absent])
        assert [e.group_id for e in named.entries] == sorted([classic, offsets_only])
        assert named.absent == (absent,)
        assert named.entry(classic).member_count == 2 and named.entry(offsets_only).lag == o.lag
        assert named.to_dict()["groups"][0]["group_id"] == min(classic, offsets_only)
    finally:
        for m in members:
            m.stop()


def test_cooperative_sticky_userdata_makes_the_upgrade_offline_only(native, bootstrap, unique, tmp_path):
    """librdkafka's cooperative-sticky writes assignment userData from the second rebalance on: one member,
    Stable, then a second one. The broker would refuse the online upgrade: the verdict is offline only."""
    topic, group = unique("coop"), unique("coop-group")
    create_topics(bootstrap, {topic: 4})
    members = [_member(bootstrap, group, topic, "classic", "coop-0", tmp_path, assignor="cooperative-sticky")]
    try:
        wait_until(lambda: _settled(native, group, 1, GroupType.CLASSIC), timeout=90, what="first member")
        members.append(_member(bootstrap, group, topic, "classic", "coop-1", tmp_path, assignor="cooperative-sticky"))
        wait_until(lambda: _settled(native, group, 2, GroupType.CLASSIC)
                   and any(native.classic_assignment_user_data(group).values()), timeout=90,
                   what="two members with assignment userData")
        entry = native.inventory([group]).entry(group)
        assert (entry.member_count, entry.assignor) == (2, "cooperative-sticky")
        verdict = entry.verdict("classic_to_consumer")
        assert verdict.readiness is Readiness.OFFLINE_ONLY, verdict
        assert verdict.checks.get("custom_assignor") == "fail" and "userData" in verdict.reason
        assert "offline" in verdict.remedy
    finally:
        for m in members:
            m.stop()


def test_inventory_of_streams_applications(native, kafka, bootstrap, unique):
    """A Kafka Streams app on the streams protocol (a streams group) and one on the classic protocol (a classic
    group whose assignor is ``stream``): each gets only the migration that applies, offline."""
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    streams_app, classic_app = unique("wc-streams"), unique("wc-classic")
    apps = [kafka.start_wordcount(streams_app), kafka.start_wordcount(classic_app, group_protocol="classic")]
    try:
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["inventory counts words", "inventory again"])
        wait_until(lambda: _settled(native, streams_app, 1, GroupType.STREAMS), timeout=120, what="streams app")
        wait_until(lambda: _settled(native, classic_app, 1, GroupType.CLASSIC), timeout=120, what="classic app")
        inv = _quiet_inventory(native, [streams_app, classic_app])

        s = inv.entry(streams_app)
        assert (s.type, s.state, s.member_count, s.assignor) == (GroupType.STREAMS, GroupState.STABLE, 1, None)
        assert s.members[0].protocol is MemberProtocol.STREAMS and s.members[0].client_id.startswith(streams_app)
        assert [v.migration for v in s.verdicts] == ["streams_to_classic"]
        assert s.verdict("streams_to_classic").readiness is Readiness.OFFLINE_ONLY
        _same_offsets(s, native)

        c = inv.entry(classic_app)
        assert (c.type, c.member_count, c.assignor) == (GroupType.CLASSIC, 1, "stream")
        assert [v.migration for v in c.verdicts] == ["classic_to_streams"]
        assert c.verdict("classic_to_streams").readiness is Readiness.OFFLINE_ONLY
        _same_offsets(c, native)
    finally:
        for app in apps:
            app.stop()


def test_describe_group_asks_the_coordinator_without_listing(native, bootstrap, unique, tmp_path, monkeypatch):
    """describe_group of an existing group of each type sends no ListGroups; an absent group still goes
    through the listing's checks and is GroupNotFound."""
    topic = unique("desc")
    create_topics(bootstrap, {topic: 2})
    classic, consumer, offsets_only = unique("classic"), unique("consumer"), unique("offsets")
    native.alter_group_offsets(offsets_only, {TopicPartition(topic, 0): 0})
    members = [_member(bootstrap, classic, topic, "classic", "d-cl", tmp_path),
               _member(bootstrap, consumer, topic, "consumer", "d-co", tmp_path)]
    try:
        wait_until(lambda: _settled(native, classic, 1, GroupType.CLASSIC), timeout=90, what="classic member")
        wait_until(lambda: _settled(native, consumer, 1, GroupType.CONSUMER), timeout=90, what="consumer member")
        listings = []
        real_list = native.list_groups
        monkeypatch.setattr(native, "list_groups", lambda: listings.append(1) or real_list())
        assert native.describe_group(classic).type is GroupType.CLASSIC
        assert native.describe_group(consumer).type is GroupType.CONSUMER
        assert native.describe_group(offsets_only).state is GroupState.EMPTY
        assert listings == [], "an existing group was described without re-listing every group"
        with pytest.raises(GroupNotFound):
            native.describe_group(unique("absent"))
        assert listings, "an absent group is confirmed through the listing path"
    finally:
        for m in members:
            m.stop()


# -- a coordinator that does not answer (3-node cluster) -------------------------------------------------------

def test_a_paused_coordinator_leaves_its_groups_unknown_never_wrong(cluster, unique, tmp_path, record_property):
    """SIGSTOP the node coordinating some of the groups (for less than the broker session: nothing fails over)
    and inventory them by name with a short deadline: the groups of the silent node are reported unknown with
    the reason, every other group with its true state, member count and lag; after SIGCONT, all are known."""
    bs = cluster.bootstrap_servers
    topic = unique("t")
    create_topics(bs, {topic: 3})
    for partition in range(3):
        produce(bs, topic, (f"v{i}" for i in range(10)), partition=partition)
    offset_groups = [unique("g") for _ in range(12)]
    live = unique("live")
    with KafkaAdmin(ClientSettings(bs, request_timeout_ms=15000)) as setup:
        for g in offset_groups:
            setup.alter_group_offsets(g, {TopicPartition(topic, 0): 1})
        members = [_member(bs, live, topic, "classic", f"p-{i}", tmp_path) for i in range(2)]
        try:
            wait_until(lambda: _settled(setup, live, 2, GroupType.CLASSIC), timeout=120, what="live group settled")
            truth = {g: (GroupState.EMPTY, 0, 9) for g in offset_groups} | {live: (GroupState.STABLE, 2, 0)}
            coordinators = {g: coordinator_node(bs, g) for g in truth}
            node = coordinators[live]
            assert len(set(coordinators.values())) > 1, f"all groups on one node: {coordinators}"
            with KafkaAdmin(ClientSettings(bs, request_timeout_ms=3000)) as admin:
                assert not admin.inventory(list(truth)).unknown  # warm: connections and metadata
                cluster.pause_node(node)
                try:
                    paused = admin.inventory(list(truth), timeout_s=3)
                finally:
                    cluster.resume_node(node)
                assert {e.group_id for e in paused.entries} == set(truth) and paused.absent == ()
                assert node in paused.unanswered_brokers and not paused.complete
                assert paused.cluster_error and f"node {node}" in paused.cluster_error  # its release is unknown
                silent = [g for g, n in coordinators.items() if n == node]
                for e in paused.entries:
                    assert all(v.readiness is Readiness.UNKNOWN and v.reason for v in e.verdicts), e
                    if e.group_id in silent:
                        assert e.error and f"node {node}" in e.error, e
                        assert (e.member_count, e.members, e.state) == (None, None, GroupState.UNKNOWN), e
                        assert e.offsets is None and e.lag is None
                    else:
                        state, count, lag = truth[e.group_id]
                        assert e.error is None and (e.state, e.member_count) == (state, count), e
                        assert e.lag in (None, lag), e  # None: a partition led by the silent node
                        assert e.lag is not None or (e.offsets_error and f"node {node}" in e.offsets_error)
                after = wait_until(lambda: (inv := admin.inventory(list(truth))).complete and not inv.unknown
                                   and inv.cluster_error is None and inv, timeout=60, what="every group known again")
                for e in after.entries:
                    assert (e.state, e.member_count, e.lag) == truth[e.group_id], e
                    assert all(v.readiness is not Readiness.UNKNOWN for v in e.verdicts), e
            record_property("paused_node", node)
            record_property("silent_groups", len(silent))
            record_property("paused_inventory_s", round(paused.elapsed_s, 2))
        finally:
            for m in members:
                m.stop()


def test_offsets_sent_to_a_node_that_does_not_coordinate_the_group_are_read_from_its_coordinator(cluster, unique):
    """The inventory sends each group's OffsetFetch to the node that answered its describe, without a second
    FindCoordinator. A node that no longer coordinates the group (here: every group pointed at another live
    node) answers NOT_COORDINATOR: the group is looked up anew and read from its coordinator, with its true
    offsets, never failed or left out."""
    bs = cluster.bootstrap_servers
    topic = unique("t")
    create_topics(bs, {topic: 1})
    produce(bs, topic, (f"v{i}" for i in range(10)), partition=0)
    groups = [unique("g") for _ in range(8)]
    with KafkaAdmin(ClientSettings(bs, request_timeout_ms=15000)) as admin:
        for i, g in enumerate(groups):
            admin.alter_group_offsets(g, {TopicPartition(topic, 0): i})
        coordinators = {g: coordinator_node(bs, g) for g in groups}
        nodes = sorted(b.node_id for b in admin.describe_cluster().brokers)
        assert len(nodes) == 3
        reader = BatchReader(admin._t, time.monotonic() + 30)
        elsewhere = {g: next(n for n in nodes if n != coordinators[g]) for g in groups}
        reader.answered_by.update(elsewhere)
        fetched = reader.offsets(groups)
        assert not fetched.failed and not fetched.gone
        assert {g: node for g, (_, node, _) in fetched.answers.items()} == coordinators
        assert {g: {tp: offset for tp, (offset, _) in committed_offsets(raw).items()}
                for g, (_, _, raw) in fetched.answers.items()} == {g: {TopicPartition(topic, 0): i}
                                                                    for i, g in enumerate(groups)}
        assert reader.requests["FindCoordinator"] == 1  # only after the NOT_COORDINATOR answers
        # asked first of the nodes named, then of the coordinators: one request per node and round
        assert reader.requests["OffsetFetch"] == len(set(elsewhere.values())) + len(set(coordinators.values()))
        assert reader.answered_by == coordinators

"""The CLI backend's parsers on recorded real output of the Kafka 4.3.1 tools (tests/unit/fixtures/cli)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_kip848.kafka.cli import parsers
from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol, StreamsTask, TopicPartition

FIX = Path(__file__).parent / "fixtures" / "cli"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def test_features_describe_levels_and_metadata_version_names():
    features = parsers.parse_features_describe(fixture("features_describe.out"))
    assert features["group.version"].finalized_level == 1
    assert features["streams.version"].supported_max == 1
    mv = features["metadata.version"]
    assert (mv.supported_min, mv.supported_max, mv.finalized_level) == (7, 30, 30)  # 3.3-IV3 .. 4.3-IV0
    assert features["transaction.version"].finalized_level == 2
    assert features["group.version"].epoch is not None


def test_group_config_all_entries_with_sources():
    cfg = parsers.parse_group_config("g1", fixture("configs_g1_all.out"))
    assert cfg.dynamic == {"streams.num.standby.replicas": "1"}
    assert cfg.entries["consumer.session.timeout.ms"].value == "6000"  # the broker's static setting
    assert cfg.entries["consumer.heartbeat.interval.ms"].source == "STATIC_BROKER_CONFIG"
    assert cfg.entries["share.auto.offset.reset"].source == "DEFAULT_CONFIG"
    assert len(cfg.entries) >= 17


def test_broker_configs_group_settings():
    entries = parsers.parse_config_entries(fixture("configs_broker_all.out"))
    assert entries["group.coordinator.rebalance.protocols"].value == "classic,consumer,streams"
    assert entries["group.consumer.migration.policy"].value == "bidirectional"
    assert entries["group.streams.max.standby.replicas"].value == "2"


def test_classic_group_with_static_and_dynamic_members():
    d = parsers.parse_consumer_group("g-classic", fixture("consumer-groups_g-classic_state.out"),
                               fixture("consumer-groups_g-classic_members.out"))
    assert (d.type, d.state, d.assignor, d.coordinator_id) == (GroupType.CLASSIC, "Stable", "range", 1)
    assert d.group_epoch is None and d.target_assignment_epoch is None
    by_client = {m.client_id: m for m in d.members}
    assert by_client["cl-b"].instance_id == "static-b"
    assert by_client["cl-a"].instance_id is None  # an empty cell in the table
    assert by_client["cl-a"].assignment == (TopicPartition("t-explore", 0), TopicPartition("t-explore", 1))
    assert by_client["cl-a"].host == "127.0.0.1"
    assert all(m.protocol is MemberProtocol.CLASSIC and m.target_assignment is None for m in d.members)


def test_mixed_consumer_group_member_by_member():
    d = parsers.parse_consumer_group("g-mixed", fixture("consumer-groups_g-mixed_state.out"),
                               fixture("consumer-groups_g-mixed_members.out"))
    assert d.type is GroupType.CONSUMER and d.is_mixed
    assert {m.client_id: m.protocol for m in d.members} == {
        "mx-classic": MemberProtocol.CLASSIC, "mx-consumer": MemberProtocol.CONSUMER}
    assert (d.group_epoch, d.target_assignment_epoch) == (2, 2)
    assert all(m.member_epoch == 2 for m in d.members)


def test_consumer_group_epochs_and_target_assignment():
    d = parsers.parse_consumer_group("g-consumer", fixture("consumer-groups_g-consumer_state.out"),
                               fixture("consumer-groups_g-consumer_members.out"))
    assert (d.type, d.assignor, d.group_epoch) == (GroupType.CONSUMER, "uniform", 3)
    assert not d.is_mixed
    static = [m for m in d.members if m.instance_id == "static-co-b"][0]
    assert static.target_assignment == static.assignment == (TopicPartition("t-explore", 2), TopicPartition("t-explore", 3))


@pytest.mark.parametrize("group, gtype, assignor", [("g-empty-classic", GroupType.CLASSIC, ""),
                                                    ("g-empty-consumer", GroupType.CONSUMER, "uniform")])
def test_empty_groups(group, gtype, assignor):
    d = parsers.parse_consumer_group(group, fixture(f"consumer-groups_{group}_state.out"),
                               fixture(f"consumer-groups_{group}_members.out"))
    assert (d.type, d.state, d.assignor, d.members) == (gtype, "Empty", assignor, ())
    offsets = parsers.parse_group_offsets(group, fixture(f"consumer-groups_{group}_offsets.out"))
    assert offsets.committed == {TopicPartition("t-a", 0): 2, TopicPartition("t-a", 1): 1, TopicPartition("t-b", 0): 1}
    assert offsets.total_lag == 0


def test_multi_topic_assignment_cell():
    assert parsers.parse_assignment("t-a:0,1;t-b:0") == (
        TopicPartition("t-a", 0), TopicPartition("t-a", 1), TopicPartition("t-b", 0))
    assert parsers.parse_assignment("-") == ()
    d = parsers.parse_consumer_group("g-multi", "GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE GROUP-EPOCH "
                               "TARGET-ASSIGNMENT-EPOCH #MEMBERS\ng-multi 127.0.0.1:1 (1) uniform Stable 2 2 1\n",
                               fixture("consumer-groups_g-multi_members.out"))
    assert len(d.members[0].assignment) == 3


def test_offsets_with_leader_epoch_and_lag():
    offsets = parsers.parse_group_offsets("g-classic", fixture("consumer-groups_g-classic_offsets.out"),
                                    {TopicPartition("t-explore", 0): 0})
    p0 = offsets[("t-explore", 0)]
    assert (p0.committed, p0.log_end, p0.lag, p0.leader_epoch, p0.log_start) == (24, 24, 0, 0, 0)
    assert len(offsets.partitions) == 4


def test_streams_group_state_members_and_task_assignments():
    d = parsers.parse_streams_group("wc-explore", fixture("streams-groups_wc-explore_state.out"),
                              fixture("streams-groups_wc-explore_members.out"))
    assert (d.state, d.group_epoch, d.target_assignment_epoch, d.topology_epoch, d.coordinator_id) == ("Stable", 3, 3, 0, 1)
    (m,) = d.members
    assert m.protocol is MemberProtocol.STREAMS and m.member_epoch == 3
    expected = (StreamsTask("0", 0), StreamsTask("0", 1), StreamsTask("1", 0), StreamsTask("1", 1))
    assert m.assignment.active == expected and m.target_assignment.active == expected
    assert m.assignment.standby == ()


def test_streams_offsets_with_missing_commit():
    offsets = parsers.parse_group_offsets("wc-explore", fixture("streams-groups_wc-explore_offsets.out"))
    p0 = offsets[("streams-plaintext-input", 0)]
    assert p0.committed is None and p0.lag is None
    assert offsets[("streams-plaintext-input", 1)].committed == 2


def test_group_listings_with_states():
    states = parsers.parse_list_states(fixture("consumer-groups_list_state.out"))
    states.update(parsers.parse_list_states(fixture("streams-groups_list_state.out")))
    groups = {g.group_id: g for g in parsers.parse_groups_list(fixture("groups_list.out"), states)}
    assert groups["wc-explore"].type is GroupType.STREAMS and groups["wc-explore"].protocol_type == "streams"
    assert groups["g-classic"].type is GroupType.CLASSIC and groups["g-classic"].state == "Stable"
    assert groups["g-mixed"].type is GroupType.CONSUMER


def test_streams_assignment_cell_with_standby_and_warmup():
    current, target = parsers.parse_streams_assignments(
        "ACTIVE: 0:[0,1]; STANDBY: 1:[2]; WARMUP: 0:[3]; TARGET-ACTIVE: 0:[0]; TARGET-STANDBY: 1:[2,3]; ")
    assert current.active == (StreamsTask("0", 0), StreamsTask("0", 1))
    assert current.standby == (StreamsTask("1", 2),) and current.warmup == (StreamsTask("0", 3),)
    assert target.active == (StreamsTask("0", 0),) and target.standby == (StreamsTask("1", 2), StreamsTask("1", 3))


def test_get_offsets_lines():
    assert parsers.parse_get_offsets("t-explore:0:0\nt-explore:1:17\n") == {
        TopicPartition("t-explore", 0): 0, TopicPartition("t-explore", 1): 17}


def test_table_cells_cut_at_header_positions_when_a_cell_is_empty():
    text = ("GROUP           CONSUMER-ID  GROUP-INSTANCE-ID HOST        CLIENT-ID\n"
            "g               m-1                            /10.0.0.1   c1\n"
            "g               m-2          static-2          /10.0.0.2   c2\n")
    rows = parsers.parse_table(text)
    assert rows[0]["GROUP-INSTANCE-ID"] == "" and rows[0]["HOST"] == "/10.0.0.1"
    assert rows[1]["GROUP-INSTANCE-ID"] == "static-2"

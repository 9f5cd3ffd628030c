"""Client-config lint, group conditions and offset snapshots: pure logic."""

from __future__ import annotations

import json

import pytest

from airflow_provider_kip848.kafka.api import evaluate_condition as evaluate
from airflow_provider_kip848.kafka.errors import GroupNotFound, OffsetsNotConfirmed, SnapshotInvalid
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    GroupOffsets,
    GroupType,
    MemberProtocol,
    OffsetSnapshot,
    PartitionOffsets,
    TopicPartition,
)
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition
from airflow_provider_kip848.kafka.rules.lint import lint_client_config, parse_properties
from airflow_provider_kip848.kafka.rules.offsets import compare, require_read_back, restore_plan, snapshot_from


def keys(findings, severity):
    return {f.key for f in findings if f.severity == severity}


def test_classic_config_linted_for_the_consumer_protocol():
    props = parse_properties("""
        # app.properties
        group.protocol=classic
        partition.assignment.strategy=org.apache.kafka.clients.consumer.CooperativeStickyAssignor
        session.timeout.ms=30000
        heartbeat.interval.ms: 3000
        group.instance.id=app-1
    """)
    findings = lint_client_config(props, "consumer")
    assert keys(findings, "error") == {"group.protocol", "partition.assignment.strategy", "session.timeout.ms",
                                       "heartbeat.interval.ms"}
    assert keys(findings, "warn") == {"group.instance.id"}
    fix = {f.key: f.fix for f in findings}
    assert "group.remote.assignor=uniform" in fix["partition.assignment.strategy"]
    assert "consumer.session.timeout.ms=30000" in fix["session.timeout.ms"]


def by_key(findings):
    return {f.key: f for f in findings}


def test_range_maps_to_range_and_custom_assignors_are_errors():
    f = by_key(lint_client_config({"group.protocol": "consumer", "partition.assignment.strategy": "range"},
                                  "consumer"))
    assert "group.remote.assignor=range" in f["partition.assignment.strategy"].fix
    # range today, uniform (the brokers' default) tomorrow unless the client asks for range
    assert f["group.remote.assignor"].severity == "warn" and "group.remote.assignor=range" in f[
        "group.remote.assignor"].fix
    f = by_key(lint_client_config({"group.protocol": "consumer",
                                   "partition.assignment.strategy": "com.acme.MyAssignor"}, "consumer"))
    assert "custom client assignor" in f["partition.assignment.strategy"].message


@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_no_strategy_means_range_today_and_the_brokers_default_tomorrow(client):
    """Both clients' default lists start with range: an application that names no assignor must not be
    taken as moving to uniform without a word."""
    f = by_key(lint_client_config({"group.protocol": "consumer"}, "consumer", client=client))
    assert f["group.remote.assignor"].severity == "warn"
    assert "'range'" in f["group.remote.assignor"].message and "'uniform'" in f["group.remote.assignor"].message
    # asked for explicitly: nothing to say
    assert "group.remote.assignor" not in by_key(lint_client_config(
        {"group.protocol": "consumer", "group.remote.assignor": "range"}, "consumer", client=client))
    # brokers whose default is range: nothing changes
    assert "group.remote.assignor" not in by_key(lint_client_config(
        {"group.protocol": "consumer"}, "consumer", client=client, broker_assignors=["range", "uniform"]))


def test_remote_assignor_judged_against_the_brokers_assignors():
    f = by_key(lint_client_config({"group.protocol": "consumer", "group.remote.assignor": "range"}, "consumer",
                                  broker_assignors=["uniform"]))
    assert f["group.remote.assignor"].severity == "error" and "group.consumer.assignors" in f[
        "group.remote.assignor"].fix
    # the group's own assignor (from a describe) wins over the client default
    f = by_key(lint_client_config({"group.protocol": "consumer"}, "consumer", current_assignor="cooperative-sticky"))
    assert "group.remote.assignor" not in f  # cooperative-sticky -> uniform, the default


def test_client_release_per_protocol():
    f = by_key(lint_client_config({"group.protocol": "consumer"}, "consumer", client="librdkafka",
                                  client_version="2.11.1"))
    assert f["client.version"].severity == "error" and "2.12" in f["client.version"].fix
    assert "client.version" not in by_key(lint_client_config({"group.protocol": "consumer"}, "consumer",
                                                             client="librdkafka", client_version="2.12.0"))
    assert by_key(lint_client_config({"group.protocol": "consumer"}, "consumer", client="java",
                                     client_version="3.9.1"))["client.version"].severity == "error"
    assert by_key(lint_client_config({"group.protocol": "streams"}, "streams",
                                     client_version="4.1.0"))["client.version"].severity == "error"
    assert "client.version" not in by_key(lint_client_config({"group.protocol": "streams"}, "streams",
                                                             client_version="4.2.1"))
    # not given: said, not guessed
    assert by_key(lint_client_config({"group.protocol": "streams"}, "streams"))["client.version"].severity == "info"
    with pytest.raises(ValueError, match="client_version"):
        lint_client_config({}, "consumer", client_version="latest")
    with pytest.raises(ValueError, match="client"):
        lint_client_config({}, "consumer", client="go")


def test_the_java_default_protocol_moves_in_5_0():
    # a rollback config that leaves group.protocol unset stays classic on 4.x, becomes consumer on 5.0
    assert by_key(lint_client_config({}, "classic", client_version="4.3.1"))["group.protocol"].severity == "warn"
    assert by_key(lint_client_config({}, "classic", client_version="5.0.0"))["group.protocol"].severity == "error"
    assert "group.protocol" not in by_key(lint_client_config({"group.protocol": "classic"}, "classic"))


def test_librdkafka_group_protocol_type_and_regex_semantics():
    findings = lint_client_config({"group.protocol": "consumer", "group.protocol.type": "consumer"}, "consumer",
                                  client="librdkafka", subscription_pattern="^topic*")
    assert "group.protocol.type" in keys(findings, "error")
    assert any("'^topic*' uses '*' as a wildcard" in f.message for f in findings)
    assert not keys(lint_client_config({"group.protocol": "consumer", "enable.auto.commit": "false"}, "consumer",
                                       subscription_pattern="orders-.*"), "error")


def test_streams_limitations():
    props = {"group.protocol": "streams", "acceptable.recovery.lag": "10000", "max.warmup.replicas": "2",
             "probing.rebalance.interval.ms": "600000", "rack.aware.assignment.tags": "zone",
             "rack.aware.assignment.strategy": "min_traffic", "rack.aware.assignment.traffic_cost": "1",
             "rack.aware.assignment.non_overlap_cost": "1", "task.assignor.class": "com.acme.Assignor"}
    f = by_key(lint_client_config(props, "streams", client_version="4.2.1", subscription_pattern="orders-.*"))
    assert {k for k in props if k != "group.protocol"} <= set(f)
    assert f["task.assignor.class"].severity == "error" and f["max.warmup.replicas"].severity == "warn"
    assert f["subscription"].severity == "error" and "regex" in f["subscription"].message
    assert by_key(lint_client_config({"group.protocol": "streams"}, "streams", client="librdkafka"))[
        "client"].severity == "error"


def test_streams_config_keys_that_are_ignored_or_rejected():
    findings = lint_client_config({"group.protocol": "streams", "num.standby.replicas": "1",
                                   "consumer.session.timeout.ms": "10000", "group.instance.id": "x"}, "streams")
    assert keys(findings, "warn") >= {"num.standby.replicas", "consumer.session.timeout.ms"}
    assert keys(findings, "error") == set() and "group.instance.id" in keys(findings, "warn")
    assert keys(findings, "info") >= {"client.version"}
    assert any("streams.num.standby.replicas=1" in f.fix for f in findings)


def test_static_membership_of_a_streams_application_by_client_release():
    """KAFKA-20169: Kafka Streams 4.4 with 4.4 brokers accepts group.instance.id (its threads join as <id>-<n>);
    a client before 4.4 refuses it at start; unknown release: a warning naming both needs."""
    props = {"group.protocol": "streams", "group.instance.id": "x"}
    old = by_key(lint_client_config(props, "streams", client_version="4.3.1"))["group.instance.id"]
    assert old.severity == "error" and "ConfigException" in old.message
    new = by_key(lint_client_config(props, "streams", client_version="4.4.0"))["group.instance.id"]
    assert new.severity == "warn" and "<group.instance.id>-<n>" in new.message and "preflight" in new.fix
    unknown = by_key(lint_client_config(props, "streams"))["group.instance.id"]
    assert unknown.severity == "warn" and "Kafka Streams 4.4 and 4.4 brokers" in unknown.message


def test_unknown_target():
    with pytest.raises(ValueError):
        lint_client_config({}, "share")


class FakeAdmin:
    """The boundary fake: what a backend's describe_group/group_offsets would return."""

    def __init__(self, desc=None, offsets=None):
        self.desc, self.offsets = desc, offsets

    def describe_group(self, group_id):
        if self.desc is None:
            raise GroupNotFound("gone")
        return self.desc

    def group_offsets(self, group_id):
        return self.offsets


def member(i, protocol):
    """A member at epoch 3 owning its target (nothing) when it speaks the consumer protocol."""
    new = protocol is MemberProtocol.CONSUMER
    return ConsumerGroupMember(f"m{i}", f"c{i}", "h", protocol=protocol, member_epoch=3 if new else None,
                               target_assignment=() if new else None)


def test_conditions():
    mixed = ConsumerGroupDescription("g", GroupType.CONSUMER, "Stable", "uniform", 1,
                                     (member(0, MemberProtocol.CLASSIC), member(1, MemberProtocol.CONSUMER)),
                                     group_epoch=3, target_assignment_epoch=3)
    done = ConsumerGroupDescription("g", GroupType.CONSUMER, "Stable", "uniform", 1,
                                    (member(0, MemberProtocol.CONSUMER), member(1, MemberProtocol.CONSUMER)),
                                    group_epoch=3, target_assignment_epoch=3)
    migrated = GroupCondition("migrated", group_type="consumer")
    assert not evaluate(FakeAdmin(mixed), "g", migrated).met
    assert evaluate(FakeAdmin(mixed), "g", migrated).summary == \
        "type consumer, 1 of 2 live member(s) on the new protocol, 1 expected"
    assert evaluate(FakeAdmin(done), "g", migrated).met
    assert evaluate(FakeAdmin(mixed), "g", GroupCondition("type", group_type="consumer")).met
    assert evaluate(FakeAdmin(None), "g", GroupCondition("empty", allow_absent=True)).met
    assert evaluate(FakeAdmin(None), "g", GroupCondition("state", states=("dead",))).met
    assert not evaluate(FakeAdmin(mixed), "g", GroupCondition("state", states=("Empty",))).met
    lagging = GroupOffsets("g", (PartitionOffsets("t", 0, 5, 0, 9), PartitionOffsets("t", 1, 9, 0, 9)))
    assert not evaluate(FakeAdmin(offsets=lagging), "g", GroupCondition("lag", max_lag=3)).met
    assert evaluate(FakeAdmin(offsets=lagging), "g", GroupCondition("lag", max_lag=4)).met
    assert GroupCondition.from_dict(json.loads(json.dumps(migrated.to_dict()))) == migrated
    with pytest.raises(ValueError):
        GroupCondition("type", group_type="weird")


def test_snapshot_roundtrip_compare_and_restore_plan():
    desc = ConsumerGroupDescription("g", GroupType.CLASSIC, "Empty", "", 1)
    before = GroupOffsets("g", (PartitionOffsets("t", 0, 10, 0, 12), PartitionOffsets("t", 1, 7, 0, 7),
                                PartitionOffsets("t", 2, 3, 0, 9), PartitionOffsets("t", 3, 4, 0, 4)))
    snap = snapshot_from("cluster-1", desc, before)
    again = OffsetSnapshot.from_json(snap.to_json())
    assert again == snap and again.sha256 == snap.sha256
    after = GroupOffsets("g", (PartitionOffsets("t", 0, 12, 0, 12), PartitionOffsets("t", 1, 7, 0, 7),
                               PartitionOffsets("t", 2, 0, 0, 9), PartitionOffsets("t", 4, 1, 0, 1)))
    result = compare(snap, after)
    assert result.counts == {"equal": 1, "advanced": 1, "regressed": 1, "missing": 1, "new": 1}
    assert restore_plan(result) == {TopicPartition("t", 2): 3, TopicPartition("t", 3): 4}
    assert not result.to_dict()["preserved"]


@pytest.mark.parametrize("text, fragment", [
    ("not json", "is not JSON"),
    ('{"format": "something-else"}', "is not an offsets snapshot"),
    ('{"format": "airflow-provider-kip848/group-offsets-snapshot", "version": 9}', "version 9"),
    ('{"format": "airflow-provider-kip848/group-offsets-snapshot", "version": 1, "cluster_id": "c"}', "missing"),
    ('{"format": "airflow-provider-kip848/group-offsets-snapshot", "version": 1, "cluster_id": "c", "group_id": "g",'
     ' "group_type": "classic", "group_state": "Empty", "taken_at": "x",'
     ' "partitions": [{"topic": "t", "partition": "zero", "committed": 1}]}', "malformed"),
])
def test_malformed_snapshots_are_refused(text, fragment):
    with pytest.raises(SnapshotInvalid, match=fragment):
        OffsetSnapshot.from_json(text)


def test_auto_commit_shutdown_budget_and_rack_awareness():
    f = by_key(lint_client_config({"group.protocol": "consumer", "client.rack": "eu-west-1a"}, "consumer"))
    assert f["enable.auto.commit"].severity == "info" and "session timeout" in f["enable.auto.commit"].message
    assert "terminationGracePeriodSeconds" in f["enable.auto.commit"].fix
    assert f["client.rack"].severity == "warn" and "KAFKA-19387" in f["client.rack"].message
    assert "client.rack" not in by_key(lint_client_config({"group.protocol": "consumer"}, "consumer"))


def test_written_offsets_must_read_back():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    after = GroupOffsets("g", (PartitionOffsets("t", 0, 4), PartitionOffsets("t", 1, 0)))
    require_read_back("g", {a: 4}, after)  # what was written shows
    with pytest.raises(OffsetsNotConfirmed, match=r"1 partition\(s\): t:1 wrote 6 reads 0") as exc:
        require_read_back("g", {a: 4, b: 6}, after)
    assert exc.value.retriable
    with pytest.raises(OffsetsNotConfirmed, match="reads None"):
        require_read_back("g", {a: 4}, GroupOffsets("g"))  # nothing committed at all

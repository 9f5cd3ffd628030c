"""Kafka facts that changed (issue 30, item 9), on real brokers.

* KIP-1251 (4.3.0): a consumer group's offset commits are no longer fenced while a member reconciles; the
  migration preflight warns on older brokers and shows ``group.consumer.assignment.interval.ms`` (new in
  4.3.0), "not present (broker < 4.3)" where a broker lacks it.
* KAFKA-20236: group configs outlive their group and apply to a new group with the same id; the preflight
  and the fleet inventory name them.
* KAFKA-20454: ``kafka-consumer-groups --reset-offsets`` changes a streams group's offsets; the CLI backend
  refuses every offsets change on a streams group before anything is sent.
"""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.model import GroupType, TopicPartition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import create_topics, produce
from tests.conftest import set_kafka_connection, wait_until


def _check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def test_group_configs_without_a_group_are_flagged_by_preflight_and_inventory(native, bootstrap, unique, kafka_conn,
                                                                               context, kafka_version):
    topic, never, deleted, kept = unique("t"), unique("never"), unique("deleted"), unique("kept")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, ["a", "b"])
    # configs on an id no group ever had, and on a group that is then deleted: both stay (KAFKA-20236)
    native.alter_group_config(never, {"consumer.session.timeout.ms": 30000}, allow_absent_group=True)
    for g in (deleted, kept):
        native.alter_group_offsets(g, {TopicPartition(topic, 0): 1})
        # the commit made a classic group: its consumer.* config is set for the consumer group it would become
        native.alter_group_config(g, {"consumer.heartbeat.interval.ms": 3000}, for_group_type="consumer")
    native.delete_group(deleted)
    assert native.describe_group_config(deleted).dynamic == {"consumer.heartbeat.interval.ms": "3000"}

    inventory = native.inventory()
    assert inventory.orphan_group_configs_error is None
    orphans = inventory.orphan_group_configs or {}
    assert orphans.get(never) == {"consumer.session.timeout.ms": "30000"}
    assert orphans.get(deleted) == {"consumer.heartbeat.interval.ms": "3000"}
    assert kept not in orphans and inventory.entry(kept).type is GroupType.CLASSIC
    assert inventory.requests["ListConfigResources"] == 1
    assert inventory.to_dict()["orphan_group_configs"][deleted] == {"consumer.heartbeat.interval.ms": "3000"}

    for group, shown in ((never, "consumer.session.timeout.ms=30000"), (deleted, "consumer.heartbeat.interval.ms=3000")):
        report = KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=kafka_conn, mode="classic_to_consumer_offline",
                                            group_id=group).execute(context)
        check = _check(report, "inherited_group_configs")
        assert check["status"] == "warn" and shown in check["evidence"] and "does not exist" in check["evidence"]
        assert "KAFKA-20236" in check["remedy"] and "inherited_group_configs" in report["warnings"]
    # a group with its own configs and offsets: they are shown, not warned about
    report = KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=kafka_conn, mode="classic_to_consumer_offline",
                                        group_id=kept).execute(context)
    assert _check(report, "inherited_group_configs") == {
        "name": "inherited_group_configs", "status": "pass",
        "evidence": "the group's own configs: consumer.heartbeat.interval.ms=3000", "remedy": ""}
    # KIP-1251: a 4.3+ broker has assignment epochs and shows its assignment interval (1 s by default); an older one
    # (make test-matrix's 4.2.2) is warned about
    epochs = _check(report, "assignment_epochs")
    if tuple(int(p) for p in kafka_version.split(".")) >= (4, 3, 0):
        assert epochs["status"] == "pass" and "group.consumer.assignment.interval.ms=1000" in epochs["evidence"]
    else:
        assert epochs["status"] == "warn" and "without KIP-1251 assignment epochs" in epochs["evidence"]
    # the recreated group inherits the configs left behind
    native.alter_group_offsets(deleted, {TopicPartition(topic, 0): 2})
    assert native.describe_group_config(deleted).value("consumer.heartbeat.interval.ms") == "3000"
    report = KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=kafka_conn, mode="classic_to_consumer_offline",
                                        group_id=deleted).execute(context)
    assert "consumer.heartbeat.interval.ms=3000" in _check(report, "inherited_group_configs")["evidence"]
    for g in (never, deleted, kept):
        native.alter_group_config(g, delete_configs=["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"],
                                  allow_absent_group=True)


@pytest.mark.slow
def test_brokers_before_4_3_warn_without_assignment_epochs(fresh_kafka, monkeypatch, unique, context):
    """A 4.2.1 broker: no KIP-1251, no assignment interval config (said so, no value invented); it lists
    config resources by type (KIP-1142, 4.1+), so the inventory still finds configs without a group."""
    broker = fresh_kafka("4.2.1")
    conn = set_kafka_connection(monkeypatch, "kafka_4_2_1", broker.bootstrap_servers)
    group = unique("g")
    with KafkaAdmin(ClientSettings(broker.bootstrap_servers)) as admin:
        assert {b.release for b in admin.broker_versions()} == {"4.2"}
        admin.alter_group_config(group, {"consumer.session.timeout.ms": 30000}, allow_absent_group=True)
        inventory = admin.inventory()
    assert inventory.orphan_group_configs == {group: {"consumer.session.timeout.ms": "30000"}}
    report = KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=conn, mode="classic_to_consumer",
                                        group_id=group).execute(context)
    epochs = _check(report, "assignment_epochs")
    assert epochs["status"] == "warn" and "4.2 (< 4.3.0" in epochs["evidence"]
    assert "group.consumer.assignment.interval.ms not present (broker < 4.3)" in epochs["evidence"]
    assert "STALE_MEMBER_EPOCH" in epochs["remedy"] and "assignment_epochs" in report["warnings"]
    # streams groups have had assignment epochs since 4.2: no warning, and no interval invented either
    report = KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=conn, mode="classic_to_streams", group_id=group,
                                        declared_broker_version="4.2.1").execute(context)
    epochs = _check(report, "assignment_epochs")
    assert epochs["status"] == "pass"
    assert "group.streams.assignment.interval.ms not present (broker < 4.3)" in epochs["evidence"]


def test_cli_backend_refuses_offsets_changes_on_a_streams_group(kafka, bootstrap, unique, kafka_version):
    """KAFKA-20454: kafka-consumer-groups --reset-offsets changes a streams group's offsets (shown at the end on
    this release); the CLI backend refuses any offsets change on a streams group, dry run included, before
    anything is sent (without the refusal it fails later on kafka-streams-groups' "has no active members"
    describe of the empty group, with a tool error), and the offsets stay as they were."""
    app_id = unique("wc")
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["a b", "b c", "c d", "d e"], keys=["1", "2", "3", "4"])
    app = kafka.start_wordcount(app_id)
    native = KafkaAdmin(ClientSettings(bootstrap))
    try:
        try:
            wait_until(lambda: any(tp.topic == WORDCOUNT_INPUT_TOPIC for tp in native.group_offsets(app_id).committed),
                       timeout=60, what="the streams app's first commit")
        finally:
            app.stop()
        wait_until(lambda: native.describe_group(app_id).is_empty, what="streams group empty")
        assert native.group_listing(app_id).type is GroupType.STREAMS
        before = native.group_offsets(app_id).committed
        tp = max(before, key=lambda t: before[t])
        assert before[tp] > 0
        cli = KafkaCli(ClientSettings(bootstrap), KafkaTools(version=kafka_version))
        for dry_run in (True, False):
            with pytest.raises(kafka_errors.WrongGroupType) as err:
                cli.alter_group_offsets(app_id, {tp: 0}, dry_run=dry_run)
            assert "is a streams group" in str(err.value) and "KAFKA-20454" in str(err.value)
            assert "native backend" in err.value.remedy and err.value.actual is GroupType.STREAMS
            assert native.group_offsets(app_id).committed == before
        # the hazard the refusal keeps away: Kafka's consumer tool does change a streams group's offsets
        cli.runner.run("kafka-consumer-groups", ["--reset-offsets", "--group", app_id, "--topic",
                                                 f"{tp.topic}:{tp.partition}", "--to-offset", "0", "--execute"])
        assert native.group_offsets(app_id).committed[tp] == 0 != before[tp]
    finally:
        native.close()

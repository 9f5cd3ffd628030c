"""KafkaGroupAdminHook over a real broker: connection from Airflow's env-var secrets backend."""

from __future__ import annotations

import json
import socket

import pytest

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import KafkaConnectionError
from airflow_provider_kip848.kafka.model import GroupType
from kip848_harness.clients import consume, create_topics, produce


@pytest.fixture
def conn_id(bootstrap, monkeypatch, unique) -> str:
    cid = unique("kafka").replace("-", "_")
    monkeypatch.setenv(f"AIRFLOW_CONN_{cid.upper()}", json.dumps({"conn_type": "kafka_admin", "host": bootstrap}))
    return cid


@pytest.fixture
def kafka_release(kafka_version) -> str:
    return ".".join(kafka_version.split(".")[:2])


def test_hook_reads_cluster_features_and_groups(conn_id, bootstrap, unique, kafka_release):
    topic, group = unique("t"), unique("g")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, [b"1"])
    consume(bootstrap, group, [topic], 1, group_protocol="consumer")

    with KafkaGroupAdminHook(conn_id) as hook:
        info = hook.describe_cluster()
        assert len(info.brokers) == 1 and info.controller_id == 1 and info.cluster_id
        assert hook.describe_features().level("group.version") == 1
        groups = {g.group_id: g for g in hook.list_groups()}
        assert groups[group].type is GroupType.CONSUMER and groups[group].state == "Empty"
        versions = hook.broker_versions()
        assert [(v.node_id, v.release) for v in versions] == [(1, kafka_release)]
        coordinator = hook.group_coordinator_config()
        assert coordinator.rebalance_protocols == ("classic", "consumer", "streams")
        assert coordinator.migration_policy == "bidirectional"
        assert coordinator.int_value("group.streams.max.standby.replicas") == 2
        ok, message = hook.test_connection()
        assert ok and "group.version=1" in message


def test_unreachable_cluster_is_a_clear_error(monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEAD", json.dumps(
        {"conn_type": "kafka_admin", "host": f"127.0.0.1:{dead}", "extra": {"request_timeout_ms": 3000}}))
    with KafkaGroupAdminHook("kafka_dead") as hook:
        with pytest.raises(KafkaConnectionError) as err:
            hook.describe_features()
        assert f"127.0.0.1:{dead}" in str(err.value)
        assert "Check the bootstrap servers" in str(err.value)
    with KafkaGroupAdminHook("kafka_dead") as hook:
        ok, message = hook.test_connection()
    assert not ok and "127.0.0.1" in message


def test_cli_hook_with_provider_jars_and_with_a_kafka_home(bootstrap, monkeypatch, unique, kafka_version):
    from airflow_provider_kip848.hooks.cli import KafkaCliHook
    from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution

    group = unique("cli-hook")
    home = KafkaDistribution(kafka_version).home  # a directory with libs/, like an unpacked release
    for cid, extra in (("kafka_cli_jars", {"kafka_version": kafka_version}),
                       ("kafka_cli_home", {"kafka_home": str(home), "cli_timeout": 60})):
        monkeypatch.setenv(f"AIRFLOW_CONN_{cid.upper()}",
                           json.dumps({"conn_type": "kafka_admin", "host": bootstrap, "extra": extra}))
        with KafkaCliHook(cid) as hook:
            assert hook.describe_features().level("streams.version") == 1
            change = hook.alter_group_config(group, {"streams.num.standby.replicas": 1}, allow_absent_group=True)
            assert change.after == {"streams.num.standby.replicas": "1"}
            hook.alter_group_config(group, delete_configs=["streams.num.standby.replicas"], allow_absent_group=True)


def test_cli_hook_with_a_wrong_kafka_home_says_so(bootstrap, monkeypatch, tmp_path):
    from airflow_provider_kip848.hooks.cli import KafkaCliHook
    from airflow_provider_kip848.kafka.errors import KafkaToolError

    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_CLI_BAD", json.dumps(
        {"conn_type": "kafka_admin", "host": bootstrap, "extra": {"kafka_home": str(tmp_path)}}))
    with pytest.raises(KafkaToolError, match="has no libs/ directory"):
        KafkaCliHook("kafka_cli_bad").describe_features()
    ok, message = KafkaCliHook("kafka_cli_bad").test_connection()
    assert not ok and "libs/" in message

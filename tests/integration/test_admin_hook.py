"""KafkaGroupAdminHook over a real broker: connection from Airflow's env-var secrets backend."""

from __future__ import annotations

import json
import socket

import pytest

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import KafkaConnectionError
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.local.clients import consume, create_topics, produce


@pytest.fixture
def conn_id(bootstrap, monkeypatch, unique) -> str:
    cid = unique("kafka").replace("-", "_")
    monkeypatch.setenv(f"AIRFLOW_CONN_{cid.upper()}", json.dumps({"conn_type": "kafka_admin", "host": bootstrap}))
    return cid


def test_hook_reads_cluster_features_and_groups(conn_id, bootstrap, unique):
    topic, group = unique("t"), unique("g")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, [b"1"])
    consume(bootstrap, group, [topic], 1, group_protocol="consumer")

    hook = KafkaGroupAdminHook(conn_id)
    info = hook.describe_cluster()
    assert len(info.brokers) == 1 and info.controller_id == 1 and info.cluster_id
    assert hook.describe_features().level("group.version") == 1
    groups = {g.group_id: g for g in hook.list_groups()}
    assert groups[group].type is GroupType.CONSUMER and groups[group].state == "Empty"
    ok, message = hook.test_connection()
    assert ok and info.cluster_id in message


def test_unreachable_cluster_is_a_clear_error(monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEAD", json.dumps(
        {"conn_type": "kafka_admin", "host": f"127.0.0.1:{dead}", "extra": {"request_timeout_ms": 3000}}))
    hook = KafkaGroupAdminHook("kafka_dead")
    with pytest.raises(KafkaConnectionError) as err:
        hook.describe_features()
    assert f"127.0.0.1:{dead}" in str(err.value)
    assert "Check the bootstrap servers" in str(err.value)
    ok, message = hook.test_connection()
    assert not ok and "127.0.0.1" in message

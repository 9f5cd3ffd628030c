"""Proxy detection (issue 47.5): the preflight reads the APIs advertised where the applications' clients bootstrap.

A real Kafka-protocol proxy process (kip848_harness.kafka_proxy) stands in front of the session's real broker: it
forwards every request, rewrites the broker's address in Metadata/FindCoordinator/DescribeCluster answers so the
clients stay on it, and hides chosen APIs from its ApiVersions answer, as a gateway without KIP-848 support does. A
real Java consumer (kafka-console-consumer, group.protocol=consumer) through it dies with UnsupportedVersionException:
the finding the preflight must make before a move.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.api import read_preflight_facts
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.preflight import FAIL, PASS, run_preflight
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from kip848_harness import clients
from kip848_harness.kafka_proxy import KafkaProxy
from tests.conftest import set_kafka_connection


def java_consumer(kafka, bootstrap: str, topic: str, group: str) -> subprocess.CompletedProcess[str]:
    """A real Java consumer on the consumer protocol (KIP-848) reading one record through ``bootstrap``."""
    cmd = kafka.tool_command("kafka-console-consumer", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--group", group, "--from-beginning",
        "--command-property", "group.protocol=consumer", "--max-messages", "1", "--timeout-ms", "60000"])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def preflight(bootstrap: str, clients_at: str, mode: str, group: str):
    settings = ClientSettings(bootstrap, client_bootstrap_servers=clients_at, request_timeout_ms=10000)
    with KafkaAdmin(settings) as admin:
        return run_preflight(read_preflight_facts(admin, group), mode, group_id=group)


@pytest.fixture
def topic(kafka, unique) -> str:
    name = unique("px")
    clients.create_topics(kafka.bootstrap_servers, {name: 1})
    clients.produce(kafka.bootstrap_servers, name, [b"one"])
    return name


def test_a_proxy_hiding_the_consumer_heartbeat_fails_the_consumer_move(kafka, topic, unique, tmp_path):
    group = unique("g")
    with KafkaProxy(kafka.bootstrap_servers, drop=(68, 69), log_path=tmp_path / "proxy.log") as proxy:
        report = preflight(kafka.bootstrap_servers, proxy.bootstrap_servers, "classic_to_consumer_offline", group)
        consumer = java_consumer(kafka, proxy.bootstrap_servers, topic, unique("g"))
    check = report.check("client_apis")
    print(report.render_text())
    assert check.status == FAIL and not report.passed
    assert f"{proxy.bootstrap_servers} does not advertise ConsumerGroupHeartbeat (API key 68)" in check.evidence
    assert "ConsumerGroupDescribe" not in check.evidence  # the provider itself does not go through the proxy
    assert "UnsupportedVersionException" in check.remedy and "CONSUMER_GROUP_HEARTBEAT" in check.remedy
    # what the check predicts, from a real Java consumer through the same proxy
    assert "UnsupportedVersionException" in consumer.stderr, consumer.stderr[-2000:]
    assert "does not support CONSUMER_GROUP_HEARTBEAT" in consumer.stderr
    assert "Processed a total of 0 messages" in consumer.stderr


def test_a_proxy_forwarding_everything_passes_and_carries_a_real_consumer(kafka, topic, unique, tmp_path):
    with KafkaProxy(kafka.bootstrap_servers, log_path=tmp_path / "proxy.log") as proxy:
        report = preflight(kafka.bootstrap_servers, proxy.bootstrap_servers, "classic_to_consumer_offline",
                           unique("g"))
        started = time.monotonic()
        consumer = java_consumer(kafka, proxy.bootstrap_servers, topic, unique("g"))
        print(f"java consumer through the proxy: {time.monotonic() - started:.1f} s")
    assert report.check("client_apis").status == PASS, report.render_text()
    assert "Processed a total of 1 messages" in consumer.stderr, consumer.stderr[-2000:]


def test_the_streams_move_needs_the_streams_heartbeat_where_the_provider_bootstraps(kafka, unique, tmp_path):
    """The provider's own bootstrap behind the proxy (no client_bootstrap_servers: the clients' is the same): the
    streams heartbeat and, since the provider describes groups there, the streams describe are required."""
    group = unique("g")
    with KafkaProxy(kafka.bootstrap_servers, drop=(88, 89), log_path=tmp_path / "proxy.log") as proxy:
        with KafkaAdmin(ClientSettings(proxy.bootstrap_servers, request_timeout_ms=10000)) as admin:
            facts = read_preflight_facts(admin, group)
        report = run_preflight(facts, "classic_to_streams", group_id=group)
    check = report.check("client_apis")
    assert check.status == FAIL, report.render_text()
    assert "StreamsGroupHeartbeat (API key 88), StreamsGroupDescribe (API key 89)" in check.evidence
    assert "group.protocol=streams" in check.remedy and "STREAMS_GROUP_HEARTBEAT" in check.remedy


@pytest.mark.parametrize(("mode", "said"), [("empty", "answered ApiVersions without a single API"),
                                            ("close", "closed the connection instead of answering ApiVersions")])
def test_a_proxy_that_answers_api_versions_with_nothing_fails_and_changes_nothing(
        kafka, topic, unique, tmp_path, monkeypatch, context, mode, said):
    group = unique("g")
    clients.consume(kafka.bootstrap_servers, group, [topic], 1, group_protocol="classic")  # a classic group, Empty
    with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
        before = (admin.group_listing(group), admin.group_offsets(group).committed)
    with KafkaProxy(kafka.bootstrap_servers, mode=mode, log_path=tmp_path / "proxy.log") as proxy:
        conn = set_kafka_connection(monkeypatch, "kafka_behind_proxy", kafka.bootstrap_servers,
                                    client_bootstrap_servers=proxy.bootstrap_servers)
        op = KafkaMigrationPreflightOperator(task_id="pre", kafka_conn_id=conn, mode="classic_to_consumer_offline",
                                             group_id=group)
        with pytest.raises(AirflowFailException) as refused:
            op.execute(context)
    message = str(refused.value)
    print(message)
    assert f"client_apis: {proxy.bootstrap_servers} {said}" in message
    assert "client_bootstrap_servers" in message
    report = context["ti"].xcom["report"]
    assert "client_apis" in report["failures"]
    with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
        assert (admin.group_listing(group), admin.group_offsets(group).committed) == before

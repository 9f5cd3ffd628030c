"""The embedded broker itself: start, ready, cache reuse, ports, restart, stop-only-ours, tools, 4.2.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import consume, create_topics, produce
from kip848_harness.errors import PortInUseError
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import wait_until


def test_session_broker_runs_the_requested_release(kafka, kafka_version):
    status = kafka.status()
    assert status.running and status.answering
    assert status.version == kafka_version
    log = kafka.log_path.read_text()
    assert f"Kafka version: {kafka_version}" in log
    assert "Kafka Server started" in log


def test_second_resolution_fetches_nothing(kafka, kafka_version):
    dist = KafkaDistribution(kafka_version)
    assert dist.is_resolved()
    report = dist.ensure()
    assert report.fetched is False
    assert report.jars > 50
    jars = {p.name for p in dist.libs_dir.glob("*.jar")}
    assert f"kafka_2.13-{kafka_version}.jar" in jars and f"kafka-tools-{kafka_version}.jar" in jars
    assert any(j.startswith("log4j-slf4j") for j in jars), "the SLF4J binding the POMs leave out"


def test_fresh_broker_reports_cached_jars_and_ready_time(fresh_kafka):
    broker = fresh_kafka()
    status = broker.status()
    assert status.running and status.answering
    report = broker.last_start
    assert report.fetched_jars is False  # the session already fetched them: nothing downloaded
    assert report.reported_version == broker.version
    assert report.format_seconds > 0 and report.ready_seconds > 0
    assert "jars from cache" in report.summary() and f"ready at {report.bootstrap_servers}" in report.summary()
    state = json.loads(broker.state_path.read_text())
    assert state["nodes"][0]["pid"] == status.pid == report.pid and state["version"] == broker.version


def test_port_in_use_is_refused_with_the_port_named(tmp_path, kafka_version):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        broker = LocalKafka(tmp_path / "k", version=kafka_version, port=port)
        with pytest.raises(PortInUseError) as err:
            broker.start()
    assert f"broker port 127.0.0.1:{port} is already in use" in str(err.value)
    assert "pass port 0" in str(err.value)
    assert not broker.status().running


def test_cli_port_in_use_prints_one_clear_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        env = dict(os.environ)
        proc = subprocess.run(
            [sys.executable, "-m", "kip848_harness", "kafka", "start",
             "--workdir", str(tmp_path / "k"), "--port", str(port)],
            capture_output=True, text=True, env=env, timeout=120,
        )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"error: Cannot start the local Kafka: broker port 127.0.0.1:{port} is already in use. "
                     "Stop whatever listens there, choose another port, or pass port 0 to let the launcher "
                     "pick free ports."]


def test_restart_keeps_cluster_data_and_ports(fresh_kafka, unique):
    broker = fresh_kafka()
    bootstrap = broker.bootstrap_servers
    topic, group = unique("t"), unique("g")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [b"a", b"b", b"c"])
    assert len(consume(bootstrap, group, [topic], 3)) == 3
    cluster_id = KafkaAdmin(ClientSettings(bootstrap)).describe_cluster().cluster_id

    report = broker.restart()
    assert report.bootstrap_servers == bootstrap
    assert report.cluster_id == cluster_id  # not re-formatted: a format makes a new cluster id
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        assert admin.describe_cluster().cluster_id == cluster_id
        # ListGroups leaves out the coordinator partitions a broker does not lead yet (right after a restart the
        # listing can be empty for a moment): the group comes back once its partition is loaded, or it was lost
        wait_until(lambda: group in {g.group_id for g in admin.list_groups()}, 60, f"{group} listed after the restart")


def test_stop_never_signals_a_process_it_did_not_start(fresh_kafka, tmp_path):
    victim = fresh_kafka()
    pid = victim.status().pid
    # A second work dir whose state file names the victim's pid (stale or forged state).
    impostor = LocalKafka(tmp_path / "impostor", version=victim.version)
    impostor.workdir.mkdir(parents=True)
    state = json.loads(victim.state_path.read_text())
    impostor.state_path.write_text(json.dumps(state))
    assert impostor.stop() is False
    assert victim.status().running and victim.status().pid == pid
    assert victim.stop() is True
    assert not victim.status().running
    assert not os.path.exists(f"/proc/{pid}") or b"kip848.instance" not in open(f"/proc/{pid}/cmdline", "rb").read()


def test_kafka_cli_tools_run_on_the_same_classpath(kafka):
    out = kafka.run_tool("kafka-features", ["describe"]).stdout
    assert "Feature: group.version" in out and "Feature: streams.version" in out
    out = kafka.run_tool("kafka-configs", ["--describe", "--all", "--entity-type", "brokers", "--entity-name", "1"]).stdout
    assert "group.coordinator.rebalance.protocols=classic,consumer,streams" in out
    assert kafka.run_tool("kafka-consumer-groups", ["--list"]).returncode == 0
    assert kafka.run_tool("kafka-streams-groups", ["--list"]).returncode == 0
    out = kafka.run_tool("kafka-storage", ["info", "-c", str(kafka.config_path)]).stdout
    assert "metadata.version" in out or "Found log directory" in out


def test_fast_tuning_reached_the_broker(kafka):
    out = kafka.run_tool("kafka-configs", ["--describe", "--all", "--entity-type", "brokers", "--entity-name", "1"]).stdout
    assert "group.consumer.min.session.timeout.ms=2000 " in out
    assert "group.streams.initial.rebalance.delay.ms=0 " in out


def test_failing_tool_raises_with_the_tools_message(kafka):
    from kip848_harness.errors import ToolError

    with pytest.raises(ToolError) as err:
        kafka.run_tool("kafka-features", ["upgrade", "--feature", "no.such.feature=1"])
    assert err.value.returncode != 0
    assert "no.such.feature" in str(err.value)


@pytest.mark.slow
def test_kafka_4_2_1_broker_also_works(fresh_kafka, unique):
    broker = fresh_kafka("4.2.1")
    assert "Kafka version: 4.2.1" in broker.log_path.read_text()
    with KafkaAdmin(ClientSettings(broker.bootstrap_servers)) as admin:
        features = admin.describe_features()
    # A cluster freshly formatted with 4.2+ gets streams.version 1 (4.2-IV1 = level 29).
    assert features.level("metadata.version") == 29
    assert features.level("group.version") == 1 and features.level("streams.version") == 1
    topic = unique("t")
    create_topics(broker.bootstrap_servers, {topic: 1})
    produce(broker.bootstrap_servers, topic, [b"x"])
    assert len(consume(broker.bootstrap_servers, unique("g"), [topic], 1, group_protocol="consumer")) == 1

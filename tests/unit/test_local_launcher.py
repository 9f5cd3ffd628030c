"""The launcher's pure parts: versions, POM, generated broker config, toolchain errors, CLI errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_kip848.kafka.cli.distribution import KAFKA_TOOLS, KafkaDistribution
from airflow_provider_kip848.kafka.cli.java import find_java, find_maven, parse_java_major
from airflow_provider_kip848.kafka.errors import (
    JavaNotFoundError,
    MavenNotFoundError,
    ToolchainError,
    UnsupportedKafkaVersion,
)
from kip848_harness.errors import LocalKafkaError
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.kafka_state import ClusterState, NodeState, random_cluster_id
from kip848_harness.kafka_tuning import FAST_TUNING


@pytest.mark.parametrize("version, major", [("1.8.0_392", 8), ("11.0.2", 11), ("17.0.15", 17), ("21", 21),
                                            ("25-ea", 25)])
def test_parse_java_major(version, major):
    assert parse_java_major(version) == major


def test_java_home_without_java_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(JavaNotFoundError) as err:
        find_java()
    assert f"JAVA_HOME={tmp_path} has no bin/java" in str(err.value)
    assert "Install a JDK 17 or newer" in str(err.value)


def test_too_old_java_is_refused(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    fake.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match=r"Java 11\.0\.22 .* is too old: Kafka 4.x brokers and tools need Java 17\+"):
        find_java()


def test_missing_maven_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("KIP848_MVN", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MavenNotFoundError, match="Maven \\(mvn\\) not found on PATH.*Install Apache Maven"):
        find_maven()


def test_uncached_version_without_maven_fails_before_doing_anything(monkeypatch, tmp_path):
    monkeypatch.setenv("KIP848_MVN", str(tmp_path / "no-mvn"))
    dist = KafkaDistribution("4.3.1", cache_dir=tmp_path)
    with pytest.raises(MavenNotFoundError):
        dist.ensure()
    assert not dist.libs_dir.exists()


@pytest.mark.parametrize("bad", ["3.9.0", "4.3", "latest", "4.3.1; rm -rf /"])
def test_unsupported_versions_are_refused(bad):
    with pytest.raises(UnsupportedKafkaVersion, match="not supported by the embedded broker"):
        KafkaDistribution(bad)


@pytest.mark.parametrize("version", ["4.2.2", "4.3.1", "4.4.0"])
def test_pom_pins_every_artifact_to_the_release_and_adds_the_slf4j_binding(version):
    pom = KafkaDistribution(version, cache_dir="/tmp/x").pom()
    escaped = re.escape(version)
    for artifact in ("kafka_2.13", "kafka-tools", "kafka-streams", "kafka-clients"):
        assert re.search(rf"<artifactId>{artifact}</artifactId><version>{escaped}</version>", pom), artifact
    assert "<artifactId>log4j-slf4j-impl</artifactId>" in pom
    assert "<artifactId>log4j-core</artifactId>" in pom
    # not published for 4.2.1, 4.2.2 or 4.4.0: a release's jars never depend on it (the harness builds its word count)
    assert "kafka-streams-examples" not in pom


def _props(kafka: LocalKafka, *ports: tuple[int, int, int | None]) -> dict[str, str]:
    """The server.properties the launcher writes for the first node of a cluster on ``ports``."""
    nodes = [NodeState(i + 1, port, cport, sasl) for i, (port, cport, sasl) in enumerate(ports)]
    state = ClusterState(version=kafka.version, host="127.0.0.1", cluster_id="c", tuning=kafka.tuning, nodes=nodes)
    return _load_properties(kafka.server_properties(state, nodes[0]))


def test_server_properties_single_node_kraft_and_fast_tuning(tmp_path):
    kafka = LocalKafka(tmp_path, overrides={"group.consumer.max.size": "5"})
    props = _props(kafka, (19092, 19093, None))
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:19093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["offsets.topic.replication.factor"] == "1"
    for key, value in FAST_TUNING.items():
        assert props[key] == value
    assert props["group.consumer.max.size"] == "5"  # overrides win


def _load_properties(text: str) -> dict[str, str]:
    """Read properties the way java.util.Properties does (for the escapes the generator writes)."""
    import re

    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = re.split(r"(?<!\\)=", line, maxsplit=1)
        unescape = lambda s: re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), s)  # noqa: E731
        out[unescape(key)] = unescape(value)
    return out


def test_sasl_listener_config_keeps_special_passwords_intact(tmp_path):
    kafka = LocalKafka(tmp_path, sasl_users={"admin": 'p"w\\x= #!', "alice": "a"}, super_users=["admin"])
    props = _props(kafka, (1, 2, 3))
    assert props["listeners"].endswith(",SASL_PLAINTEXT://127.0.0.1:3")
    assert props["super.users"] == "User:ANONYMOUS;User:admin"
    assert 'user_admin="p\\"w\\\\x= #!"' in props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]


def test_production_tuning_keeps_broker_defaults(tmp_path):
    props = _props(LocalKafka(tmp_path, tuning="production"), (1, 2, None))
    assert "group.consumer.session.timeout.ms" not in props
    assert "group.streams.initial.rebalance.delay.ms" not in props


def test_three_nodes_form_a_static_quorum_with_replicated_internal_topics(tmp_path):
    kafka = LocalKafka(tmp_path, nodes=3)
    props = _props(kafka, (9001, 9101, None), (9002, 9102, None), (9003, 9103, None))
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103"
    assert "controller.quorum.bootstrap.servers" not in props
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "share.coordinator.state.topic.replication.factor", "default.replication.factor"):
        assert props[key] == "3", key
    assert props["min.insync.replicas"] == "1"
    assert props["log.dirs"] == str(tmp_path / "node-1" / "data")
    assert kafka.node_log_path(2) == tmp_path / "node-2" / "logs" / "server.log"


@pytest.mark.parametrize("bad", [0, 10, "3", True])
def test_a_cluster_size_out_of_range_is_refused(tmp_path, bad):
    with pytest.raises(LocalKafkaError, match="nodes must be a number from 1 to 9"):
        LocalKafka(tmp_path, nodes=bad)


def test_unknown_tuning_is_refused(tmp_path):
    with pytest.raises(LocalKafkaError, match="Unknown tuning 'slow'"):
        LocalKafka(tmp_path, tuning="slow")  # type: ignore[arg-type]


def test_cluster_ids_look_like_kafka_uuids():
    ids = {random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)


def test_tool_table_covers_the_tools_the_runbooks_use():
    for tool in ("kafka-features", "kafka-configs", "kafka-consumer-groups", "kafka-streams-groups", "kafka-storage"):
        assert tool in KAFKA_TOOLS


def test_unknown_tool_lists_the_known_ones(tmp_path):
    dist = KafkaDistribution("4.3.1", cache_dir=tmp_path)
    with pytest.raises(ToolchainError, match="Unknown Kafka tool 'kafka-frobnicate'.*kafka-features"):
        dist.tool_command("kafka-frobnicate")


def _run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kip848_harness", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_cli_without_java_prints_one_clear_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = "/nonexistent"
    env["KIP848_CACHE_DIR"] = str(tmp_path)
    proc = _run_cli(["kafka", "start", "--name", "nojava"], env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: Java not found (PATH): Kafka 4.x needs Java 17+.")
    assert "Install a JDK 17" in lines[0]
    assert not (Path(tmp_path) / "instances" / "nojava" / "state.json").exists()


def test_cli_status_of_never_started_instance(tmp_path):
    env = dict(os.environ, KIP848_CACHE_DIR=str(tmp_path))
    proc = _run_cli(["kafka", "status", "--name", "nothing"], env)
    assert proc.returncode == 1
    assert "not running (never started here)" in proc.stdout

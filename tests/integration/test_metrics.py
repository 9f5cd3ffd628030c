"""Broker metrics in the loop: the embedded broker's Prometheus JMX exporter, the core's reader, the hook.

Everything here runs against real Kafka brokers started with ``metrics=True`` and real clients. The group
coordinator refreshes its group counts every 60 s (Kafka 4.x, not configurable), so the tests that wait for a
count to move wait on the condition for up to a few minutes; rebalance counts move at once.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections import Counter

import pytest

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.cli import KafkaCliHook
from airflow_provider_kip848.kafka.errors import InvalidClientSettings, MetricsUnavailable
from airflow_provider_kip848.kafka.metrics import GroupMetricsSample, parse_prometheus_text, read_group_metrics
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import set_kafka_connection, start_or_fail, wait_until

PROTOCOLS = ("classic", "consumer", "streams")
#: the coordinator's group-count timer (60 s) plus a member's join, with room for a slow machine
COUNT_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def metrics_kafka(tmp_path_factory, kafka_version, pytestconfig):
    """A broker of this module's own, exporter on: its group counts start at 0 and only this module moves them."""
    broker = LocalKafka(tmp_path_factory.mktemp("metrics"), version=kafka_version, metrics=True, die_with_parent=True)
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


def _sample(broker: LocalKafka) -> GroupMetricsSample:
    return read_group_metrics(broker.metrics_url, timeout=5)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the embedded broker's exporter ---------------------------------------------------------------------------


def test_the_exporter_serves_the_group_coordinator_figures_and_little_else(metrics_kafka):
    url = metrics_kafka.metrics_url
    assert url == metrics_kafka.node_metrics_url(1) == metrics_kafka.last_start.metrics_url
    assert metrics_kafka.status().nodes[0].metrics_url == url
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    kafka_names = {s.name for s in parse_prometheus_text(text) if s.name.startswith("kafka_")}
    assert kafka_names == {
        "kafka_server_group_coordinator_metrics_group_count",
        "kafka_server_group_coordinator_metrics_consumer_group_count",
        "kafka_server_group_coordinator_metrics_streams_group_count",
        "kafka_server_group_coordinator_metrics_consumer_group_rebalance_rate",
        "kafka_server_group_coordinator_metrics_consumer_group_rebalance_count",
        "kafka_server_group_coordinator_metrics_streams_group_rebalance_rate",
        "kafka_server_group_coordinator_metrics_streams_group_rebalance_count",
        "kafka_server_group_coordinator_metrics_group_completed_rebalance_rate",
        "kafka_server_group_coordinator_metrics_group_completed_rebalance_count",
        "kafka_coordinator_group_GroupMetadataManager_Value",
    }
    sample = _sample(metrics_kafka)
    assert sample.missing == ()
    assert set(PROTOCOLS) <= set(sample.groups_by_protocol)
    assert {"Stable", "NotReady", "Empty"} <= set(sample.streams_groups_by_state)


def test_group_counts_follow_the_groups_and_a_second_member_moves_the_rebalance_counts(metrics_kafka, unique,
                                                                                        tmp_path):
    bootstrap = metrics_kafka.bootstrap_servers
    before = _sample(metrics_kafka)
    topic, classic_group, consumer_group, app_id = unique("t"), unique("classic"), unique("consumer"), unique("wc")
    create_topics(bootstrap, {topic: 2, WORDCOUNT_INPUT_TOPIC: 1, WORDCOUNT_OUTPUT_TOPIC: 1})
    produce(bootstrap, topic, [b"a", b"b", b"c", b"d"])
    members: list[ConsumerProcess] = []

    def join(group: str, protocol: str) -> None:
        members.append(ConsumerProcess.start(bootstrap, group, [topic], protocol=protocol,
                                             client_id=f"{protocol}-{len(members)}",
                                             log_file=str(tmp_path / f"member-{len(members)}.log")))

    join(classic_group, "classic")
    join(consumer_group, "consumer")
    app = metrics_kafka.start_wordcount(app_id)
    try:
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            for group in (classic_group, consumer_group, app_id):
                wait_until(lambda g=group: admin.describe_group(g).state == "Stable", timeout=90, what=f"{group} Stable")

            def counted() -> GroupMetricsSample | None:
                s = _sample(metrics_kafka)
                grown = all((s.group_count(p) or 0) > (before.group_count(p) or 0) for p in PROTOCOLS)
                stable = s.streams_groups_by_state.get("Stable", 0) > before.streams_groups_by_state.get("Stable", 0)
                return s if grown and stable else None

            after = wait_until(counted, timeout=COUNT_TIMEOUT, interval=2, what="the new groups in the group counts")
            assert isinstance(after, GroupMetricsSample)
            # every group is counted once, under its protocol: the counts match the cluster's own listing
            listed = Counter(g.type.value for g in admin.list_groups())
            assert {p: after.group_count(p) for p in PROTOCOLS} == {p: listed[p] for p in PROTOCOLS}
            assert after.consumer_groups_by_state.get("Stable", 0) >= 1
            assert after.classic_groups_by_state.get("Stable", 0) >= 1
            assert after.taken_at > before.taken_at

            # a second member joins each group: a rebalance each, counted at once
            rebalances = _sample(metrics_kafka)
            join(classic_group, "classic")
            join(consumer_group, "consumer")
            for group in (classic_group, consumer_group):
                wait_until(lambda g=group: len((d := admin.describe_consumer_group(g)).members) == 2
                           and d.state == "Stable", timeout=90, what=f"two members in {group}")

            def moved() -> GroupMetricsSample | None:
                s = _sample(metrics_kafka)
                return s if ((s.consumer_rebalance_count or 0) > (rebalances.consumer_rebalance_count or 0)
                             and (s.classic_rebalance_count or 0) > (rebalances.classic_rebalance_count or 0)) else None

            moved_sample = wait_until(moved, timeout=60, what="the rebalance counts to move")
            assert isinstance(moved_sample, GroupMetricsSample)
            assert moved_sample.consumer_rebalance_rate and moved_sample.consumer_rebalance_rate > 0
            assert moved_sample.classic_rebalance_rate and moved_sample.classic_rebalance_rate > 0
            assert (moved_sample.streams_rebalance_count or 0) >= 1  # the Streams app's own join
    finally:
        for member in members:
            member.stop()
        app.stop()


# -- through an Airflow connection --------------------------------------------------------------------------------


def test_hook_reads_the_metrics_the_connection_names(metrics_kafka, monkeypatch):
    conn = set_kafka_connection(monkeypatch, "kafka_metrics", metrics_kafka.bootstrap_servers,
                                metrics_url=f" {metrics_kafka.metrics_url} ,")
    with KafkaGroupAdminHook(conn) as hook:
        assert hook.metrics_urls == (metrics_kafka.metrics_url,)
        sample = hook.group_metrics()
    assert isinstance(sample, GroupMetricsSample)
    assert sample.urls == (metrics_kafka.metrics_url,) and sample.missing == ()
    assert set(PROTOCOLS) <= set(sample.groups_by_protocol)
    assert sample.consumer_rebalance_count is not None and sample.streams_rebalance_rate is not None
    data = json.loads(json.dumps(sample.to_dict()))  # small and plain: fit for XCom
    assert data["nodes"][0]["url"] == metrics_kafka.metrics_url
    with KafkaCliHook(conn) as cli_hook:  # both hooks have it (it needs no backend)
        cli_sample = cli_hook.group_metrics()
    assert cli_sample is not None and set(cli_sample.groups_by_protocol) == set(sample.groups_by_protocol)


def test_hook_without_metrics_url_returns_none(metrics_kafka, monkeypatch):
    conn = set_kafka_connection(monkeypatch, "kafka_no_metrics", metrics_kafka.bootstrap_servers)
    with KafkaGroupAdminHook(conn) as hook:
        assert hook.metrics_urls == () and hook.group_metrics() is None


def test_hook_with_an_unreachable_metrics_url_raises_the_providers_error(metrics_kafka, monkeypatch):
    dead = f"http://127.0.0.1:{_dead_port()}/metrics"
    conn = set_kafka_connection(monkeypatch, "kafka_dead_metrics", metrics_kafka.bootstrap_servers,
                                metrics_url=f"{metrics_kafka.metrics_url},{dead}")
    with KafkaGroupAdminHook(conn) as hook, pytest.raises(MetricsUnavailable) as err:
        hook.group_metrics(timeout=5)  # a hang fails at the test's timeout (no wall-clock bound asserted here)
    assert err.value.retriable and err.value.urls == (dead,)
    assert str(err.value).startswith(f"The metrics endpoint {dead} did not answer (")
    assert "the connection's metrics_url extra lists one URL per broker" in str(err.value)


def test_hook_with_a_malformed_metrics_url_names_the_connection(metrics_kafka, monkeypatch):
    conn = set_kafka_connection(monkeypatch, "kafka_bad_metrics", metrics_kafka.bootstrap_servers,
                                metrics_url="broker1:7071")
    with KafkaGroupAdminHook(conn) as hook, pytest.raises(InvalidClientSettings) as err:
        hook.group_metrics()
    assert "Connection 'kafka_bad_metrics', metrics_url: 'broker1:7071' is not an http(s) URL" in str(err.value)
    assert not err.value.retriable


# -- several nodes, restarts, the command line ---------------------------------------------------------------------


def test_each_node_of_a_cluster_has_its_own_exporter(fresh_kafka):
    cluster = fresh_kafka(nodes=2, heap="384m", metrics=True)
    urls = cluster.metrics_urls
    assert len(set(urls)) == 2 and cluster.metrics_url == ",".join(urls)
    assert cluster.last_start.metrics_urls == {1: urls[0], 2: urls[1]}
    assert [n.metrics_url for n in cluster.status().nodes] == urls
    sample = _sample(cluster)
    assert sample.urls == tuple(urls) and len(sample.nodes) == 2
    for p in PROTOCOLS:  # the cluster's count is the sum of the coordinators' counts
        assert sample.group_count(p) == sum(n.group_count(p) for n in sample.nodes)
    # a node restarted (here through the state the CLI reads) keeps its exporter and its port
    again = LocalKafka.existing(cluster.workdir)
    again.restart_node(2)
    assert again.metrics_urls == urls
    assert len(_sample(cluster).nodes) == 2
    # ... unless something else took that port while the node was down: then only its URL changes
    cluster.stop_node(2)
    port = int(urls[1].rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the last scrape may linger in TIME_WAIT

        def squat() -> bool:  # on a busy machine the stopped node's socket can take a moment to be released
            try:
                squatter.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

        wait_until(squat, timeout=60, what=f"port {port} free to take")
        squatter.listen(1)
        cluster.start_node(2)
    moved = cluster.metrics_urls
    assert moved[0] == urls[0] and moved[1] != urls[1]
    assert _sample(cluster).urls == tuple(moved)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kip848_harness", "kafka", *args],
                          capture_output=True, text=True, timeout=180, env=dict(os.environ))


def test_cli_start_with_metrics_prints_the_url_and_a_restart_keeps_it(tmp_path):
    workdir = str(tmp_path / "k")
    try:
        started = _cli("start", "--workdir", workdir, "--metrics", "--heap", "384m")
        assert started.returncode == 0, started.stderr
        url = next(ln.split("=", 1)[1] for ln in started.stdout.splitlines() if ln.startswith("metrics_url="))
        assert f"metrics at {url}" in started.stdout
        assert read_group_metrics(url, timeout=5).missing == ()
        status = _cli("status", "--workdir", workdir)
        assert f"metrics_url={url}" in status.stdout
        assert _cli("stop", "--workdir", workdir).returncode == 0
        restarted = _cli("start", "--workdir", workdir, "--heap", "384m")  # no flag: as it was last started
        assert restarted.returncode == 0, restarted.stderr
        assert f"metrics_url={url}" in restarted.stdout
        assert read_group_metrics(url, timeout=5).urls == (url,)
    finally:
        _cli("stop", "--workdir", workdir)

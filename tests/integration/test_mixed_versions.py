"""A cluster in the middle of a rolling broker upgrade (issue 47.6): three real nodes, formatted and run by Kafka
4.3.1, node 1 already on 4.4.0 (LocalKafka's node_versions). The preflight names each node's release; a consumer
move proceeds (warned) and a real consumer-protocol member converts the group; a streams move is refused with the
reason; a feature level only the upgraded node supports is refused naming each node's range, as the controller
itself refuses it."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.api import read_preflight_facts
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.preflight import FAIL, PASS, WARN, run_preflight
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness import clients
from kip848_harness.clients import ConsumerProcess
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import start_or_fail, wait_until

OLD, NEW = "4.3.1", "4.4.0"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, pytestconfig):
    cluster = LocalKafka(tmp_path_factory.mktemp("kafka-mixed"), version=OLD, nodes=3, heap="384m",
                         node_versions={1: NEW}, die_with_parent=True)
    start_or_fail(cluster, pytestconfig)
    yield cluster
    cluster.stop(timeout=15)


def admin_of(cluster: LocalKafka) -> KafkaAdmin:
    return KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=15000))


def test_each_node_runs_its_own_release(mixed):
    with admin_of(mixed) as admin:
        releases = {b.node_id: b.release for b in admin.broker_versions()}
    assert releases == {1: "4.4", 2: "4.3", 3: "4.3"}
    assert mixed.status().version == OLD


def test_a_consumer_move_proceeds_warned_naming_each_nodes_release(mixed, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    clients.create_topics(mixed.bootstrap_servers, {topic: 3})
    clients.produce(mixed.bootstrap_servers, topic, [b"a", b"b", b"c"])
    classic = ConsumerProcess.start(mixed.bootstrap_servers, group, [topic], protocol="classic",
                                    log_file=str(tmp_path / "classic.log"))
    upgraded = None
    try:
        with admin_of(mixed) as admin:
            wait_until(lambda: admin.describe_group(group).members, 90, "the classic member joined")
            report = run_preflight(read_preflight_facts(admin, group), "classic_to_consumer", group_id=group)
            print(report.render_text())
            version = report.check("broker_version")
            assert version.status == WARN
            assert "mixed releases" in version.evidence
            for node, release in ((1, "4.4"), (2, "4.3"), (3, "4.3")):
                assert f"broker {node}: {release}" in version.evidence
            agree = report.check("brokers_agree")
            # 4.4.0 has group.streams.assignors (and more), 4.3.1 has not: the upgrade, not a disagreement
            assert agree.status == WARN, agree
            assert "group.streams.assignors = sticky only on broker 1 (4.4)" in agree.evidence
            assert "upgrade" in agree.remedy
            assert report.check("features_agree").status == PASS
            assert report.passed
            # the move proceeds: a real consumer-protocol member joins and the brokers convert the group online
            upgraded = ConsumerProcess.start(mixed.bootstrap_servers, group, [topic], protocol="consumer",
                                             log_file=str(tmp_path / "consumer.log"))
            wait_until(lambda: admin.group_listing(group).type is GroupType.CONSUMER, 90,
                       "the group converted to the consumer protocol")
    finally:
        for member in (upgraded, classic):
            if member is not None:
                member.stop()


def test_a_streams_move_is_refused_until_the_upgrade_is_done(mixed, unique):
    group = unique("app")
    with admin_of(mixed) as admin:
        report = run_preflight(read_preflight_facts(admin, group), "classic_to_streams", group_id=group,
                               declared_broker_version="4.3.1")
    check = report.check("broker_version")
    assert check.status == FAIL and not report.passed
    assert "mixed releases: broker 1: 4.4" in check.evidence and "broker 2: 4.3" in check.evidence
    assert "Finish the rolling broker upgrade" in check.remedy


def test_a_feature_level_only_the_upgraded_node_supports_is_refused(mixed):
    """Features disagree across releases: share.version 2 exists on 4.4.0 only. Whichever broker the provider's
    DescribeFeatures reached, the preflight names every node's range, and the controller agrees."""
    with admin_of(mixed) as admin:
        report = run_preflight(read_preflight_facts(admin, None), "enable_feature", feature="share.version",
                               feature_level=2)
        print(report.render_text())
        check = report.check("features_agree")
        assert check.status == FAIL and not report.passed
        assert ("share.version=2 is not supported by every broker (broker 1 (4.4): 0..2, broker 2 (4.3): 0..1, "
                "broker 3 (4.3): 0..1)") in check.evidence
        assert "rolling broker upgrade" in check.remedy
        with pytest.raises(errors.Kip848Error) as refused:  # the controller's own answer (a dry run)
            admin.update_feature("share.version", 2, dry_run=True)
        print(refused.value)
        assert admin.describe_features().level("share.version") == 1  # nothing changed

"""Static members of a streams application (KAFKA-20169) on real brokers: a 4.3.1 broker answers a Kafka Streams
4.4.0 member that has a ``group.instance.id`` with a fatal INVALID_REQUEST, and the preflight of the offline
streams migration refuses such an application there, from its config (the controller's, the form's on top),
naming the brokers' release and the error the application would get; on 4.4.0 brokers the same application
joins, each stream thread as ``<group.instance.id>-<n>``, and the preflight lets it through."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution
from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC, StreamsApp, wordcount_properties
from kip848_harness.clients import create_topics
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import set_kafka_connection, start_or_fail, wait_until

OLD, NEW = "4.3.1", "4.4.0"
#: what the 4.3.1 broker answers, as the Kafka Streams 4.4.0 member logs it
REFUSAL = "StreamsGroupHeartbeatRequest failed due to INVALID_REQUEST: Static membership is not yet supported."


@pytest.fixture(scope="module")
def old_broker(tmp_path_factory, pytestconfig):
    broker = LocalKafka(tmp_path_factory.mktemp("kafka-431"), version=OLD, die_with_parent=True)
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


def _static_app(broker: LocalKafka, app_id: str, workdir, threads: int = 2) -> StreamsApp:
    """The harness's word count built against Kafka Streams 4.4.0 (a client before 4.4 refuses group.instance.id
    with group.protocol=streams itself), on group.protocol=streams with a group.instance.id."""
    create_topics(broker.bootstrap_servers, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    props = wordcount_properties(broker.bootstrap_servers, app_id, group_protocol="streams",
                                 state_dir=workdir / "state",
                                 extra={"group.instance.id": f"{app_id}-inst", "num.stream.threads": str(threads)})
    client = KafkaDistribution(NEW, broker.distribution.cache_dir)
    return StreamsApp.start(client, props, workdir=workdir / "app", name=app_id, die_with_parent=True)


def _preflight(conn: str, app_id: str, context) -> dict:
    """The offline streams DAG's preflight, given the application's config as its controller reports it."""
    controller = {"controller": {"name": app_id},
                  "config": {"properties": {"application.id": app_id, "group.protocol": "streams",
                                            "group.instance.id": f"{app_id}-inst"}, "client": "java",
                             "client_version": NEW}}
    return KafkaMigrationPreflightOperator(task_id="preflight", kafka_conn_id=conn, mode="classic_to_streams",
                                           group_id=app_id, expect_empty=False, application_properties={},
                                           controller_result=controller).execute(context)


def test_a_431_broker_refuses_static_streams_members_and_so_does_the_preflight(old_broker, monkeypatch, tmp_path,
                                                                              unique, context):
    app_id = unique("wc-static-old")
    conn = set_kafka_connection(monkeypatch, "kafka_431", old_broker.bootstrap_servers)
    with pytest.raises(AirflowFailException) as refused:
        _preflight(conn, app_id, context)
    message = str(refused.value)
    report = context["ti"].xcom["report"]
    assert report["failures"] == ["static_membership"], report
    assert f"group.instance.id={app_id}-inst" in message and "brokers 4.3" in message, message
    assert "a broker 4.3 answers" in message and "INVALID_REQUEST 'Static membership is not yet supported.'" \
        in message, message

    # what the preflight spares the application: the broker refuses it at its first heartbeat, fatally
    app = _static_app(old_broker, app_id, tmp_path)
    try:
        assert app.wait_for_log(REFUSAL, timeout=90), app.log_text()[-3000:]
        assert app.wait_for_log("State transition from PENDING_ERROR to ERROR", timeout=60)
        admin = KafkaAdmin(ClientSettings(old_broker.bootstrap_servers))
        try:
            with pytest.raises(GroupNotFound):
                admin.describe_group(app_id)  # no member ever joined
        finally:
            admin.close()
    finally:
        app.stop()


def test_on_440_static_streams_members_join_as_threads_and_the_preflight_lets_them(kafka, monkeypatch, tmp_path,
                                                                                   unique, context):
    assert kafka.version == NEW, "the session's broker is the default release"
    app_id = unique("wc-static-new")
    conn = set_kafka_connection(monkeypatch, "kafka_440", kafka.bootstrap_servers)
    report = _preflight(conn, app_id, context)
    check = {c["name"]: c for c in report["checks"]}["static_membership"]
    assert report["passed"] and check["status"] == "warn", report
    assert f"group.instance.id={app_id}-inst" in check["evidence"] and "brokers 4.4" in check["evidence"]

    app = _static_app(kafka, app_id, tmp_path)
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    try:
        def joined():
            try:
                desc = admin.describe_group(app_id)
            except GroupNotFound:
                return None
            return desc if desc.state == "Stable" and len(desc.members) == 2 else None
        desc = wait_until(joined, timeout=120, what="two static streams members Stable")
        assert sorted(m.instance_id for m in desc.members) == [f"{app_id}-inst-1", f"{app_id}-inst-2"]
        assert REFUSAL not in app.log_text()
    finally:
        app.stop()
        admin.close()

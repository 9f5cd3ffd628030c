"""Issue 48, item 3: the client release each instance runs, observed, and judged by the preflight.

Real parts: the session's broker, supervisord running the instances (the ``command`` controller reads their
logs with ``supervisorctl tail``), and real clients: a plain Java consumer built by the harness against
kafka-clients 3.9.1 (Maven Central: below the consumer protocol's minimum, the Java consumer 4.0) or 4.4.0, and
the harness's confluent-kafka consumer (librdkafka, its start banner). The controller task reads each running
instance's log, the preflight judges what it names: an old library is refused although the controller's target
and the run's Params declare a good release; a good one passes, its source "the instance's log".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.model.groups import ConsumerGroupDescription, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.application import KafkaApplicationControllerOperator
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import create_topics
from kip848_harness.java_consumer import SupervisedJavaConsumer
from kip848_harness.supervised import SupervisedConsumerApp, SupervisedWordCount
from kip848_harness.supervisor import LocalSupervisor
from tests.conftest import wait_until

INSTANCES = 2


def _classic_members(admin: KafkaAdmin, app: SupervisedConsumerApp) -> bool:
    group = admin.describe_group(app.group_id) if app.group_id in {g.group_id for g in admin.list_groups()} else None
    return (isinstance(group, ConsumerGroupDescription) and group.state == "Stable"
            and sorted(m.client_id for m in group.members) == [f"app-{i}" for i in range(app.instances)]
            and all(m.protocol is MemberProtocol.CLASSIC for m in group.members))


@pytest.fixture
def running(supervisor: LocalSupervisor, bootstrap: str, tmp_path: Path, unique) -> Iterator:
    """A factory: ``running(kind, release)`` installs and starts an application of ``INSTANCES`` classic
    members (``java`` on kafka-clients ``release``, or ``librdkafka``: the confluent-kafka consumer), waits for
    its members, and removes it afterwards."""
    apps: list[SupervisedConsumerApp] = []

    def start(kind: str, release: str | None = None, declared: str | None = None) -> SupervisedConsumerApp:
        topic = unique("cr-topic")
        create_topics(bootstrap, {topic: 2})
        common = {"bootstrap_servers": bootstrap, "group_id": unique("cr-group"), "topics": [topic],
                  "instances": INSTANCES}
        name = unique("cr")
        app = (SupervisedJavaConsumer(supervisor, name, tmp_path / name, release=release, declared_version=declared,
                                      **common) if kind == "java"
               else SupervisedConsumerApp(supervisor, name, tmp_path / name, **common))
        apps.append(app)
        app.install("classic")
        app.start("classic")
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            wait_until(lambda: _classic_members(admin, app), timeout=90,
                       what=f"{INSTANCES} classic members of {app.group_id}: {app.log_tails(8)}")
        return app

    try:
        yield start
    finally:
        for app in apps:
            app.remove()


def _controller_task(controllers, unique, app: SupervisedConsumerApp, *, declare: bool, context) -> dict:
    target = app.target(by_instance=True)
    if not declare:
        target.pop("client_version")
    name = controllers.add(unique("cr-ctl"), "command", target)
    return KafkaApplicationControllerOperator(task_id="controller", controller=name, group_protocol="consumer",
                                              way_back_protocol="classic").execute(context)


def _preflight(app, kafka_conn, result, context, client: str, client_version: str | None):
    return KafkaMigrationPreflightOperator(
        task_id="preflight", kafka_conn_id=kafka_conn, mode="classic_to_consumer", group_id=app.group_id,
        controller_result=result, client_release=True, client=client, client_version=client_version,
    ).execute(context)


def test_an_instance_on_kafka_clients_3_9_1_is_refused_from_its_log(running, controllers, kafka_conn, unique,
                                                                   context):
    """Two Java consumers built against kafka-clients 3.9.1 run classic; the controller's target declares 4.4.0
    and so do the run's Params. The preflight refuses classic_to_consumer on client_release, naming each instance,
    the 3.9.1 it runs and that its own log said so."""
    app = running("java", "3.9.1", declared="4.4.0")
    result = _controller_task(controllers, unique, app, declare=True, context=context)
    print("controller task's client_releases:", result["client_releases"])
    assert result["config"]["client_version"] == "4.4.0"  # what the platform declares
    assert sorted((r["instance"], r["library"], r["version"]) for r in result["client_releases"]) == [
        (f"{app.name}:{app.name}_{i}", "java", "3.9.1") for i in range(INSTANCES)]

    with pytest.raises(AirflowFailException) as refused:
        _preflight(app, kafka_conn, result, context, "java", "4.4.0")
    message = str(refused.value)
    print("preflight:", message)
    report = context["ti"].xcom["report"]
    failed = {c["name"]: c for c in report["checks"] if c["status"] == "fail"}
    assert list(failed) == ["client_release"], report["checks"]
    evidence = failed["client_release"]["evidence"]
    for i in range(INSTANCES):
        assert f"{app.name}:{app.name}_{i}: java 3.9.1 (the instance's log: '" in evidence, evidence
    assert "Kafka version: 3.9.1" in evidence and "predates the Java consumer 4.0" in evidence, evidence


@pytest.mark.parametrize(("kind", "release", "library", "shown"), [
    pytest.param("java", "4.4.0", "java", "java 4.4.0", id="kafka-clients-4.4.0"),
    pytest.param("librdkafka", None, "librdkafka", "librdkafka ", id="confluent-kafka"),
])
def test_an_instance_at_the_minimum_passes_from_its_log(kind, release, library, shown, running, controllers,
                                                        kafka_conn, unique, context):
    """An application whose instances run a release that speaks the consumer protocol (kafka-clients 4.4.0;
    confluent-kafka on librdkafka 2.12+), declared nowhere (neither the controller's target nor the Params): the
    client_release check passes, each instance's release read from its own log."""
    app = running(kind, release)
    result = _controller_task(controllers, unique, app, declare=False, context=context)
    print("controller task's client_releases:", result["client_releases"])
    assert result["config"]["client_version"] is None
    report = _preflight(app, kafka_conn, result, context, library, None)
    check = next(c for c in report["checks"] if c["name"] == "client_release")
    print("client_release:", check)
    assert check["status"] == "pass", check
    for i in range(INSTANCES):
        assert f"{app.name}:{app.name}_{i}: {shown}" in check["evidence"], check
    assert check["evidence"].count("(the instance's log: '") == INSTANCES, check


def test_a_streams_instance_is_judged_by_the_kafka_streams_release_it_logs(supervisor, kafka, kafka_conn, controllers,
                                                                           unique, context):
    """The harness's word count (Kafka Streams of the session's release) under supervisord, on classic: its log
    names the Kafka Streams release ('Kafka Streams version: ...', beside its clients' 'Kafka version: ...'), the
    instance is marked a Streams application, and classic_to_streams judges it against Kafka Streams 4.2 (4.4 with
    a group.instance.id in the config it will run with), source its log, nothing declared."""
    app_id = unique("cr-wc")
    create_topics(kafka.bootstrap_servers, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    app = SupervisedWordCount(supervisor, app_id, kafka.workdir / "supervised" / app_id, kafka=kafka,
                              application_id=app_id)
    app.install("classic")
    try:
        app.start("classic")
        target = app.target()
        target.pop("client_version")
        name = controllers.add(unique("cr-wc-ctl"), "command", target)
        wait_until(lambda: "Kafka Streams version:" in app.log_path(0).read_text(errors="replace"), timeout=60,
                   what=f"the word count's start: {app.log_tails(8)}")
        result = KafkaApplicationControllerOperator(task_id="controller", controller=name, group_protocol="streams",
                                                    way_back_protocol="classic").execute(context)
        (logged,) = result["client_releases"]
        print("controller task's client_releases:", logged)
        assert (logged["library"], logged["version"], logged["streams"]) == ("java", kafka.version, True), logged
        assert "Kafka Streams version: " + kafka.version in logged["evidence"], logged
        for static, want in ((False, "pass"), (True, "pass" if kafka.version >= "4.4" else "fail")):
            properties = {"group.instance.id": f"{app_id}-0"} if static else None
            check = _streams_release_check(kafka_conn, app_id, result, properties, context)
            print(f"client_release (static={static}):", check)
            assert check["status"] == want, check
            assert f"{logged['instance']}: Kafka Streams {kafka.version} (the instance's log: '" in check["evidence"]
    finally:
        app.remove()


def _streams_release_check(kafka_conn, app_id, result, properties, context) -> dict:
    """classic_to_streams' client_release verdict (the report is read whether or not other checks fail)."""
    operator = KafkaMigrationPreflightOperator(
        task_id="preflight", kafka_conn_id=kafka_conn, mode="classic_to_streams", group_id=app_id, expect_empty=False,
        controller_result=result, client_release=True, client="java", client_version=None,
        application_properties=properties)
    try:
        report = operator.execute(context)
    except AirflowFailException:
        report = context["ti"].xcom["report"]
    return next(c for c in report["checks"] if c["name"] == "client_release")

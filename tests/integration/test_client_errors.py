"""The client's own errors in a wait's failure, per instance (issue 48, item 2).

Before: a wait that failed said what the platform or the coordinator showed ("EXITED", "2 of 3 live"), never why;
the why was in the application's log. Here real consumer applications (confluent-kafka, librdkafka) run under the
session's supervisord, driven by the shipped ``command`` controller, whose ``logs`` step is
``supervisorctl tail -{max_bytes} {instance}``; the Migrated wait's failure must name, per instance, the error the
client logged, in the client's words:

* a member fenced by a duplicate ``group.instance.id`` (a second process started by hand with instance 1's id:
  the broker hands it the id and fences instance 1, FENCED_INSTANCE_ID, fatal to librdkafka);
* a topic the application's principal may not READ (a broker of its own with the StandardAuthorizer, a SASL user
  for the application, a DENY READ ACL on the topic for it): TOPIC_AUTHORIZATION_FAILED on every instance.

The start's log marks keep a log's older lines (a previous incarnation's, in supervisord's file that spans
restarts) out of the scan: an error written before the start is in the log and is not named.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.engine.way_back import split_of
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.sensors.group import KafkaGroupMigratedSensor
from kip848_harness.clients import create_topics, produce
from kip848_harness.supervised import CONSUMER_APP_MODULE, SupervisedConsumerApp
from tests.conftest import set_kafka_connection
from tests.integration.test_platform_watch import Waiting, _started, _under_way

APP_PASSWORD = "app-S3cret pw"


def _migrated_wait(app, name, baseline, deferred: bool, group_type: str = "consumer",
                   kafka_conn_id: str = "kafka_admin_default") -> KafkaGroupMigratedSensor:
    # a liveness window longer than the test: the broker side never holds, only the platform's look ends the wait
    return KafkaGroupMigratedSensor(task_id="wait_migrated", deferrable=deferred, group_id=app.group_id,
                                    group_type=group_type, expected_members=app.instances, controller=name,
                                    baseline=baseline, timeout=300, poll_interval=0.5, liveness_seconds=600,
                                    kafka_conn_id=kafka_conn_id)


def _failed(waiting: Waiting, changed_at: float, what: str) -> str:
    waiting.join(400)
    assert not waiting.is_alive(), "the wait did not end"
    assert isinstance(waiting.error, AirflowFailException), (waiting.error, waiting.result, waiting.event)
    mode = "deferred" if waiting.deferred else "poked"
    print(f"figures: {what}, {mode}: failed {waiting.ended - changed_at:.1f} s after the fault "
          f"(the wait ran {waiting.ended - waiting.began:.1f} s)")
    return str(waiting.error)


@pytest.mark.parametrize("deferred", [False, True], ids=["poked", "deferred"])
def test_a_member_fenced_by_a_duplicate_instance_id_is_named_with_the_clients_words(
        deferred, kafka, kafka_conn, native, unique, tmp_path, context, controllers, supervisor):
    """Two static members on classic (the way back's target), the Migrated wait running; a process started by
    hand with instance 1's ``group.instance.id`` joins: the broker fences instance 1, whose librdkafka logs a
    fatal FENCED_INSTANCE_ID and whose application exits. The wait's failure names instance 1 with that line;
    an error instance 0 logged before the start (planted in its log) is not named: its mark keeps it out."""
    tag = "-d" if deferred else "-p"
    topic, group = unique(f"fenced-in{tag}"), unique(f"fenced-app{tag}")
    create_topics(kafka.bootstrap_servers, {topic: 4})
    produce(kafka.bootstrap_servers, topic, (f"v{i}" for i in range(20)), keys=(str(i) for i in range(20)))
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised" / group,
                                bootstrap_servers=kafka.bootstrap_servers, group_id=group, topics=[topic],
                                instances=2, static=True)
    app.install("classic")
    intruder = None
    try:
        # an earlier incarnation's error, in the file supervisord appends to: before the start's mark
        app.log_path(0).parent.mkdir(parents=True, exist_ok=True)
        with open(app.log_path(0), "a") as old:
            old.write("KafkaError{code=UNRELEASED_INSTANCE_ID,val=111,str=\"an earlier incarnation\"}\n")
        name, baseline = _started(app, controllers, context, native, protocol="classic")
        sensor = _migrated_wait(app, name, baseline, deferred, group_type="classic")
        waiting = Waiting(sensor, context, deferred)
        waiting.start()
        _under_way(waiting)
        intruder = subprocess.Popen(
            [sys.executable, "-m", CONSUMER_APP_MODULE, "--bootstrap-servers", kafka.bootstrap_servers,
             "--group", group, "--topics", topic, "--protocol", "classic", "--instance-id", f"{group}-1",
             "--client-id", "intruder", "--property", "partition.assignment.strategy=range"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
        message = _failed(waiting, time.monotonic(), "a member fenced by a duplicate group.instance.id")
        print("message:", message)
        if not deferred:  # what the platform's looks cost, logs read included (two instances)
            print(f"figures: {sensor._looks['looks']} look(s) in {sensor._looks['look_s']} s")
        victim = f"{app.name}:{app.name}_1"
        assert f"{victim}: FENCED_INSTANCE_ID (fatal)" in message, message
        # the client's own words (librdkafka's error string), not a count
        assert "Static consumer fenced by other consumer with same group.instance.id" in message, message
        assert "UNRELEASED_INSTANCE_ID" not in message, "an error from before the start's mark was named"
        assert f"{app.name}:{app.name}_0: " not in message.split("The clients logged")[-1], message
        assert baseline.get("log_marks"), baseline  # the start's marks, in the wait's baseline
        # where a way back would leave it (the way back's approval and the run report show this split)
        with KafkaGroupAdminHook(kafka_conn_id=kafka_conn) as hook:
            split = split_of(resolve_controller(name), hook, [group], "classic")
        findings = split["client_errors"]["findings"]
        assert any(f["instance"] == victim and f["error"] == "FENCED_INSTANCE_ID" and f["fatal"] for f in findings), \
            split
        assert f"{victim}: FENCED_INSTANCE_ID (fatal)" in split["summary"], split["summary"]
    finally:
        if intruder is not None:
            intruder.kill()
            intruder.wait(30)
        app.remove()


@pytest.fixture
def acl_kafka(fresh_kafka):
    return fresh_kafka(sasl_users={"admin": "admin-pw", "app": APP_PASSWORD}, super_users=["admin"],
                       overrides={"allow.everyone.if.no.acl.found": "true"})


def test_a_topic_the_principal_may_not_read_is_named_per_instance(acl_kafka, monkeypatch, unique, tmp_path, context,
                                                                    controllers, supervisor):
    """Two instances on the consumer protocol connect as the SASL user ``app``; with the Migrated wait running,
    a DENY READ ACL on their topic for ``User:app`` (the broker's StandardAuthorizer; everything else allowed
    with no ACL found): each instance's librdkafka reports TOPIC_AUTHORIZATION_FAILED and the application exits.
    The wait's failure names the error on each instance in the client's words; the app's password, in its
    properties, is in no message."""
    conn = set_kafka_connection(monkeypatch, "kafka_admin_acl", acl_kafka.bootstrap_servers)
    topic, group = unique("acl-in"), unique("acl-app")
    create_topics(acl_kafka.bootstrap_servers, {topic: 4})
    produce(acl_kafka.bootstrap_servers, topic, (f"v{i}" for i in range(20)), keys=(str(i) for i in range(20)))
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "app",
            "sasl.password": APP_PASSWORD}
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised" / group,
                                bootstrap_servers=acl_kafka.sasl_bootstrap_servers, group_id=group, topics=[topic],
                                instances=2, classic_properties=sasl, consumer_properties=sasl)
    app.install("classic")
    try:
        with KafkaAdmin(ClientSettings(acl_kafka.bootstrap_servers)) as admin:
            name, baseline = _started(app, controllers, context, admin, kafka_conn=conn)
        waiting = Waiting(_migrated_wait(app, name, baseline, False, kafka_conn_id=conn), context, False)
        waiting.start()
        _under_way(waiting)
        deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:app", "*",
                          AclOperation.READ, AclPermissionType.DENY)
        acl_admin = AdminClient({"bootstrap.servers": acl_kafka.bootstrap_servers})  # ANONYMOUS: a super user
        for future in acl_admin.create_acls([deny]).values():
            future.result(30)
        message = _failed(waiting, time.monotonic(), "a topic the principal may not read")
        print("message:", message)
        for n in range(2):
            assert f"{app.name}:{app.name}_{n}: TOPIC_AUTHORIZATION_FAILED" in message, message
        assert "Topic authorization failed" in message, message  # librdkafka's words
        assert APP_PASSWORD not in message
    finally:
        app.remove()

"""Sensors and their trigger against real consumers and a real Kafka Streams app."""

from __future__ import annotations

import asyncio
import threading

import pytest
from airflow.sdk.exceptions import AirflowSensorTimeout, TaskDeferred

import airflow_provider_kip848.sensors.group as group_sensors
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.instances import liveness_window
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.sensors.group import (
    KafkaGroupEmptySensor,
    KafkaGroupLagSensor,
    KafkaGroupMigratedSensor,
    KafkaGroupStateSensor,
    KafkaGroupTypeSensor,
)
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import (
    ConsumerProcess,
    consume,
    create_topics,
    decode_long,
    latest_by_key,
    produce,
    read_topic,
)
from tests.conftest import set_kafka_connection, wait_until


# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False;
# the default is the deployment's [kip848] default_deferrable, True).
class Background(threading.Thread):
    """Runs a sensor's execute() while the test drives the applications."""

    def __init__(self, sensor, context) -> None:
        super().__init__(daemon=True)
        self.sensor, self.context = sensor, context
        self.result = self.error = None

    def run(self) -> None:
        try:
            self.result = self.sensor.execute(self.context)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc


def test_type_and_migrated_sensors_follow_a_rolling_upgrade(kafka_conn, native, bootstrap, unique, tmp_path, context):
    topic, group = unique("roll"), unique("roll-group")
    create_topics(bootstrap, {topic: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(40)))
    members = [ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id=f"c{i}",
                                     log_file=str(tmp_path / f"c{i}.log")) for i in range(2)]
    try:
        wait_until(lambda: len(native.describe_group(group).members) == 2, what="classic members")
        converted = Background(KafkaGroupTypeSensor(task_id="t", deferrable=False, group_id=group, group_type="consumer",
                                                    poll_interval=0.5, timeout=120), context)
        migrated = Background(KafkaGroupMigratedSensor(task_id="m", deferrable=False, group_id=group, expected_members=2,
                                                       poll_interval=0.5, timeout=120), context)
        converted.start()
        migrated.start()
        members[0].stop()
        members[0] = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="c0",
                                           log_file=str(tmp_path / "c0b.log"))
        converted.join(60)
        assert converted.error is None and converted.result["summary"] == "type consumer"
        assert converted.result["mode"] == "poke"
        assert migrated.is_alive(), "one classic member is left: not migrated yet"
        members[1].stop()
        members[1] = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="c1",
                                           log_file=str(tmp_path / "c1b.log"))
        migrated.join(60)
        assert migrated.error is None, migrated.error
        assert migrated.result["detail"]["classic_members"] == 0
        assert {m["protocol"] for m in migrated.result["detail"]["members"]} == {"consumer"}
    finally:
        for m in members:
            m.stop()


def test_a_deadline_inside_the_liveness_window_is_raised_to_where_a_quiet_group_can_meet_it(
        kafka_conn, native, bootstrap, unique, tmp_path, context):
    """A healthy member with no input proves it is alive only by staying listed through the liveness window. Found
    on Kafka 4.2 (a streams session of 45 s): the way back's 30 s deadline ended inside the 51 s window, the wait
    failed and the application was left down. The deadline becomes the window plus two polls, said in the notes;
    the wait is met (before: it timed out after 3 s)."""
    topic, group = unique("quiet"), unique("quiet-group")
    create_topics(bootstrap, {topic: 1})
    member = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="q",
                                   log_file=str(tmp_path / "q.log"))
    try:
        wait_until(lambda: len(native.describe_group(group).members) == 1, what="the quiet member listed")
        result = KafkaGroupMigratedSensor(task_id="m", deferrable=False, group_id=group, expected_members=1,
                                          poll_interval=0.5, liveness_seconds=8, timeout=3).execute(context)
        assert result["summary"].startswith("type consumer, 1 of 1 live member"), result
        assert any(n.startswith("deadline raised from 3 s to 10 s") for n in result["notes"]), result["notes"]
    finally:
        member.stop()


def test_stopped_classic_streams_app_is_emptied_then_converted(kafka, kafka_conn, native, bootstrap, unique, context):
    """A killed classic Streams instance leaves its member behind. The caller says its instances are gone, but no
    controller pairs that member with an instance: it is not forced out (issue 46: a member the platform cannot
    account for never is); the broker expires it within its 6 s session and the wait says Empty."""
    app_id = unique("wc-migrate")
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    word = f"w{unique('x').rsplit('-', 1)[-1]}{id(context)}"
    classic = kafka.start_wordcount(app_id, group_protocol="classic",
                                    properties={"session.timeout.ms": "6000", "consumer.session.timeout.ms": "6000"})
    produce(bootstrap, WORDCOUNT_INPUT_TOPIC, [f"{word} a", f"{word} b"])
    _wait_count(bootstrap, word, 2)
    assert native.group_listing(app_id).type is GroupType.CLASSIC
    classic.kill()  # stopped without leaving: its members stay for the 6 s session
    assert len(native.describe_group(app_id).members) >= 1

    # the caller says the instance is gone (it killed it), but nothing pairs its member with an instance
    emptied = KafkaGroupEmptySensor(task_id="empty", deferrable=False, group_id=app_id, poll_interval=0.5, remove_members_after=1,
                                    instances_gone=not classic.running, timeout=60).execute(context)
    assert emptied["members_removed"] == [], "no member is forced out without a pairing with an instance"
    assert any("members not forced out: no application controller" in n for n in emptied["notes"]), emptied["notes"]
    assert native.describe_group(app_id).is_empty

    streams = kafka.start_wordcount(app_id, group_protocol="streams")
    try:
        result = KafkaGroupTypeSensor(task_id="type", deferrable=False, group_id=app_id, group_type="streams", poll_interval=0.5,
                                      timeout=90).execute(context)
        assert result["summary"] == "type streams"
        KafkaGroupStateSensor(task_id="stable", deferrable=False, group_id=app_id, states=["Stable"], poll_interval=0.5,
                              timeout=90).execute(context)
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, [f"{word} c"])
        # only committed offsets survive: the old records are not processed again, so the count goes 2 -> 3
        assert _wait_count(bootstrap, word, 3) == 3
    finally:
        streams.stop()


def test_instances_said_gone_without_a_controller_force_out_nobody_and_skip_the_settle(native, kafka_conn, bootstrap,
                                                                                       unique, tmp_path, context):
    """A crashed classic member stays for its 6 s session. ``instances_gone`` given by hand, without a controller:
    nothing pairs the member with an instance, so it is never forced out however short ``remove_members_after`` (issue
    46); the broker expires it and the wait ends at the first Empty poll (no settle: the instances are said gone)."""
    topic, group = unique("gone"), unique("gone-g")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, [f"v{i}" for i in range(4)])
    member = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="gone-0",
                                   session_timeout_ms=6000, log_file=str(tmp_path / "gone.log"))
    wait_until(lambda: native.describe_group(group).state == "Stable", timeout=60, what="the member joined")
    member.kill()
    assert len(native.describe_group(group).members) == 1
    with pytest.raises(Exception, match="instances_gone must be true or false"):
        KafkaGroupEmptySensor(task_id="bad", group_id=group, instances_gone="probably")
    emptied = KafkaGroupEmptySensor(task_id="empty", deferrable=False, group_id=group, poll_interval=0.5, remove_members_after=0,
                                    settle_seconds=30, instances_gone="True", timeout=25).execute(context)
    assert emptied["members_removed"] == [] and emptied["condition"]["settle_s"] == 0
    assert native.describe_group(group).is_empty


def _wait_count(bootstrap, word, expected, timeout=90):
    def count(records):
        value = latest_by_key(records).get(word.encode())
        return decode_long(value) if value is not None else None

    records = read_topic(bootstrap, WORDCOUNT_OUTPUT_TOPIC, timeout=timeout, until=lambda rs: count(rs) == expected)
    assert count(records) == expected, f"count of {word}: {count(records)}"
    return count(records)


def test_lag_sensor_waits_for_the_backlog_to_drain(kafka_conn, bootstrap, unique, tmp_path, context):
    topic, group = unique("lag"), unique("lag-group")
    create_topics(bootstrap, {topic: 2})
    consume(bootstrap, group, [topic], 0, group_protocol="consumer", timeout=1)
    produce(bootstrap, topic, (f"v{i}" for i in range(50)))
    consume(bootstrap, group, [topic], 10, group_protocol="consumer")
    sensor = Background(KafkaGroupLagSensor(task_id="lag", deferrable=False, group_id=group, max_lag=0, poll_interval=0.5, timeout=120),
                        context)
    sensor.start()
    sensor.join(3)
    assert sensor.is_alive(), "40 records are still unconsumed"
    consumer = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="drain",
                                     log_file=str(tmp_path / "drain.log"))
    try:
        sensor.join(90)
        assert sensor.error is None and sensor.result["detail"]["total_lag"] == 0
    finally:
        consumer.stop()


def test_deferrable_sensor_defers_and_resumes_through_its_serialised_trigger(kafka_conn, native, bootstrap, unique,
                                                                               tmp_path, context):
    """What the triggerer does, step by step: serialise, rebuild from JSON, run, hand the event back."""
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.serde import deserialize, serialize

    topic, group = unique("defer"), unique("defer-group")
    create_topics(bootstrap, {topic: 1})
    sensor = KafkaGroupStateSensor(task_id="wait", group_id=group, states=["Stable"], deferrable=True,
                                   poll_interval=0.5, timeout=60)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context)
    classpath, kwargs = deferred.value.trigger.serialize()
    assert classpath == "airflow_provider_kip848.triggers.group.KafkaGroupConditionTrigger"
    rebuilt = import_string(classpath)(**deserialize(serialize(kwargs)))
    member = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="late",
                                   log_file=str(tmp_path / "late.log"))
    try:
        event = asyncio.run(_first_event(rebuilt))
    finally:
        member.stop()
    payload = deserialize(serialize(event.payload))
    assert payload["status"] == "met" and payload["polls"] >= 1
    result = sensor.execute_complete(context, event=payload)
    assert result["mode"] == "deferred" and result["summary"] == "state Stable"


def test_deferred_wait_times_out_with_the_last_state(kafka_conn, unique, context):
    sensor = KafkaGroupStateSensor(task_id="never", group_id=unique("never"), states=["Stable"], deferrable=True,
                                   poll_interval=0.3, timeout=2)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context)
    event = asyncio.run(_first_event(deferred.value.trigger))
    assert event.payload["status"] == "timeout"
    with pytest.raises(AirflowSensorTimeout, match="did not reach state in \\{Stable\\} within 2"):
        sensor.execute_complete(context, event=event.payload)


def test_a_wait_started_while_the_cluster_cannot_answer_asks_again(kafka, monkeypatch, bootstrap, unique, context):
    """The Migrated wait reads the group's session timeout (its liveness window) before it waits, and a wait is often
    started while a node fails over. Found on the 3-node cluster under load: that read timed out (librdkafka sent it
    to the node just killed) and the wait failed at once, sending a rolling upgrade down its way back although the
    group was migrating. A read that times out is "not known yet": asked again, as a failed poll is. Once the wait
    has deferred, its resumption takes the condition the trigger carried and reads nothing again."""
    conn = set_kafka_connection(monkeypatch, "kafka_admin_default", bootstrap, request_timeout_ms=1500)
    group = unique("paused-read")
    failed: list[BaseException] = []
    reads: list[str] = []

    def recorded(*args, **kwargs):  # the real read; each read and each failure recorded for the test to act on
        reads.append(args[1])
        try:
            return liveness_window(*args, **kwargs)
        except BaseException as exc:
            failed.append(exc)
            raise

    monkeypatch.setattr(group_sensors, "liveness_window", recorded)
    sensor = KafkaGroupMigratedSensor(task_id="m", kafka_conn_id=conn, group_id=group, deferrable=True,
                                      poll_interval=0.5, timeout=120)
    waiting = Background(sensor, context)
    kafka.pause_node(1)  # the broker keeps its connections open and answers nothing
    try:
        waiting.start()
        wait_until(lambda: failed, timeout=60, what="the wait's first read, failed while the broker was paused")
    finally:
        kafka.resume_node(1)
    waiting.join(60)
    assert not waiting.is_alive()
    assert isinstance(waiting.error, TaskDeferred), waiting.error  # went on to wait in the triggerer
    assert all(getattr(exc, "retriable", False) for exc in failed), failed
    trigger = waiting.error.trigger
    with KafkaGroupAdminHook(conn) as hook:
        window, _ = liveness_window(hook, group, "consumer")
    assert trigger.condition["liveness_s"] == window > 0
    assert trigger.carry["condition"] == trigger.condition
    reads_before = len(reads)
    kafka.pause_node(1)  # resumed from the trigger's event: nothing is read again (a read would time out now)
    try:
        with pytest.raises(AirflowSensorTimeout, match=r"did not reach type consumer, Stable, 1\+ live member.*each reconciled.*liveness window"):
            sensor.execute_complete(context, event={"status": "timeout", "summary": "type consumer",
                                                    "carry": trigger.carry})
    finally:
        kafka.resume_node(1)
    assert len(reads) == reads_before


async def _first_event(trigger):
    async for event in trigger.run():
        return event
    return None

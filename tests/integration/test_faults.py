"""Faults on a real broker: a crash or restart while a sensor waits or an operator runs, and a task killed mid-way.

What must hold:

* a wait (the deferred trigger, or the sensor poking) rides out a broker that is down or restarting,
  never ends early on the errors (nor on a group that looks absent while the coordinator loads), and
  completes once the group reaches the condition after the broker is back;
* an operator that meets a dead broker fails with the provider's *retriable* error (so the task's
  ``retries`` apply, unlike bad input), changes nothing half-way, and its rerun after the restart
  succeeds; committed offsets are the same as in the snapshot taken before;
* a task killed right after its change reached the broker (the worker died before reporting
  success) is retried: the retry finds the change in place, applies nothing and says so, and
  completes the change's audit intent (``found in place``) instead of writing nothing.

The figures (how long the broker was down, how many polls failed, how soon after the broker was back
the wait saw it) are printed and attached to the test report as properties.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_kip848.changecontrol import audit
from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import is_retriable
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.features import KafkaFeatureOperator
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from airflow_provider_kip848.operators.offsets import (
    KafkaCompareGroupOffsetsOperator,
    KafkaRestoreGroupOffsetsOperator,
    KafkaSnapshotGroupOffsetsOperator,
)
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor, KafkaGroupStateSensor
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from tests.conftest import REPO, RecordingTI, set_kafka_connection, start_or_fail, wait_until

# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False;
# the default is the deployment's [kip848] default_deferrable, True).
CONN = "kafka_restartable"
#: short request timeouts: a call against a dead broker gives up (retriably) within seconds
EXTRA = {"request_timeout_ms": 3000, "cli_timeout": 8}


@pytest.fixture(scope="module")
def restartable(tmp_path_factory, kafka_version, pytestconfig):
    """A broker of this module's own: it is killed and restarted, and its feature levels are changed."""
    broker = LocalKafka(tmp_path_factory.mktemp("restartable"), version=kafka_version, die_with_parent=True)
    start_or_fail(broker, pytestconfig)
    yield broker
    broker.stop()


@pytest.fixture
def conn(restartable, monkeypatch, tmp_path):
    monkeypatch.setenv("KIP848_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    return set_kafka_connection(monkeypatch, CONN, restartable.bootstrap_servers, **EXTRA)


@pytest.fixture
def context():
    return {"ti": RecordingTI()}


def _admin(broker: LocalKafka) -> KafkaAdmin:
    return KafkaAdmin(ClientSettings(broker.bootstrap_servers, request_timeout_ms=10000))


def _group_with_commits(broker: LocalKafka, unique, records: int = 20) -> tuple[str, str]:
    topic, group = unique("t"), unique("g")
    create_topics(broker.bootstrap_servers, {topic: 2})
    produce(broker.bootstrap_servers, topic, (f"v{i}" for i in range(records)), keys=(f"k{i}" for i in range(records)))
    consume(broker.bootstrap_servers, group, [topic], records, group_protocol="consumer")
    return topic, group


def _ensure_running(broker: LocalKafka) -> None:
    """Leave the module's broker up for the next test even when this one failed half-way."""
    if not broker.status().running:
        broker.start()


def _report(record_property, **figures) -> None:
    for name, value in figures.items():
        record_property(name, value)
    print("figures:", ", ".join(f"{k}={v}" for k, v in figures.items()))


class PollSpy:
    """Wraps the one function sensors and triggers poll with (``evaluate``) to time each outcome.

    The real function runs against the real broker; the spy only records when it answered or failed.
    """

    def __init__(self, real) -> None:
        self.real = real
        self.calls: list[tuple[float, bool, str, bool]] = []  # (when, answered, summary or error class, retriable)

    def __call__(self, admin, group_id, condition):
        try:
            result = self.real(admin, group_id, condition)
        except Exception as exc:
            self.calls.append((time.monotonic(), False, type(exc).__name__, is_retriable(exc)))
            raise
        self.calls.append((time.monotonic(), True, result.summary, True))
        return result

    def answered_after(self, t: float) -> list[tuple[float, bool, str, bool]]:
        return [c for c in self.calls if c[1] and c[0] >= t]

    def failed_between(self, t0: float, t1: float) -> list[tuple[float, bool, str, bool]]:
        return [c for c in self.calls if not c[1] and t0 <= c[0] <= t1]


class Background(threading.Thread):
    def __init__(self, target) -> None:
        super().__init__(daemon=True)
        self.target_fn = target
        self.result = self.error = None
        self.finished_at: float | None = None

    def run(self) -> None:
        try:
            self.result = self.target_fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
        self.finished_at = time.monotonic()


async def _first_event(trigger):
    async for event in trigger.run():
        return event
    return None


# -- a wait across a broker crash / restart --------------------------------------------------------------------

def test_deferred_wait_rides_out_a_broker_crash(restartable, conn, unique, tmp_path, monkeypatch, context,
                                                 record_property):
    """The triggerer's wait (serialised, rebuilt, run as the triggerer runs it) across a SIGKILLed broker."""
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.serde import deserialize, serialize

    import airflow_provider_kip848.triggers.group as trigger_module

    spy = PollSpy(trigger_module.evaluate_condition)
    monkeypatch.setattr(trigger_module, "evaluate_condition", spy)
    topic, group = _group_with_commits(restartable, unique)
    snapshot = KafkaSnapshotGroupOffsetsOperator(task_id="snap", kafka_conn_id=CONN, group_id=group,
                                            path=str(tmp_path / "before.json")).execute(context)
    sensor = KafkaGroupStateSensor(task_id="wait", kafka_conn_id=CONN, group_id=group, states=["Stable"],
                                   deferrable=True, poll_interval=0.5, timeout=180)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(context)
    classpath, kwargs = deferred.value.trigger.serialize()
    trigger = import_string(classpath)(**deserialize(serialize(kwargs)))
    waiter = Background(lambda: asyncio.run(_first_event(trigger)))
    member = None
    try:
        waiter.start()
        wait_until(lambda: spy.answered_after(0), what="the trigger's first poll")
        killed_at = time.monotonic()
        assert restartable.kill(), "the broker was running and is now SIGKILLed"
        wait_until(lambda: len(spy.failed_between(killed_at, time.monotonic())) >= 2, what="polls against a dead broker")
        restarted_at = time.monotonic()
        restartable.start()
        up_at = time.monotonic()
        seen = wait_until(lambda: spy.answered_after(up_at), what="the trigger to reach the restarted broker")
        assert waiter.is_alive(), f"the wait ended while the group was still Empty: {waiter.result or waiter.error}"
        member = ConsumerProcess.start(restartable.bootstrap_servers, group, [topic], protocol="consumer",
                                       client_id="back", log_file=str(tmp_path / "member.log"))
        waiter.join(120)
        assert not waiter.is_alive() and waiter.error is None, waiter.error
    finally:
        _ensure_running(restartable)
        if member is not None:
            member.stop()
    event = deserialize(serialize(waiter.result.payload))
    assert event["status"] == "met" and event["summary"] == "state Stable"
    failed = spy.failed_between(killed_at, up_at)
    assert failed and all(retriable for *_, retriable in failed), f"only retriable errors while down: {failed}"
    assert {name for _, _, name, _ in failed} <= {"KafkaConnectionError", "OperationTimedOut", "CoordinatorUnavailable"}
    result = sensor.execute_complete(context, event=event)
    assert result["mode"] == "deferred" and result["polls"] == len(spy.calls)
    # the crash and the member's return moved no committed offset: same as the snapshot taken before
    compared = KafkaCompareGroupOffsetsOperator(task_id="cmp", kafka_conn_id=CONN, group_id=group,
                                           snapshot_path=snapshot["path"]).execute(context)
    assert compared["counts"]["equal"] == 2 and compared["preserved"]
    _report(record_property, broker_down_s=round(restarted_at - killed_at + (up_at - restarted_at), 1),
            broker_restart_s=round(up_at - restarted_at, 1), failed_polls=len(failed),
            first_answer_after_restart_s=round(seen[0][0] - up_at, 2),
            total_wait_s=round(waiter.finished_at - killed_at, 1), polls=len(spy.calls))


def test_poking_sensor_waits_across_a_restart_without_a_false_empty(restartable, conn, unique, tmp_path, monkeypatch,
                                                                    context, record_property):
    """A group with a live member is not "empty" while the broker restarts; the wait ends when the member leaves."""
    import airflow_provider_kip848.sensors.group_condition as sensor_module  # where the waits poll

    spy = PollSpy(sensor_module.evaluate_condition)
    monkeypatch.setattr(sensor_module, "evaluate_condition", spy)
    topic, group = _group_with_commits(restartable, unique)
    with _admin(restartable) as admin:
        committed = admin.group_offsets(group).committed
    member = ConsumerProcess.start(restartable.bootstrap_servers, group, [topic], protocol="consumer",
                                   client_id="live", log_file=str(tmp_path / "live.log"))
    sensor = KafkaGroupEmptySensor(task_id="empty", deferrable=False, kafka_conn_id=CONN, group_id=group, poll_interval=0.5,
                                   timeout=180)
    waiter = Background(lambda: sensor.execute(context))
    try:
        with _admin(restartable) as admin:
            wait_until(lambda: admin.describe_group(group).state == "Stable", what="the live member")
        waiter.start()
        wait_until(lambda: spy.answered_after(0), what="the first poke")
        stopped_at = time.monotonic()
        restartable.restart()  # SIGTERM, wait, start again (same data and ports)
        up_at = time.monotonic()
        wait_until(lambda: spy.answered_after(up_at) or not waiter.is_alive(), timeout=30,
                   what="a poke answered by the restarted broker")
        assert waiter.is_alive(), f"the sensor ended during the restart: {waiter.result or waiter.error}; {spy.calls}"
        with _admin(restartable) as admin:  # the member reconnects and heartbeats again
            wait_until(lambda: admin.describe_group(group).state == "Stable", timeout=90, what="the member is back")
        assert waiter.is_alive(), f"the sensor ended while the member was there: {waiter.result or waiter.error}"
        answers = [summary for _, ok, summary, _ in spy.calls if ok]
        assert not any(s.startswith("0 member") or s == "the group does not exist" for s in answers), answers
        left_at = time.monotonic()
        member.stop()
        waiter.join(60)
        assert not waiter.is_alive() and waiter.error is None, waiter.error
    finally:
        member.stop()
        _ensure_running(restartable)
    assert waiter.result["mode"] == "poke" and waiter.result["summary"].startswith("0 member(s)")
    failed = spy.failed_between(stopped_at, up_at)
    assert all(retriable for *_, retriable in failed), failed
    with _admin(restartable) as admin:
        assert admin.group_offsets(group).committed == committed, "the restart changed no committed offset"
    _report(record_property, broker_restart_s=round(up_at - stopped_at, 1), failed_pokes=len(failed),
            pokes=len(spy.calls), done_after_member_left_s=round(waiter.finished_at - left_at, 1))


# -- operators against a dead broker ----------------------------------------------------------------------------

def test_operators_meeting_a_dead_broker_fail_retriably_and_rerun_cleanly(restartable, conn, unique, tmp_path,
                                                                         monkeypatch, context, record_property):
    topic, group = _group_with_commits(restartable, unique)
    path = str(tmp_path / "snapshot.json")
    KafkaSnapshotGroupOffsetsOperator(task_id="snap", kafka_conn_id=CONN, group_id=group, path=path).execute(context)
    with _admin(restartable) as admin:
        snapshot = take_snapshot(admin, group)
        admin.alter_group_offsets(group, {tp: 0 for tp in snapshot.committed})  # offsets lost by a conversion
        lost = admin.group_offsets(group).committed
    restore = KafkaRestoreGroupOffsetsOperator(task_id="restore", kafka_conn_id=CONN, group_id=group, snapshot_path=path)

    # the broker dies while the restore runs: after it compared the offsets, before it commits
    real_alter = KafkaAdmin.alter_group_offsets

    def broker_dies_first(self, *args, **kwargs):
        restartable.kill()
        return real_alter(self, *args, **kwargs)

    monkeypatch.setattr(KafkaAdmin, "alter_group_offsets", broker_dies_first)
    errors = {}
    try:
        started = time.monotonic()
        with pytest.raises(kafka_errors.Kip848Error) as err:  # the provider's error itself, not AirflowFailException
            restore.execute(context)
        errors["restore"] = (err.value, time.monotonic() - started)
        monkeypatch.setattr(KafkaAdmin, "alter_group_offsets", real_alter)
        for backend in ("native", "cli"):  # a config change on the dead broker, with each backend
            started = time.monotonic()
            with pytest.raises(kafka_errors.Kip848Error) as err:
                KafkaGroupConfigOperator(task_id="cfg", kafka_conn_id=CONN, group_id=group, backend=backend,
                                         set_configs={"consumer.session.timeout.ms": 30000},
                                             allow_absent_group=True).execute(context)
            errors[f"config-{backend}"] = (err.value, time.monotonic() - started)
    finally:
        monkeypatch.setattr(KafkaAdmin, "alter_group_offsets", real_alter)
        _ensure_running(restartable)
    for name, (error, _) in errors.items():
        assert error.retriable, f"{name}: {type(error).__name__} must be retriable: {error}"
        assert isinstance(error, (kafka_errors.KafkaConnectionError, kafka_errors.OperationTimedOut)), f"{name}: {error!r}"
        assert restartable.bootstrap_servers in str(error) and error.remedy in str(error)
        assert not isinstance(error, AirflowFailException)

    with _admin(restartable) as admin:
        assert admin.group_offsets(group).committed == lost, "nothing was committed half-way"
        assert admin.describe_group_config(group).dynamic == {}, "no config was changed half-way"
    rerun = restore.execute(context)  # the task's retry, after the broker is back
    assert rerun["restored"] == {f"{topic}:0": snapshot.committed[TopicPartition(topic, 0)],
                                 f"{topic}:1": snapshot.committed[TopicPartition(topic, 1)]}
    compared = KafkaCompareGroupOffsetsOperator(task_id="cmp", kafka_conn_id=CONN, group_id=group,
                                           snapshot_path=path).execute(context)
    assert compared["counts"]["equal"] == 2 and compared["preserved"], "offsets are back to the snapshot"
    assert restore.execute(context)["restored"] == {}, "a second retry restores nothing"
    config = KafkaGroupConfigOperator(task_id="cfg", kafka_conn_id=CONN, group_id=group,
                                      set_configs={"consumer.session.timeout.ms": 30000}, allow_absent_group=True)
    assert config.execute(context)["applied"]
    assert not config.execute(context)["applied"]
    _report(record_property, **{f"{name}_failed_after_s": round(t, 1) for name, (_, t) in errors.items()},
            **{f"{name}_error": type(e).__name__ for name, (e, _) in errors.items()})


# -- a task killed after its change reached the broker, then retried -------------------------------------------

ATTEMPT = r'''
import importlib, json, os, signal, sys

spec = json.loads(sys.argv[1])
from airflow_provider_kip848.kafka.native import KafkaAdmin

real = getattr(KafkaAdmin, spec["target"])

def then_die(self, *args, **kwargs):  # the worker dies right after the change reached the broker
    result = real(self, *args, **kwargs)
    if not kwargs.get("dry_run"):
        print("CHANGE-SENT", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return result

setattr(KafkaAdmin, spec["target"], then_die)
module, name = spec["operator"].rsplit(".", 1)
task = getattr(importlib.import_module(module), name)(task_id="attempt", **spec["kwargs"])

class TI:
    def xcom_push(self, key, value): pass
    def xcom_pull(self, *args, **kwargs): return None

task.execute({"ti": TI()})
print("FINISHED", flush=True)
'''


def _killed_attempt(operator_cls, target: str, tmp_path, **kwargs) -> subprocess.CompletedProcess:
    script = tmp_path / "attempt.py"
    script.write_text(ATTEMPT)
    spec = {"operator": f"{operator_cls.__module__}.{operator_cls.__name__}", "target": target, "kwargs": kwargs}
    proc = subprocess.run([sys.executable, str(script), json.dumps(spec)], capture_output=True, text=True,
                          timeout=180, cwd=REPO, env=os.environ.copy())
    assert proc.returncode == -9, f"the attempt was to be SIGKILLed after its change: {proc.stdout}\n{proc.stderr[-3000:]}"
    assert "CHANGE-SENT" in proc.stdout and "FINISHED" not in proc.stdout
    return proc


def _audit_records(tmp_path) -> list[dict]:
    return audit.read_audit(str(tmp_path / "audit.jsonl"))


def _feature_case(broker, unique, tmp_path):
    with _admin(broker) as admin:
        admin.update_feature("streams.version", 0, action="downgrade", override_dependent_groups=True)
    kwargs = {"kafka_conn_id": CONN, "feature": "streams.version", "level": 1}

    def state(admin):
        return admin.describe_features().level("streams.version")

    def nothing_to_do(result):
        return result["noop"] and not result["applied"] and "already at level 1" in result["message"]

    return KafkaFeatureOperator, "update_feature", kwargs, state, 1, nothing_to_do


def _restore_case(broker, unique, tmp_path):
    topic, group = _group_with_commits(broker, unique)
    path = tmp_path / "snapshot.json"
    with _admin(broker) as admin:
        snapshot = take_snapshot(admin, group)
        path.write_text(snapshot.to_json())
        admin.alter_group_offsets(group, {tp: 0 for tp in snapshot.committed})
    kwargs = {"kafka_conn_id": CONN, "group_id": group, "snapshot_path": str(path)}

    def state(admin):
        return admin.group_offsets(group).committed

    def nothing_to_do(result):
        return result["restored"] == {} and result["left_alone"] == 2

    return KafkaRestoreGroupOffsetsOperator, "alter_group_offsets", kwargs, state, snapshot.committed, nothing_to_do


def _removal_case(broker, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    create_topics(broker.bootstrap_servers, {topic: 2})
    members = [ConsumerProcess.start(broker.bootstrap_servers, group, [topic], protocol="classic", client_id=f"c{i}",
                                     session_timeout_ms=60000, instance_id="static-0" if i == 0 else None,
                                     log_file=str(tmp_path / f"c{i}.log")) for i in range(2)]
    with _admin(broker) as admin:
        wait_until(lambda: len(admin.describe_group(group).members) == 2, what="two classic members")
    for m in members:
        m.kill()  # crashed: their members stay for the 60 s session
    kwargs = {"kafka_conn_id": CONN, "group_id": group, "all_members": True}

    def state(admin):
        return len(admin.describe_group(group).members)

    def nothing_to_do(result):
        return result["removed"] == [] and result["failed"] == {}

    return KafkaRemoveGroupMembersOperator, "remove_members", kwargs, state, 0, nothing_to_do


@pytest.mark.parametrize("case", [
    pytest.param(_feature_case, id="feature-upgrade"),
    pytest.param(_restore_case, id="offsets-restore"),
    pytest.param(_removal_case, id="member-removal"),
])
def test_task_killed_after_its_change_is_retried_without_applying_anything_twice(restartable, conn, unique, tmp_path,
                                                                                  context, case):
    operator_cls, target, kwargs, state, wanted, nothing_to_do = case(restartable, unique, tmp_path)
    with _admin(restartable) as admin:
        before = state(admin)
        assert before != wanted
        _killed_attempt(operator_cls, target, tmp_path, **kwargs)
        after_kill = state(admin)
        assert after_kill == wanted, "the killed attempt's change reached the broker"
        [intent] = _audit_records(tmp_path)  # written before the change; the worker died before its outcome
        assert intent["phase"] == audit.INTENT and intent["outcome"] == audit.UNKNOWN
        retry = operator_cls(task_id="attempt", **kwargs).execute(context)  # Airflow's retry of the task
        assert nothing_to_do(retry), f"the retry reports nothing to do: {retry}"
        assert state(admin) == wanted, "and applies nothing"
        records = _audit_records(tmp_path)
        assert [r["phase"] for r in records] == [audit.INTENT, audit.OUTCOME], "no change recorded twice"
        assert records[1]["outcome"] == audit.FOUND_IN_PLACE and records[0]["completed_by"] == records[1]["record_id"]
        if operator_cls is KafkaFeatureOperator:
            admin.update_feature("streams.version", 1)  # leave the module's broker as it started

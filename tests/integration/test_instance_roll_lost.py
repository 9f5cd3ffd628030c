"""The roll by instance (engine/instance_roll.py) stops when an instance it rolled earlier dies: the platform's fact.

A consumer instance restarted on the new protocol can die after its new member joined (a 3-node test saw
librdkafka take a fatal ``GROUP_ID_NOT_FOUND`` from a coordinator failing over, and the process exit). Its member
stays listed until its session expires, so the coordinator cannot tell; the process manager can. Here two real
consumer instances under a real supervisord are rolled classic -> consumer on the shared broker, and the first
instance's new process is killed (SIGKILL, as a crash) as the second's roll begins: the roll must fail, naming the
first instance as the platform shows it, instead of ending "rolled" with one instance dead.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest

from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.engine.instance_roll import InstanceRollFailed, RollLimits, roll_application
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import RecordingTI, set_kafka_connection, wait_until
from tests.e2e.test_rolling_by_instance import application

CONN = "kafka_roll_lost"


class _CrashFirst(logging.Handler):
    """Kills the first instance's process (SIGKILL) when the roll logs that the second instance's roll begins."""

    def __init__(self, app: SupervisedConsumerApp, first: str, second: str) -> None:
        super().__init__(logging.INFO)
        self.app, self.first, self.second = app, first, second
        self.killed: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.killed is None and record.getMessage().startswith(f"Rolling instance {self.app.name}:{self.second} "):
            self.killed = self.app.pids()[self.first]
            os.kill(self.killed, signal.SIGKILL)


def test_an_instance_that_dies_after_its_roll_stops_the_roll_named_by_the_platform(kafka, monkeypatch, unique,
                                                                                   tmp_path, controllers, supervisor):
    set_kafka_connection(monkeypatch, CONN, kafka.bootstrap_servers)
    app, group = application(supervisor, kafka.bootstrap_servers, unique, tmp_path, instances=2)
    app.install("classic")
    name = controllers.add(group, "command", app.target(by_instance=True))
    first, second = f"{group}_0", f"{group}_1"
    crash = _CrashFirst(app, first, second)
    log = logging.getLogger(f"roll-lost.{group}")
    log.setLevel(logging.INFO)
    log.addHandler(crash)
    try:
        app.start("classic")
        with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
            wait_until(lambda: (d := admin.describe_group(group)).state == "Stable" and len(d.members) == 2,
                       timeout=90, what="2 classic instances")
        with pytest.raises(InstanceRollFailed) as stopped:
            roll_application(resolve_controller(name), KafkaGroupAdminHook(kafka_conn_id=CONN), [group], "consumer",
                             RollLimits(first_instance_s=120, instance_s=120, poll_s=0.5),
                             context={"ti": RecordingTI()}, task_id="roll_application",
                             audit_log=str(tmp_path / "audit.jsonl"), log=log)
        assert crash.killed is not None, "the first instance was killed as the second's roll began"
        what = stopped.value.what
        assert "an instance rolled earlier has died since its new member joined on group.protocol=consumer" in what
        assert f"{group}:{first}" in what and "not running" in what, what
        assert f"{group}:{second}" not in what.split("as the platform says:")[1], what
        rolled = stopped.value.rolled
        assert rolled and rolled[0]["instance"] == f"{group}:{first}" and rolled[0]["joined"]["groups"][group], rolled
        # the platform's fact, not a guess: the killed process is gone, and the roll's record of the first instance
        # at its join is the process that was killed
        assert first not in app.pids(), app.pids()
        assert rolled[0]["at_join"]["incarnation"] == str(crash.killed), rolled[0]["at_join"]
        assert not stopped.value.retriable
    finally:
        log.removeHandler(crash)
        app.remove()



class _CrashAtJoin(KafkaGroupAdminHook):
    """The roll's own admin hook (real describes), which SIGKILLs instance 0's process the first time a describe
    lists its new member on the consumer protocol, before returning that describe to the roll: the crash lands
    between the join and the roll's first sight of it, and supervisord's autorestart brings the instance back at
    once (STARTING without a pid, then RUNNING under a new one). Only the incarnation from the instance's own start
    tells the crash apart; the killed member stays listed until its session expires."""

    def __init__(self, app: SupervisedConsumerApp, first: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.app, self.first = app, first
        self.killed: int | None = None

    def describe_group(self, group_id, *args, **kwargs):
        desc = super().describe_group(group_id, *args, **kwargs)
        if self.killed is None and any(m.client_id == "app-0" and m.protocol.value == "consumer"
                                       for m in desc.members):
            self.killed = self.app.pids()[self.first]
            os.kill(self.killed, signal.SIGKILL)
            wait_until(lambda: self.app.pids().get(self.first) != self.killed, timeout=30,
                       what="supervisord sees the crash")
        return desc


def test_a_crash_right_after_the_join_stops_the_roll_naming_both_incarnations(kafka, monkeypatch, unique, tmp_path,
                                                                              controllers, supervisor):
    """Issue 46, item 3: instance 0 SIGKILLed as its new member joins, restarted at once by supervisord
    (autorestart): the roll must stop before instance 1 is restarted, naming instance 0 with the incarnation its
    start created (before, the roll went on to restart instance 1, and the crash was never named)."""
    set_kafka_connection(monkeypatch, CONN, kafka.bootstrap_servers)
    app, group = application(supervisor, kafka.bootstrap_servers, unique, tmp_path, instances=2, autorestart=True)
    app.install("classic")
    name = controllers.add(group, "command", app.target(by_instance=True))
    first, second = f"{group}_0", f"{group}_1"
    log = logging.getLogger(f"roll-crash-at-join.{group}")
    hook = _CrashAtJoin(app, first, kafka_conn_id=CONN)
    try:
        app.start("classic")
        with KafkaAdmin(ClientSettings(kafka.bootstrap_servers)) as admin:
            wait_until(lambda: (d := admin.describe_group(group)).state == "Stable" and len(d.members) == 2,
                       timeout=90, what="2 classic instances")
        untouched = app.pids()[second]
        started = time.monotonic()
        with pytest.raises(InstanceRollFailed) as stopped:
            roll_application(resolve_controller(name), hook, [group], "consumer",
                             RollLimits(first_instance_s=120, instance_s=120, poll_s=0.5),
                             context={"ti": RecordingTI()}, task_id="roll_application",
                             audit_log=str(tmp_path / "audit.jsonl"), log=log)
        assert hook.killed is not None, "instance 0 was killed as its new member joined"
        what = stopped.value.what
        print(f"killed pid {hook.killed}; the roll stopped {time.monotonic() - started:.1f} s after it began: {what}")
        # instance 1 never touched: the same process, still on classic
        assert app.pids().get(second) == untouched, "instance 1 was restarted after instance 0 crashed"
        assert f"{group}:{first}" in what and f"incarnation {hook.killed} -> " in what, what
        assert "after its new member joined" in what and "the other instances were not restarted" in what, what
        assert not stopped.value.retriable
    finally:
        app.remove()

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

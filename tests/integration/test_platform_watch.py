"""The platform is watched through the whole wait, poked and deferred (issue 46, item 2).

The finding: three consumer instances under supervisord, started on the consumer protocol; one stopped by hand
during the Migrated wait. The platform showed it STOPPED from the first second, but the deferred wait only polled
the broker and ran to its deadline ("2 of 2 live member(s) on the new protocol, 3 expected"): the platform was
asked only once the coordinator's side looked migrated. Here, against a real broker, a real supervisord and the
shipped ``command`` controller (``supervisorctl status``), an instance stopped by hand, killed (supervisord not
restarting it), killed and restarted by supervisord (a new pid), or crash-looping fails the wait from the
platform's look, named with its state, long before the wait's own (generous) deadline: poked (the worker looks
between its pokes) and deferred (the trigger, serialised and rebuilt as the triggerer does, looks from there).
The lag and Empty waits watch it too. Each test prints the latency from the platform's change to the failure
(never asserted: the machine is shared).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import threading
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.operators.application import KafkaApplicationStartOperator
from airflow_provider_kip848.sensors.group import (
    KafkaGroupEmptySensor,
    KafkaGroupLagSensor,
    KafkaGroupMigratedSensor,
)
from kip848_harness.clients import create_topics, produce
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import wait_until

#: every wait's own deadline: generous, so a failure before it is the platform's look, never the deadline
DEADLINE_S = 240


class Waiting(threading.Thread):
    """A wait run as Airflow runs it, in the background: poked (``execute()``), or deferred (``execute()`` until it
    defers, the trigger serialised and rebuilt as the triggerer does and run to its first event, then
    ``execute_complete()`` with that event)."""

    def __init__(self, sensor, context, deferred: bool) -> None:
        super().__init__(daemon=True)
        self.sensor, self.context, self.deferred = sensor, context, deferred
        self.result = self.error = self.event = self.trigger_kwargs = None
        self.began = time.monotonic()
        self.ended: float | None = None

    def run(self) -> None:
        try:
            if not self.deferred:
                self.result = self.sensor.execute(self.context)
                return
            try:
                self.sensor.execute(self.context)
            except TaskDeferred as deferred:
                trigger = deferred.value.trigger if hasattr(deferred, "value") else deferred.trigger
                self.trigger_kwargs = trigger.serialize()[1]
                self.event = asyncio.run(_first_event(_rebuilt(trigger))).payload
            else:
                raise AssertionError("a deferrable wait did not defer")
            self.result = self.sensor.execute_complete(self.context, event=self.event)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
        finally:
            self.ended = time.monotonic()


async def _first_event(trigger):
    async for event in trigger.run():
        return event
    return None


def _rebuilt(trigger):
    """The trigger as the triggerer runs it: serialised, then rebuilt from its class path and kwargs."""
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.serde import deserialize, serialize

    classpath, kwargs = trigger.serialize()
    return import_string(classpath)(**deserialize(serialize(kwargs)))


def _application(supervisor, bootstrap, unique, tmp_path, instances: int = 3, tag: str = "",
                 **kwargs) -> SupervisedConsumerApp:
    # unique() keeps 60 characters of the test's name, not its parameters: ``tag`` tells the cases apart
    topic, group = unique(f"watch-in{tag}"), unique(f"watch-app{tag}")
    create_topics(bootstrap, {topic: 6})
    produce(bootstrap, topic, (f"v{i}" for i in range(60)), keys=(str(i) for i in range(60)))
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised" / group, bootstrap_servers=bootstrap,
                                group_id=group, topics=[topic], instances=instances, **kwargs)
    app.install("classic")
    return app


def _started(app, controllers, context, native, kafka_conn: str = "kafka_admin_default", protocol: str = "consumer") -> tuple[str, dict]:
    """The application started through its ``command`` controller (the start task's status: the baseline), and
    every instance a member of its group."""
    name = controllers.add(app.name, "command", app.target())
    started = KafkaApplicationStartOperator(task_id="start_application", kafka_conn_id=kafka_conn, group_id=app.group_id,
                                            group_protocol=protocol, expected_instances=app.instances,
                                            controller=name).execute(context)
    wait_until(lambda: len(native.describe_group(app.group_id).members) == app.instances
               and native.describe_group(app.group_id).state == "Stable", timeout=120,
               what=f"{app.instances} members, Stable")
    return name, started["status"]


def _migrated_wait(app, name, baseline, deferred: bool, **kw) -> KafkaGroupMigratedSensor:
    # a liveness window longer than the test: the broker side can never hold, only the platform ends the wait
    args = {"poll_interval": 0.5, "liveness_seconds": 600, **kw}
    return KafkaGroupMigratedSensor(task_id="wait_migrated", deferrable=deferred, group_id=app.group_id,
                                    group_type="consumer", expected_members=app.instances, controller=name,
                                    baseline=baseline, timeout=DEADLINE_S, **args)


def _under_way(waiting: Waiting) -> None:
    """The wait polls: poked, its first poll done; deferred, its trigger running."""
    wait_until(lambda: (waiting.trigger_kwargs is not None if waiting.deferred else waiting.sensor._polls >= 1)
               or not waiting.is_alive(), timeout=60, what="the wait under way")
    assert waiting.is_alive(), (waiting.error, waiting.result)


def _failed_by_the_platform(waiting: Waiting, changed_at: float, what: str) -> str:
    """The wait's failure, checked to come from the platform's look (its message), not from its deadline; prints
    the latency from the platform's change to the failure."""
    waiting.join(DEADLINE_S + 60)
    assert not waiting.is_alive(), "the wait did not end"
    assert isinstance(waiting.error, AirflowFailException), (waiting.error, waiting.result, waiting.event)
    message = str(waiting.error)
    assert "as the platform says" in message, message
    assert "did not reach" not in message and "within" not in message.split("as the platform says")[0], message
    assert waiting.ended - waiting.began < DEADLINE_S, "ended before its own deadline"
    mode = "deferred" if waiting.deferred else "poked"
    print(f"figures: {what}, {mode}: failed {waiting.ended - changed_at:.1f} s after the platform's change "
          f"(the wait ran {waiting.ended - waiting.began:.1f} s)")
    return message


# -- the finding: an instance stopped by hand during the Migrated wait -----------------------------------------

@pytest.mark.parametrize("deferred", [False, True], ids=["poked", "deferred"])
def test_an_instance_stopped_by_hand_during_the_migrated_wait_fails_it_named(
        deferred, kafka, kafka_conn, native, unique, tmp_path, context, controllers, supervisor):
    """Instance 1 of 3 is stopped by hand (``supervisorctl stop``: its member leaves, the group counts 2 of 3)
    while the Migrated wait runs: the wait fails at the platform's next look, naming the instance STOPPED,
    instead of counting members until its deadline. Deferred, the trigger's kwargs carry the controller's name
    and the baseline's instances, never its commands. Poked with a broker poll interval longer than the
    platform's check, the failure comes between two broker polls: the platform is looked at on its own period."""
    app = _application(supervisor, kafka.bootstrap_servers, unique, tmp_path, tag="-d" if deferred else "-p")
    try:
        name, baseline = _started(app, controllers, context, native)
        # poked: the broker is polled every 60 s, the platform every 5 s (platform_check_seconds' default)
        sensor = _migrated_wait(app, name, baseline, deferred, **({} if deferred else {"poll_interval": 60}))
        waiting = Waiting(sensor, context, deferred)
        waiting.start()
        _under_way(waiting)
        victim = f"{app.name}:{app.name}_1"
        app.supervisor.run_ctl("stop", victim, check=True)
        stopped_at = time.monotonic()
        message = _failed_by_the_platform(waiting, stopped_at, "an instance stopped by hand (Migrated)")
        assert "is not migrated and will not be" in message, message
        # seen stopped, or while supervisord stops it (the look can come between the signal and the exit)
        assert (f"{victim} (STOPPED" in message and "is not running" in message) or (
            f"{victim} (STOPPING" in message and "is no longer the process of the start" in message), message
        assert f"{app.name}_0" not in message and f"{app.name}_2" not in message, message
        if deferred:
            assert waiting.event["status"] == "instance_lost", waiting.event
            kwargs = json.dumps(waiting.trigger_kwargs, default=str)
            assert waiting.trigger_kwargs["platform_watch"]["controller"] == name
            assert app.supervisor.ctl not in kwargs and "supervisorctl" not in kwargs, "no command travels"
        else:
            assert sensor._polls == 1, "the platform was looked at between two broker polls"
    finally:
        app.remove()


# -- an instance that exits, restarts or crash-loops during the Migrated wait ----------------------------------

def _crash(app, process: str) -> int:
    """SIGKILL the instance's process (a crash: no LeaveGroup); its pid."""
    pid = app.pids()[process]
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.parametrize("fault, deferred", [
    pytest.param("exits", False, id="exits-poked"), pytest.param("exits", True, id="exits-deferred"),
    pytest.param("restarts", False, id="restarts-poked"), pytest.param("restarts", True, id="restarts-deferred"),
    pytest.param("crash-loops", False, id="crash-loops-poked"),
    pytest.param("crash-loops", True, id="crash-loops-deferred")])
def test_an_instance_that_exits_restarts_or_crash_loops_during_the_migrated_wait_fails_it_named(
        fault, deferred, kafka, kafka_conn, native, unique, tmp_path, context, controllers, supervisor):
    """Instance 1 of 3 crashes (SIGKILL) while the Migrated wait runs. ``exits``: supervisord does not restart it
    (EXITED). ``restarts``: supervisord restarts it at once (autorestart): a new pid, its member back under a new
    id, so the coordinator soon shows 3 members again. ``crash-loops``: every restart fails before it is up
    (its launcher reads a protocol file that names no properties file) and supervisord keeps trying (STARTING,
    BACKOFF: no pid shown, never FATAL within the test), as a platform that restarts forever does. Each fails the
    wait at the platform's look, naming the instance and its state."""
    restarting = fault != "exits"
    app = _application(supervisor, kafka.bootstrap_servers, unique, tmp_path, autorestart=restarting,
                       tag=f"-{fault}-{'d' if deferred else 'p'}")
    if fault == "crash-loops":
        app.startretries = 1000
        app.install("classic")
    try:
        name, baseline = _started(app, controllers, context, native)
        waiting = Waiting(_migrated_wait(app, name, baseline, deferred), context, deferred)
        waiting.start()
        _under_way(waiting)
        victim = f"{app.name}_1"
        if fault == "crash-loops":
            app.protocol_path.write_text("no-such-protocol")  # the next start of any instance fails at once
        killed = _crash(app, victim)
        message = _failed_by_the_platform(waiting, time.monotonic(), f"an instance that {fault} (Migrated)")
        assert f"{app.name}:{victim} (" in message, message
        assert f"{app.name}_0 (" not in message and f"{app.name}_2 (" not in message, message
        if fault == "exits":
            assert f"{app.name}:{victim} (EXITED" in message and "is not running" in message, message
        elif fault == "restarts":  # seen running as another pid, or starting again (no pid shown yet)
            assert (f"incarnation {killed} -> " in message
                    or f"is no longer the process of the start (incarnation {killed}; now STARTING" in message), message
        else:
            assert f"is no longer the process of the start (incarnation {killed}; now" in message, message
            assert any(f"now {state}" in message for state in ("STARTING", "BACKOFF")), message
    finally:
        app.remove()


# -- the lag and Empty waits ----------------------------------------------------------------------------------

def test_an_instance_stopped_by_hand_during_the_lag_wait_fails_it_named(kafka, kafka_conn, native, unique, tmp_path,
                                                                         context, controllers, supervisor):
    """The lag wait after the start, given the controller and the start's status: an instance stopped by hand
    while it waits (its partitions move to the others, so the lag may well drain) fails it, named (deferred)."""
    app = _application(supervisor, kafka.bootstrap_servers, unique, tmp_path, instances=2)
    try:
        name, baseline = _started(app, controllers, context, native)
        # the not-growing rule over a window longer than the test: only the platform ends this wait
        sensor = KafkaGroupLagSensor(task_id="wait_lag_drained", deferrable=True, group_id=app.group_id,
                                     lag_window_seconds=600, poll_interval=0.5, controller=name, baseline=baseline,
                                     timeout=DEADLINE_S)
        waiting = Waiting(sensor, context, True)
        waiting.start()
        _under_way(waiting)
        victim = f"{app.name}:{app.name}_0"
        app.supervisor.run_ctl("stop", victim, check=True)
        message = _failed_by_the_platform(waiting, time.monotonic(), "an instance stopped by hand (lag)")
        assert "waiting for its lag to drain is over" in message and f"{victim} (STOP" in message, message
    finally:
        app.remove()


def test_an_instance_crash_looping_during_the_empty_wait_fails_it_named(kafka, kafka_conn, native, unique, tmp_path,
                                                                         context, controllers, supervisor):
    """The application stopped through its controller (the group Empty); during the Empty wait one instance is
    started again by hand and crash-loops (it never joins the group, so the coordinator shows nothing): the wait
    fails at the platform's look, naming it, instead of meeting "Empty" after its settle window (deferred)."""
    app = _application(supervisor, kafka.bootstrap_servers, unique, tmp_path, instances=2, autorestart=True)
    app.startretries = 1000
    app.install("classic")
    starting = None
    try:
        name, _ = _started(app, controllers, context, native, protocol="classic")
        with resolve_controller(name) as controller:
            assert controller.stop()["instances_gone"] is True
        wait_until(lambda: native.describe_group(app.group_id).is_empty, timeout=90, what="the group Empty")
        sensor = KafkaGroupEmptySensor(task_id="wait_empty", deferrable=True, group_id=app.group_id,
                                       settle_seconds=120, poll_interval=0.5, controller=name, timeout=DEADLINE_S)
        waiting = Waiting(sensor, context, True)
        waiting.start()
        _under_way(waiting)
        app.protocol_path.write_text("no-such-protocol")
        victim = f"{app.name}:{app.name}_1"
        # supervisorctl start waits until the process is up or FATAL: here never, so it is not waited for
        starting = subprocess.Popen([*shlex.split(app.supervisor.ctl), "start", victim],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        message = _failed_by_the_platform(waiting, time.monotonic(), "an instance crash-looping (Empty)")
        assert "is not empty for long: an instance of the application runs again" in message, message
        assert f"{victim} (STARTING" in message or f"{victim} (BACKOFF" in message, message
        assert native.describe_group(app.group_id).is_empty, "its member never joined: the broker saw nothing"
    finally:
        if starting is not None:
            starting.kill()
            starting.wait()
        app.remove()

"""The way back to classic from every instance state, on a real supervisord and the session's broker (issue 46).

A rolling upgrade that fails half-way leaves instances in any state: stopped by hand, exited, FATAL (supervisord
gave up on it), crash-looping (BACKOFF) or starting. The finding: the supervisord recipe's ``roll.sh classic``
read ``supervisorctl restart`` of a STOPPED process (``ERROR (not running)``, then ``started``) as a failure and
exited 1, the run ended failed with instances on both protocols, and nothing brought them back.

Each case here: two real consumer instances on the consumer protocol, the first put in one state, then one way
back to classic:

* ``platform``: the rolling upgrade's way back through the recipe's ``roll.sh`` (the harness installs the page's
  very text: tests/unit/test_recipes.py), as the DAG runs it (:func:`~airflow_provider_kip848.engine.way_back.
  roll_back`);
* ``by_instance``: the same through the provider's roll by instance (``stop_instance`` / ``start_instance``);
* ``offline``: the offline DAGs' and the fleet's way back (stop every instance until none runs, start on classic).

Every case must end with both instances RUNNING and their members on classic, in a classic group. Then an
instance that cannot come back on classic either (its crash planted on both protocols): the way back names it,
brings back every other instance it can, and says where the members and instances are.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess

import pytest

from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.engine.instance_roll import RollLimits
from airflow_provider_kip848.engine.way_back import WayBackFailed, roll_back, split_of
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import RecordingTI, set_kafka_connection, wait_until

CONN = "kafka_way_back_states"
STATES = ("STOPPED", "EXITED", "FATAL", "BACKOFF", "STARTING")
LIMITS = RollLimits(first_instance_s=120, instance_s=120, poll_s=0.5, settle_s=2.0)
log = logging.getLogger("way-back-states")


def application(supervisor, bootstrap, unique, tmp_path, *, instances: int, state: str | None = None):
    topic, group = unique("wb-t"), unique("wb-g")
    create_topics(bootstrap, {topic: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(20)), keys=(str(i) for i in range(20)))
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "app", bootstrap_servers=bootstrap, group_id=group,
                                topics=[topic], instances=instances)
    app.crash_markers = True
    # FATAL at the first failed start; a crash loop that keeps looping (BACKOFF, STARTING, BACKOFF ...)
    app.startretries = {"FATAL": 0, "BACKOFF": 1000}.get(state or "", 3)
    if state == "STARTING":
        app.startsecs = 8  # a STARTING window the way back surely meets
    app.install("consumer")
    return app, group


def on(admin, group: str, protocol: str, clients: set[str]) -> bool:
    d = admin.describe_group(group)
    live = [m for m in d.members if m.member_epoch is None or m.member_epoch >= 0]
    return (d.type.value == protocol and {m.client_id for m in live} == clients and len(live) == len(clients)
            and all(m.protocol.value == protocol for m in live))


def put_in(app: SupervisedConsumerApp, process: str, state: str) -> subprocess.Popen | None:
    """Put ``process`` (``name_0``) of a running application in supervisord's ``state``."""
    full, number = f"{app.name}:{process}", int(process.rsplit("_", 1)[1])
    ctl = app.supervisor
    if state == "STOPPED":
        ctl.run_ctl("stop", full, check=True)
    elif state == "EXITED":  # killed (a crash): autorestart is off, so supervisord leaves it EXITED
        os.kill(app.pids()[process], signal.SIGKILL)
    elif state in ("FATAL", "BACKOFF"):  # its start on the consumer protocol crashes at once
        app.crash_on(number, "consumer")
        ctl.run_ctl("stop", full, check=True)
        ctl.run_ctl("start", full)  # ERROR (spawn error): retried in BACKOFF, or FATAL with startretries=0
    elif state == "STARTING":  # a start in flight (startsecs 8): the way back meets it before it is RUNNING
        ctl.run_ctl("stop", full, check=True)
        starting = subprocess.Popen([*ctl.ctl.split(), "start", full], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        wait_until(lambda: app.state(process) == "STARTING", timeout=30, what=f"{process} STARTING")
        return starting
    expected = ("BACKOFF", "STARTING") if state == "BACKOFF" else (state,)
    wait_until(lambda: app.state(process) in expected, timeout=60, what=f"{process} {state}")
    return None


def way_back(path: str, name: str, group: str) -> dict:
    controller = resolve_controller(name)
    if path == "offline":  # the offline DAGs' and the fleet's: stop until none runs, then start on classic
        stopped = controller.stop(confirm_seconds=60)
        assert stopped["instances_gone"] is True, stopped
        return controller.start("classic", expected=2)
    return roll_back(controller, KafkaGroupAdminHook(kafka_conn_id=CONN), [group], "classic", LIMITS,
                     context={"ti": RecordingTI()}, task_id="rollback_on_timeout", audit_log=None, log=log)


@pytest.mark.parametrize("path", ["platform", "by_instance", "offline"])
@pytest.mark.parametrize("state", STATES)
def test_the_way_back_brings_every_instance_back_on_classic_from_each_state(
        kafka, monkeypatch, unique, tmp_path, controllers, supervisor, state, path):
    set_kafka_connection(monkeypatch, CONN, kafka.bootstrap_servers)
    app, group = application(supervisor, kafka.bootstrap_servers, unique, tmp_path, instances=2, state=state)
    name = controllers.add(group, "command", app.target(by_instance=path == "by_instance"))
    first, second = app.process_names
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    starting = None
    try:
        app.start("consumer")
        wait_until(lambda: on(admin, group, "consumer", {"app-0", "app-1"}), timeout=90,
                   what="two instances on the consumer protocol")
        starting = put_in(app, first.split(":")[1], state)
        found = app.state(first)
        result = way_back(path, name, group)
        # every instance back: RUNNING on the platform, its member on classic in a classic group (a killed
        # instance's consumer member stays listed until its session expires: 6 s on the test broker)
        wait_until(lambda: on(admin, group, "classic", {"app-0", "app-1"}), timeout=90,
                   what=f"both instances back on classic (from {state}, {path})")
        assert set(app.pids()) == {f"{app.name}_0", f"{app.name}_1"}, app.pids()
        assert app.protocol == "classic"
        if path == "platform":  # the recipe's roll.sh found the first one in that state and brought it back
            assert f"roll: {first} is {found}" in result["platform"]["output"], result["platform"]["output"]
        elif path == "by_instance":
            rolled = result["instances"]
            assert [r["instance"] for r in rolled] == [first, second], rolled
            assert rolled[0]["before"]["state"] in (("BACKOFF", "STARTING") if state == "BACKOFF" else (state,))
            assert all(r["origin"]["incarnation"] for r in rolled), rolled  # each kept from its own start
        if path != "offline":
            final = split_of(resolve_controller(name), KafkaGroupAdminHook(kafka_conn_id=CONN), [group], "classic")
            assert final["back"] and not final["mixed"], final
            print(f"from {state} ({path}): {result['split']['summary']} -> {final['summary']}")
        assert admin.describe_group(group).type is GroupType.CLASSIC
    finally:
        if starting is not None:
            starting.wait(60)
        app.remove()
        admin.close()


@pytest.mark.parametrize("path", ["platform", "by_instance"])
@pytest.mark.parametrize("broken", ["RUNNING", "FATAL"])
def test_an_instance_that_cannot_come_back_is_named_and_the_others_are_brought_back(
        kafka, monkeypatch, unique, tmp_path, controllers, supervisor, broken, path):
    """Three instances on the consumer protocol; instance 1 crashes on classic too (its start fails on both). It
    was RUNNING: the way back brings instance 0 back, stops at instance 1 (a restart never takes down two that
    ran) and leaves instance 2 on consumer, and says the group is mixed. It was FATAL (down before the way back):
    the way back goes on, brings instances 0 and 2 back, and names instance 1 with why."""
    set_kafka_connection(monkeypatch, CONN, kafka.bootstrap_servers)
    app, group = application(supervisor, kafka.bootstrap_servers, unique, tmp_path, instances=3, state="FATAL")
    name = controllers.add(group, "command", app.target(by_instance=path == "by_instance"))
    zero, one, two = app.process_names
    admin = KafkaAdmin(ClientSettings(kafka.bootstrap_servers))
    try:
        app.start("consumer")
        wait_until(lambda: on(admin, group, "consumer", {"app-0", "app-1", "app-2"}), timeout=90,
                   what="three instances on the consumer protocol")
        if broken == "FATAL":
            put_in(app, one.split(":")[1], "FATAL")
        app.crash_on(1, "classic")
        pids = app.pids()
        with pytest.raises(WayBackFailed) as failed:
            way_back(path, name, group)
        what, split = failed.value.what, failed.value.split
        print(f"{path}, instance 1 {broken} before: {what}")
        assert one in what, what
        assert app.state(one) == "FATAL"
        assert any(entry.startswith(f"{one} (FATAL") and "is not running" in entry for entry in split["not_back"]), split
        assert not split["back"]
        if broken == "RUNNING":  # stopped there: instance 2 not touched, still on consumer; the group is mixed
            wait_until(lambda: on(admin, group, "consumer", {"app-0", "app-2"})
                       or {(m.client_id, m.protocol.value) for m in admin.describe_group(group).members
                           if m.member_epoch is None or m.member_epoch >= 0} == {("app-0", "classic"),
                                                                                  ("app-2", "consumer")},
                       timeout=60, what="instance 0 on classic, instance 2 on consumer")
            assert app.pids()[f"{app.name}_2"] == pids[f"{app.name}_2"], "instance 2 was not restarted"
            assert split["mixed"] and "the group is mixed" in split["summary"], split
            assert f"{group}: app-2 on consumer" in split["members_not_back"], split
            assert "not reached, still as they were" in what or "processes after it were not restarted" in what
        else:  # every other instance brought back
            wait_until(lambda: on(admin, group, "classic", {"app-0", "app-2"}), timeout=90,
                       what="instances 0 and 2 back on classic")
            assert set(app.pids()) == {f"{app.name}_0", f"{app.name}_2"}, app.pids()
            assert "FATAL" in what and (two in what or path == "platform"), what
    finally:
        app.remove()
        admin.close()

"""Every member accounted for: the group's members paired with the platform's instances in the Empty and Migrated
waits (issue 46, item 1), on a real broker with the ``command`` controller over the session's real supervisord.

* **A stray member is never forced out on the platform's word.** The application's two instances are stopped and the
  controller confirms "no instance running"; a consumer of the same group started elsewhere (a debugging consumer,
  another deployment: no instance of the platform carries its ``client.id``) is still in the group. The Empty wait
  does not force it out, with or without the stop's confirmation: it names it (client id, host, since when, why) and
  runs out instead of calling the group Empty; the stray is still a member after it.
* **A stand-in member does not make "migrated" true.** Instance 1 is a zombie (its process runs, SIGSTOPped: its
  consumer loop is dead, its member expired) and a stray consumer joins the group on the consumer protocol: two live
  members on the new protocol for two expected instances. The Migrated wait fails, naming the stray and the instance
  without a member, instead of counting the stray for instance 1.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.application import KafkaApplicationControllerOperator, plan_lines
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor, KafkaGroupMigratedSensor
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.supervised import SupervisedConsumerApp
from kip848_harness.supervisor import LocalSupervisor
from tests.conftest import wait_until

# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False).

#: the application's classic session, as its configuration says (the controller's config command shows it): the
#: Empty wait's bounds are derived from it (a member of a stopped instance expires within it)
APP_SESSION = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000"}


@pytest.fixture
def app(supervisor: LocalSupervisor, bootstrap: str, tmp_path: Path, unique) -> Iterator[SupervisedConsumerApp]:
    """Two consumer processes under supervisord (client ids ``app-0``, ``app-1``: the controller's member_identity),
    installed on classic; stopped and removed afterwards."""
    topic = unique("pair-t")
    create_topics(bootstrap, {topic: 4})
    produce(bootstrap, topic, (f"v{i}" for i in range(20)), keys=(f"k{i}" for i in range(20)))
    consumer_app = SupervisedConsumerApp(supervisor, unique("pair"), tmp_path / "app", bootstrap_servers=bootstrap,
                                         group_id=unique("pair-g"), topics=[topic], instances=2,
                                         classic_properties=APP_SESSION)
    try:
        consumer_app.install("classic")
        yield consumer_app
    finally:
        for pid in consumer_app.pids().values():  # a zombie SIGSTOPped by a test: let supervisord stop it
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        consumer_app.remove()


def _members(bootstrap: str, group: str) -> list[str]:
    with KafkaAdmin(ClientSettings(bootstrap, request_timeout_ms=15000)) as admin:
        return sorted(m.client_id for m in admin.describe_group(group).members)


@pytest.mark.parametrize("confirmed", [pytest.param(True, id="stop-confirmed"),
                                       pytest.param(False, id="not-confirmed")])
def test_a_stray_member_is_never_forced_out_on_the_platforms_word(confirmed, app, controllers, bootstrap, kafka_conn,
                                                                  unique, tmp_path, context):
    name = controllers.add(unique("pairing"), "command", app.target(by_instance=True))
    controller = resolve_controller(name)
    group, topic = app.group_id, app.topics[0]
    stray = None
    try:
        controller.start("classic")
        wait_until(lambda: _members(bootstrap, group) == ["app-0", "app-1"], timeout=90, what="both instances joined")
        stray = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="stray-debug",
                                      session_timeout_ms=6000, log_file=str(tmp_path / "stray.log"))
        wait_until(lambda: "stray-debug" in _members(bootstrap, group), timeout=90, what="the stray joined")
        stopped = controller.stop()
        assert stopped["instances_gone"] is True, stopped  # the platform's word: no instance running
        # the app's own members leave on their stop (or expire within their 6 s session); the stray stays
        wait_until(lambda: _members(bootstrap, group) == ["stray-debug"], timeout=60,
                   what="only the stray left in the group")
        sensor = KafkaGroupEmptySensor(task_id="wait_empty", deferrable=False, kafka_conn_id=kafka_conn,
                                       group_id=group, poll_interval=0.5, remove_members_after=0, settle_seconds=2,
                                       instances_gone=confirmed, controller=name, stop_result=stopped, timeout=30)
        with pytest.raises(AirflowSensorTimeout) as ran_out:
            sensor.execute(context)
        message = str(ran_out.value)
        print("Empty wait:", message)
        print("notes:", sensor._notes)
        assert "stray-debug" in message and "not forced out" in message, message
        assert "listed since" in message and "no instance of the platform carries its client.id" in message, message
        assert sensor._wait.removed == [], "nobody is forced out: the stray matches no instance"
        assert any("member(s) no instance accounts for: stray-debug" in n for n in sensor._notes), sensor._notes
        assert _members(bootstrap, group) == ["stray-debug"], "the stray is still a member: never forced out"
    finally:
        if stray is not None:
            stray.kill()


def test_a_stand_in_member_does_not_make_migrated_true(app, controllers, bootstrap, kafka_conn, unique, tmp_path,
                                                       context):
    name = controllers.add(unique("pairing"), "command", app.target(by_instance=True))
    controller = resolve_controller(name)
    group, topic = app.group_id, app.topics[0]
    stray = None
    try:
        started = controller.start("consumer")
        wait_until(lambda: _members(bootstrap, group) == ["app-0", "app-1"], timeout=90, what="both instances joined")
        zombie = app.pids()[f"{app.name}_1"]
        os.kill(zombie, signal.SIGSTOP)  # process up, consumer loop dead: its member expires (6 s group session)
        wait_until(lambda: _members(bootstrap, group) == ["app-0"], timeout=60, what="the zombie's member expired")
        stray = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="stray-debug",
                                      log_file=str(tmp_path / "stray.log"))
        wait_until(lambda: _members(bootstrap, group) == ["app-0", "stray-debug"], timeout=90,
                   what="the stray joined in the zombie's place")
        status = controller.status()
        assert len(status.running) == 2, status.summary()  # the platform shows both instances running
        sensor = KafkaGroupMigratedSensor(task_id="wait_migrated", deferrable=False, kafka_conn_id=kafka_conn,
                                          group_id=group, group_type="consumer", expected_members=2,
                                          poll_interval=0.5, controller=name, baseline=started["status"],
                                          liveness_seconds=2, timeout=60)
        with pytest.raises(AirflowFailException) as failed:
            sensor.execute(context)
        message = str(failed.value)
        print("Migrated wait:", message)
        assert "its members are not the application's instances" in message, message
        assert "stray-debug on" in message and "no instance of the platform carries its client.id" in message, message
        assert f"{app.name}:{app.name}_1" in message and "has no live member in the group" in message, message
    finally:
        if stray is not None:
            stray.kill()


@pytest.mark.parametrize("by_instance", [pytest.param(True, id="member-identity"),
                                         pytest.param(False, id="no-identity")])
def test_the_approval_says_how_members_are_paired_with_instances(by_instance, app, controllers, kafka_conn, unique,
                                                                 context):
    """The controller task's result (what the approval shows) says by which identity members will be paired with
    instances, or, for a controller whose instances carry none, that the instance verdicts rest on the broker's
    session timeout only and that no member is forced out on the platform's word."""
    name = controllers.add(unique("pairing"), "command", app.target(by_instance=by_instance))
    result = KafkaApplicationControllerOperator(task_id="application_controller", controller=name,
                                                group_protocol="classic").execute(context)
    lines = plan_lines(result)
    said = [line for line in lines if line.startswith("members and instances: ")]
    print(said)
    if by_instance:
        assert said == ["members and instances: members are paired with the platform's instances by client.id: a "
                        "member no instance accounts for is never forced out and fails the Migrated wait, named"]
    else:
        assert len(said) == 1 and "members cannot be paired with instances" in said[0], lines
        assert "carry no group.instance.id, client.id or host address" in said[0], said
        assert "rest on the broker's session timeout only" in said[0], said

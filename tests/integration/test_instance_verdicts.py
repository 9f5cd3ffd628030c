"""The verdicts about an application's *instances* rest on the platform's word, not on what the coordinator lists.

Two cases the coordinator alone gets wrong, against real consumers, a real broker and the 3-node cluster:

* **"Empty" trusted a member's absence.** A slow but live consumer is never forced out of its group unless the
  platform confirmed that no instance exists; when it leaves by itself and comes back, the Empty wait fails,
  naming it (and, where the controller knows it, its instance).
* **"Migrated" trusted a member's presence.** An instance that crashes after its start stays listed (Stable, its
  epoch unchanged) until its session times out; the migrated wait does not say "migrated": the controller's
  status shows the instance gone, and the wait fails naming it (at once while poking, whatever the coordinator
  lists). Static and dynamic members, on
  one node and on the 3-node cluster with the group's coordinator killed during the wait.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.application import KafkaApplicationStartOperator
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor, KafkaGroupMigratedSensor
from kip848_harness.appcontrol import LocalConsumerAppController
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.faults import coordinator_node, kill_coordinator
from tests.conftest import set_kafka_connection, wait_until

#: a slow consumer's client settings: the classic protocol's shortest session on the test broker, and a poll
#: interval it exceeds, so librdkafka leaves the group between two of its polls and joins again at the next
# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False;
# the default is the deployment's [kip848] default_deferrable, True).
SLOW = {"session.timeout.ms": "2000", "heartbeat.interval.ms": "500", "max.poll.interval.ms": "3000"}


def _topic(bootstrap: str, unique, partitions: int = 2) -> str:
    topic = unique("t")
    create_topics(bootstrap, {topic: partitions})
    produce(bootstrap, topic, (f"v{i}" for i in range(10)), keys=(f"k{i}" for i in range(10)))
    return topic


def test_a_slow_member_is_never_forced_out_without_the_platform_confirming_it(kafka_conn, native, bootstrap, unique,
                                                                              tmp_path, context, controllers):
    """The application's controller cannot tell which instances exist (no status). A live consumer between two
    slow polls (librdkafka heartbeats meanwhile: it stays a member) is not forced out, however short
    ``remove_members_after``: the wait runs out instead, saying why, and the member is still there."""
    topic, group = _topic(bootstrap, unique), unique("slow")
    name = controllers.add(unique("blind"), "command", {"commands": {"stop": "true", "start": "true"}})
    slow = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="slow-0",
                                 log_file=str(tmp_path / "slow.log"), extra_args=["--poll-pause-s", "25"])
    try:
        wait_until(lambda: native.describe_group(group).state == "Stable", timeout=60, what="the slow member joined")
        sensor = KafkaGroupEmptySensor(task_id="empty", deferrable=False, group_id=group, poll_interval=0.5, remove_members_after=0,
                                       settle_seconds=2, controller=name, timeout=8)
        with pytest.raises(AirflowSensorTimeout):
            sensor.execute(context)
        assert any("members not forced out" in n and "cannot tell" in n for n in sensor._notes), sensor._notes
        assert [m.client_id for m in native.describe_group(group).members] == ["slow-0"], "it was never removed"
    finally:
        slow.kill()


def test_a_member_back_after_the_group_was_empty_fails_the_wait_naming_its_instance(kafka_conn, native, bootstrap,
                                                                                     unique, tmp_path, context,
                                                                                     controllers):
    """A slow instance the controller's stop missed (it runs on; the platform still reports it) exceeds its poll
    interval, so librdkafka leaves the group: the group is Empty for a few seconds. At its next poll it joins
    again. The wait must fail then, naming the member and the instance the platform knows it as; it never says
    Empty while that instance runs."""
    topic, group = _topic(bootstrap, unique), unique("back")
    target = {"workdir": str(tmp_path / "apps"), "bootstrap_servers": bootstrap, "group_id": group,
              "topics": [topic], "instances": 1, "properties": {"classic": SLOW},
              "instance_args": {"0": ["--poll-pause-s", "8"]}}
    app = LocalConsumerAppController(**target)
    name = controllers.add(unique("slow-app"), "local-consumer-app", target)
    app.start("classic")
    try:
        wait_until(lambda: native.describe_group(group).state == "Stable", timeout=60, what="the slow member joined")
        # deferred or poked, the rule is the same; poked here. The settle window is longer than the member's absence
        sensor = KafkaGroupEmptySensor(task_id="empty", deferrable=False, group_id=group, poll_interval=0.3, settle_seconds=30,
                                       controller=name, timeout=90)
        with pytest.raises(AirflowFailException) as failed:
            sensor.execute(context)
        message = str(failed.value)
        assert "came back" in message and "after the group was empty: app-0 on" in message, message
        assert f"app-0 is {group}/app-0 (running on classic" in message, message
        assert app.running_pids(), "the instance still runs: the wait failed instead of saying Empty"
    finally:
        app.stop()


@pytest.mark.parametrize("nodes, static", [
    pytest.param(1, False, id="1-node-dynamic"), pytest.param(1, True, id="1-node-static"),
    # the 3-node cluster is asked for through request.getfixturevalue: marked here, not from the fixture names
    pytest.param(3, False, id="3-nodes-dynamic", marks=pytest.mark.cluster),
    pytest.param(3, True, id="3-nodes-static", marks=pytest.mark.cluster)])
def test_an_instance_that_crashes_after_its_start_is_not_migrated(nodes, static, request, monkeypatch, unique,
                                                                  tmp_path, context, controllers):
    """Two instances started on the consumer protocol through their controller; once both are members, instance 1
    crashes (SIGKILL: no LeaveGroup, its member stays listed until its session times out). Whichever comes first
    for the wait, the coordinator's side holding (both members listed through the liveness window) or the crashed
    member expiring, the wait must not say migrated: it fails naming the instance the platform shows gone. On 3
    nodes the group's coordinator is killed while the wait runs."""
    cluster = request.getfixturevalue("cluster") if nodes == 3 else request.getfixturevalue("kafka")
    bootstrap = cluster.bootstrap_servers
    conn = set_kafka_connection(monkeypatch, "kafka_instances", bootstrap, request_timeout_ms=15000)
    kind = f"{nodes}{'s' if static else 'd'}"  # unique() keeps 60 characters of the test's name: not the param id
    topic, group = _topic(bootstrap, lambda p: unique(f"{p}{kind}")), unique(f"crash{kind}")
    target = {"workdir": str(tmp_path / "apps"), "bootstrap_servers": bootstrap, "group_id": group, "topics": [topic],
              "instances": 2, "static": static}
    name = controllers.add(unique(f"crashing{kind}"), "local-consumer-app", target)
    app = LocalConsumerAppController(**target)
    killed: list[int] = []
    try:
        started = KafkaApplicationStartOperator(task_id="start", kafka_conn_id=conn, group_id=group,
                                                group_protocol="consumer", expected_instances=2,
                                                controller=name).execute(context)
        assert [i["client_id"] for i in started["status"]["instances"]] == ["app-0", "app-1"], started
        with KafkaAdmin(ClientSettings(bootstrap, request_timeout_ms=15000)) as admin:
            wait_until(lambda: len(admin.describe_group(group).members) == 2, timeout=60, what="2 members")
            # the group is on the new protocol, asked before the crash. Asked after the coordinator's kill (as it
            # was), the new coordinator once answered that the group does not exist (a clean-clone run under load;
            # node 1 took the coordinator over at 16:46:10.3 and loaded the group at .449; a read at the new
            # leader's committed view likely missed the group's newest records). A provider finding: see the
            # issue 48 stop note
            assert admin.describe_group(group).type is GroupType.CONSUMER
            crashed = app._instance_pid(1)
            assert crashed is not None
            os.kill(crashed, signal.SIGKILL)
            assert len(admin.describe_group(group).members) == 2, "the crashed member is still listed"
        if nodes == 3:
            killer = threading.Thread(target=lambda: killed.append(kill_coordinator(cluster, group)), daemon=True)
            killer.start()
        # a window shorter than the crashed member's expiry (6 s session): the broker may still list both members,
        # Stable, when the broker side of the wait is satisfied
        sensor = KafkaGroupMigratedSensor(task_id="wait_migrated", deferrable=False, kafka_conn_id=conn, group_id=group,
                                          group_type="consumer", expected_members=2, poll_interval=0.3,
                                          controller=name, baseline=started["status"], liveness_seconds=4,
                                          timeout=90)
        with pytest.raises(AirflowFailException) as failed:
            sensor.execute(context)
        message = str(failed.value)
        assert ("looks migrated to the coordinator, but the platform says otherwise" in message
                or "is not migrated and will not be: an instance started for it has died" in message), message
        assert f"{group}/app-1" in message and "is gone" in message, message
        if nodes == 3:
            killer.join(90)
            assert killed, "the coordinator's node was not killed"
            # the platform's verdict can come before the controller fences the dead node: the group moves on after
            wait_until(lambda: coordinator_node(bootstrap, group) != killed[0], timeout=60,
                       what="the group's coordinator moved off the killed node")
    finally:
        app.stop()

"""Verdicts on the 3-node cluster while the group's coordinator fails over, loads, pauses or a member flaps.

On one broker the coordinator never moves. On three, killing the node that coordinates a group moves it:
a client holding a cached coordinator keeps asking a dead node (or one that answers NOT_COORDINATOR),
and the new coordinator answers "load in progress" while it reads its partition. What must hold:

* a deferred wait ends with the true verdict once the group reaches it, whatever node died meanwhile;
* no wait, describe or snapshot reads an answer the coordinator could not give as a state or a count
  (no false "empty", no member count of 0 for a live group);
* operators either complete or fail retriably, and their rerun completes; offsets equal the snapshot;
* "empty" after a forced removal holds only if no member comes back; "migrated" needs every expected
  instance live on the new protocol.

Figures (time from the kill to the verdict, failed polls) are attached to the test report.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from airflow.sdk.exceptions import AirflowSensorTimeout, TaskDeferred

from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.api import evaluate_condition, read_preflight_facts, take_snapshot
from airflow_provider_kip848.kafka.model import GroupState, GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition, WaitState, follow, follow_failure
from airflow_provider_kip848.kafka.rules.lag import baseline_from_snapshot
from airflow_provider_kip848.kafka.rules.preflight import run_preflight
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.offsets import (
    KafkaRestoreGroupOffsetsOperator,
    KafkaSnapshotGroupOffsetsOperator,
)
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor, KafkaGroupMigratedSensor
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from kip848_harness.faults import coordinator_node, kill_coordinator, wait_group_partition_in_sync
from tests.conftest import set_kafka_connection, wait_until
from tests.e2e.helpers import Feeder

# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False;
# the default is the deployment's [kip848] default_deferrable, True).
CONN = "kafka_cluster"
#: a request rides out a failover (the dead node is fenced after broker.session.timeout.ms, 9 s)
EXTRA = {"request_timeout_ms": 15000}


@pytest.fixture
def conn(cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("KIP848_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    return set_kafka_connection(monkeypatch, CONN, cluster.bootstrap_servers, **EXTRA)


def _admin(cluster, timeout_ms: int = 15000) -> KafkaAdmin:
    return KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=timeout_ms))


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


def _rebuilt(trigger):
    """The trigger as the triggerer runs it: serialised, then rebuilt from its class path and kwargs."""
    from airflow.sdk._shared.module_loading import import_string
    from airflow.sdk.serde import deserialize, serialize

    classpath, kwargs = trigger.serialize()
    return import_string(classpath)(**deserialize(serialize(kwargs)))


class _Call:
    """A plain read in the shape of an operator, for the retry-on-retriable helper of a test."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def execute(self, context) -> object:
        return self.fn()


def _report(record_property, **figures) -> None:
    for name, value in figures.items():
        record_property(name, value)
    print("figures:", ", ".join(f"{k}={v}" for k, v in figures.items()))


def _topic_with_records(cluster, unique, partitions: int = 4, records: int = 40) -> str:
    topic = unique("t")
    create_topics(cluster.bootstrap_servers, {topic: partitions})
    produce(cluster.bootstrap_servers, topic, (f"v{i}" for i in range(records)), keys=(f"k{i}" for i in range(records)))
    return topic


def _members(cluster, group, topic, tmp_path, n: int, protocol: str, prefix: str = "app", **kwargs):
    return [ConsumerProcess.start(cluster.bootstrap_servers, group, [topic], protocol=protocol,
                                  client_id=f"{prefix}-{i}", log_file=str(tmp_path / f"{prefix}-{i}-{protocol}.log"),
                                  **kwargs) for i in range(n)]


def _live_described(cluster, group, n: int, type_: GroupType, timeout: float = 120):
    with _admin(cluster) as admin:
        return wait_until(lambda: (d := admin.describe_group(group)).type is type_ and len(d.members) == n
                          and d.state == "Stable" and d, timeout=timeout, what=f"{n} {type_.value} members, Stable")


# -- (a) a deferred "migrated" wait while the coordinator's node dies ---------------------------------------------

def test_deferred_migrated_wait_finds_the_new_coordinator(cluster, conn, unique, tmp_path, context, record_property):
    """The rolling upgrade happens while the coordinator's node is dead; the waiting trigger (one long-lived
    client) must follow the group to its new coordinator and say "migrated" once every instance is upgraded."""
    topic, group = _topic_with_records(cluster, unique), unique("g")
    members = _members(cluster, group, topic, tmp_path, 2, "classic")
    try:
        _live_described(cluster, group, 2, GroupType.CLASSIC)
        with _admin(cluster) as admin:
            wait_until(lambda: (o := admin.group_offsets(group)).total_lag == 0 and len(o.committed) == 4,
                       what="all records consumed and committed on the 4 partitions")
            before = take_snapshot(admin, group)
        sensor = KafkaGroupMigratedSensor(task_id="wait", kafka_conn_id=CONN, group_id=group, expected_members=2,
                                          deferrable=True, poll_interval=0.5, timeout=300)
        with pytest.raises(TaskDeferred) as deferred:
            sensor.execute(context)
        waiter = Background(lambda: asyncio.run(_first_event(_rebuilt(deferred.value.trigger))))
        waiter.start()
        time.sleep(1.0)  # let the trigger's client find (and cache) the coordinator
        assert waiter.is_alive()
        killed_at = time.monotonic()
        dead = kill_coordinator(cluster, group)
        for i, old in enumerate(members):  # the rollout goes on while the node is dead
            old.stop()
            members[i] = ConsumerProcess.start(cluster.bootstrap_servers, group, [topic], protocol="consumer",
                                               client_id=f"app-{i}", log_file=str(tmp_path / f"app-{i}-new.log"))
        rolled_at = time.monotonic()
        waiter.join(240)
        assert not waiter.is_alive() and waiter.error is None, waiter.error
        event = waiter.result.payload
        assert event["status"] == "met", event
        result = sensor.execute_complete(context, event=event)
        # the verdict is true: an independent client sees 2 live members, all on the consumer protocol
        now = _live_described(cluster, group, 2, GroupType.CONSUMER)
        assert all(m.protocol is MemberProtocol.CONSUMER for m in now.members)
        assert coordinator_node(cluster.bootstrap_servers, group) != dead
        with _admin(cluster) as admin:
            after = admin.group_offsets(group).committed
        assert after == before.committed, "no record was produced: the committed offsets must not have moved"
    finally:
        for m in members:
            m.stop()
    _report(record_property, killed_node=dead, rollout_s=round(rolled_at - killed_at, 1),
            verdict_after_kill_s=round(waiter.finished_at - killed_at, 1), polls=result["polls"])


# -- (b) the Empty wait while the coordinator's node dies -----------------------------------------------------------

@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_empty_wait_is_not_fooled_by_a_failover(cluster, conn, unique, tmp_path, context, protocol, record_property):
    """Live members through a coordinator failover: no poll may see the group as empty (a classic
    DescribeGroups answered by a loading coordinator carries an error code, state Unknown and no members);
    once the members stop, the wait ends Empty."""
    import airflow_provider_kip848.sensors.group_condition as sensor_module  # where the waits poll

    topic, group = _topic_with_records(cluster, unique), unique("g")
    answers: list[tuple[float, str]] = []
    real = sensor_module.evaluate_condition

    def spy(admin, group_id, condition):
        result = real(admin, group_id, condition)
        answers.append((time.monotonic(), result.summary))
        return result

    members = _members(cluster, group, topic, tmp_path, 2, protocol)
    try:
        _live_described(cluster, group, 2, GroupType.CLASSIC if protocol == "classic" else GroupType.CONSUMER)
        sensor_module.evaluate_condition = spy
        sensor = KafkaGroupEmptySensor(task_id="empty", deferrable=False, kafka_conn_id=CONN, group_id=group, poll_interval=0.3,
                                       settle_seconds=2, timeout=240)
        waiter = Background(lambda: sensor.execute(context))
        waiter.start()
        wait_until(lambda: answers, what="the first poke")
        killed_at = time.monotonic()
        dead = kill_coordinator(cluster, group)
        # the members survive the failover (they rejoin at the new coordinator); keep poking through it
        wait_until(lambda: coordinator_node(cluster.bootstrap_servers, group) != dead, timeout=60,
                   what="a new coordinator")
        wait_until(lambda: any(t > killed_at and s.startswith("2 member") for t, s in answers), timeout=120,
                   what="a poke answered by the new coordinator with both members")
        assert waiter.is_alive(), f"the wait ended with live members: {waiter.result or waiter.error}"
        assert not [s for t, s in answers if s.startswith("0 member") or "does not exist" in s], answers
        left_at = time.monotonic()
        for m in members:
            m.stop()
        waiter.join(120)
        assert not waiter.is_alive() and waiter.error is None, waiter.error
    finally:
        sensor_module.evaluate_condition = real
        for m in members:
            m.stop()
    assert waiter.result["summary"].startswith("0 member(s)") and "settle window 2 s" in waiter.result["summary"]
    with _admin(cluster) as admin:
        assert admin.describe_group(group).is_empty
    _report(record_property, killed_node=dead, pokes=len(answers),
            empty_after_members_left_s=round(waiter.finished_at - left_at, 1))


# -- (c) operators while the coordinator's node dies -----------------------------------------------------------------

def test_snapshot_restore_and_config_change_ride_out_a_coordinator_kill(cluster, conn, unique, tmp_path, context,
                                                                         record_property):
    """Each operator runs right after the coordinator's node is killed (its first requests meet a dead node or a
    loading coordinator): it completes, or fails retriably and its rerun completes; nothing half-done."""
    topic, group = _topic_with_records(cluster, unique, records=20), unique("g")
    consume(cluster.bootstrap_servers, group, [topic], 20, group_protocol="consumer")
    with _admin(cluster) as admin:
        truth = take_snapshot(admin, group)
    outcomes = {}

    def run(label, op):
        t0 = time.monotonic()
        for attempt in (1, 2, 3):
            try:
                result = op.execute(context)
                outcomes[label] = (attempt, round(time.monotonic() - t0, 1))
                return result
            except kafka_errors.Kip848Error as exc:
                assert exc.retriable, f"{label}: a non-retriable error during a failover: {exc}"
        raise AssertionError(f"{label} failed three times")

    killed = [kill_coordinator(cluster, group)]
    snap = run("snapshot", KafkaSnapshotGroupOffsetsOperator(task_id="snap", kafka_conn_id=CONN, group_id=group,
                                                        path=str(tmp_path / "snap.json")))
    assert snap["committed_partitions"] == 4
    from airflow_provider_kip848.operators.offsets import load_snapshot

    assert load_snapshot(snap["path"]).committed == truth.committed, "the snapshot is the real committed state"

    cluster.start_node(killed[0])
    # the restarted node back in sync first, so that the next kill leaves an in-sync replica to lead
    wait_group_partition_in_sync(cluster, group)
    # lose the offsets, then restore them while the (new) coordinator dies
    with _admin(cluster) as admin:
        admin.alter_group_offsets(group, {tp: 0 for tp in truth.committed})
    wait_group_partition_in_sync(cluster, group)
    killed.append(kill_coordinator(cluster, group))
    restored = run("restore", KafkaRestoreGroupOffsetsOperator(task_id="restore", kafka_conn_id=CONN, group_id=group,
                                                          snapshot_path=snap["path"]))
    # The restore must see the alter: the new coordinator's plain OffsetFetch answered the offsets from before it
    # for ~2 s after the kill (its high watermark trailing), and a restore trusting it found "nothing to restore"
    # while the group sat at 0. Stable reads see the alter, so the 4 partitions are restored (by this attempt, or
    # by an earlier one that wrote them and then failed retriably, e.g. on reading them back).
    assert len(restored["restored"]) == 4 or outcomes["restore"][0] > 1, (restored, outcomes)
    with _admin(cluster) as admin:
        assert admin.group_offsets(group).committed == truth.committed

    cluster.start_node(killed[1])
    wait_group_partition_in_sync(cluster, group)
    killed.append(kill_coordinator(cluster, group))
    changed = run("group_config", KafkaGroupConfigOperator(task_id="cfg", kafka_conn_id=CONN, group_id=group,
                                                           set_configs={"consumer.session.timeout.ms": 7000},
                                                               allow_absent_group=True))
    assert changed["after"].get("consumer.session.timeout.ms") == "7000"

    def read_configs() -> dict:
        # a fresh client's read, right after the kill: librdkafka sends DescribeConfigs to the metadata's
        # "controller", which can be the dead node for a while (KafkaConnectionError, retriable: asked again)
        with _admin(cluster) as admin:
            return admin.describe_group_config(group).dynamic

    assert run("read_back", _Call(read_configs)) == {"consumer.session.timeout.ms": "7000"}
    _report(record_property, killed_nodes=killed, **{f"{k}_attempt": v[0] for k, v in outcomes.items()},
            **{f"{k}_s": v[1] for k, v in outcomes.items()})


# -- (d) a paused coordinator while a describe runs ---------------------------------------------------------------

def test_a_paused_coordinator_never_yields_a_false_description(cluster, unique, tmp_path, record_property):
    """SIGSTOP the coordinator's node for longer than the request timeout and the broker session (it is fenced,
    the group moves), then SIGCONT it (it answers for a moment as the coordinator it no longer is). One
    long-lived client keeps describing the group and reading its members' assignment userData all along: each
    answer is either a retriable error or the group as it is (2 live classic members), never empty."""
    topic, group = _topic_with_records(cluster, unique), unique("g")
    members = _members(cluster, group, topic, tmp_path, 2, "classic")
    seen: list[str] = []
    described: list[tuple[int, GroupState, int]] = []

    def look(admin) -> None:
        try:
            desc = admin.describe_group(group)
            user_data = admin.classic_assignment_user_data(group)
            seen.append(f"{len(desc.members)} members {desc.state.value}, userData of {len(user_data)}")
            described.append((len(desc.members), desc.state, len(user_data)))
        except kafka_errors.Kip848Error as exc:
            assert exc.retriable, f"a non-retriable error from a paused or moving coordinator: {exc}"
            seen.append(type(exc).__name__)

    try:
        _live_described(cluster, group, 2, GroupType.CLASSIC)
        node = coordinator_node(cluster.bootstrap_servers, group)
        with _admin(cluster, timeout_ms=3000) as admin:
            look(admin)  # the client caches the coordinator
            cluster.pause_node(node)
            paused_at = time.monotonic()
            while time.monotonic() - paused_at < 14:  # > the request timeout and the broker session (9 s)
                look(admin)
            cluster.resume_node(node)
            resumed_at = time.monotonic()
            while time.monotonic() - resumed_at < 8:
                look(admin)
        _live_described(cluster, group, 2, GroupType.CLASSIC)
    finally:
        for m in members:
            m.stop()
    # The group as it is: its 2 live members, never Empty or Dead. A rebalance the move may cause is the truth
    # too (members rejoining carry no assignment yet), so userData is required of the Stable answers only.
    assert described and all(n == 2 and state not in (GroupState.EMPTY, GroupState.DEAD)
                             for n, state, _ in described), seen
    assert all(user_data == 2 for _, state, user_data in described if state is GroupState.STABLE), seen
    assert any("members" not in s for s in seen), f"the pause was never felt: {seen}"
    _report(record_property, paused_node=node, answers=len(described), retriable_errors=len(seen) - len(described))


# -- (e) the lag wait on a live application while its coordinator pauses -----------------------------------------

def _lag_polls(admin, group, condition, state, seconds: float, verdicts: list[str], *, until_met: bool = False):
    """Poll as the lag wait polls (evaluate_condition, then follow; a failed read goes to follow_failure, which
    raises only what ends the wait) for ``seconds``: each verdict recorded, "unknown: <error>" for a failed read."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            result = follow(condition, evaluate_condition(admin, group, condition), state, time.time())
        except kafka_errors.Kip848Error as exc:
            follow_failure(exc, state, time.time(), 300.0)  # raises a failure that is not "unknown for now"
            verdicts.append(f"unknown: {type(exc).__name__}")
            continue
        verdicts.append(f"met by {result.detail['rule']}" if result.met else "not met")
        if result.met and until_met:
            return result
        time.sleep(0.5)  # the wait's poll interval
    return None


def test_the_lag_wait_says_unknown_while_the_coordinator_pauses_and_never_passes_a_dead_consumer(
        cluster, unique, tmp_path, record_property):
    """A producer writes throughout. SIGSTOP the group's coordinator node past the request timeout and the broker
    session (the group moves), then SIGCONT it: the lag wait of a live consumer reads "unknown" while nobody can
    answer, never fails for it, and ends caught up once the group commits again; the same wait on a killed consumer
    never passes and never fails, through another pause."""
    topic, group = _topic_with_records(cluster, unique), unique("g")
    feeder = Feeder(cluster.bootstrap_servers, topic, lambda: False, every_s=0.02, limit=1_000_000)
    feeder.start()
    members = _members(cluster, group, topic, tmp_path, 1, "consumer")
    live, dead = [], []
    try:
        with _admin(cluster, timeout_ms=3000) as admin:
            wait_until(lambda: len(admin.group_offsets(group).committed) == 4, timeout=120,
                       what="the consumer committed on the 4 partitions")
            condition = GroupCondition("lag", baseline=baseline_from_snapshot(take_snapshot(admin, group)),
                                       window_s=3.0)
            state = WaitState()
            node = coordinator_node(cluster.bootstrap_servers, group)
            _lag_polls(admin, group, condition, state, 1.0, live)  # the client caches the coordinator
            cluster.pause_node(node)
            paused_at = time.monotonic()
            _lag_polls(admin, group, condition, state, 14.0, live)  # > the request timeout and the broker session
            cluster.resume_node(node)
            met = _lag_polls(admin, group, condition, state, 120.0, live, until_met=True)
            caught_up_s = time.monotonic() - paused_at
            assert met is not None, f"a live consumer never caught up after the pause: {live}"
            assert any(v.startswith("unknown") for v in live), f"the pause was never felt: {live}"

            members[0].kill()  # dead: records keep arriving, its committed offsets stay
            dead_state = WaitState()
            node = coordinator_node(cluster.bootstrap_servers, group)
            _lag_polls(admin, group, condition, dead_state, 2.0, dead)
            cluster.pause_node(node)
            _lag_polls(admin, group, condition, dead_state, 14.0, dead)
            cluster.resume_node(node)
            _lag_polls(admin, group, condition, dead_state, 10.0, dead)
    finally:
        for m in members:
            m.stop()
        feeder.stop()
    assert feeder.error is None, feeder.error
    assert not any(v.startswith("met") for v in dead), f"a dead consumer passed the lag wait: {dead}"
    assert any(v.startswith("unknown") for v in dead) and "not met" in dead, dead
    _report(record_property, lag_paused_node=node, lag_caught_up_after_pause_s=round(caught_up_s, 1),
            lag_rule=met.detail["rule"], lag_unknown_polls=sum(v.startswith("unknown") for v in live),
            dead_polls=len(dead))


# -- forced removal, a member that comes back, streams groups -----------------------------------------------------

def test_a_member_the_platform_does_not_list_is_never_forced_out_of_the_empty_wait(cluster, conn, unique, tmp_path,
                                                                                    context, controllers):
    """The app was "stopped" but one instance still runs, and its platform wrongly says none does (a status that
    lists nothing). Before issue 46 LeaveGroup removed its member on that word and the wait failed when it rejoined;
    now no instance pairs with it, so it is never forced out: the wait runs out naming it, and it is still a member
    (the next step would otherwise start the new app beside it)."""
    topic, group = _topic_with_records(cluster, unique), unique("g")
    survivor = ConsumerProcess.start(cluster.bootstrap_servers, group, [topic], protocol="classic",
                                     client_id="still-running", session_timeout_ms=6000,
                                     log_file=str(tmp_path / "survivor.log"))
    try:
        _live_described(cluster, group, 1, GroupType.CLASSIC)
        blind = controllers.add(unique("wrong"), "command", {"commands": {"stop": "true", "start": "true",
                                                                          "status": "echo '[]'"}})
        sensor = KafkaGroupEmptySensor(task_id="empty", deferrable=False, kafka_conn_id=CONN, group_id=group, poll_interval=0.3,
                                       remove_members_after=0, settle_seconds=10, controller=blind, timeout=30)
        with pytest.raises(AirflowSensorTimeout, match=r"1 member\(s\)"):
            sensor.execute(context)
        assert sensor._wait.removed == [], "never forced out: no instance of the platform accounts for it"
        assert any("members not forced out: the platform lists no instance" in n for n in sensor._notes), sensor._notes
        assert survivor.running
        with _admin(cluster) as admin:
            assert [m.client_id for m in admin.describe_group(group).members] == ["still-running"]
    finally:
        survivor.stop()


def test_a_streams_group_is_never_sent_leavegroup(cluster, conn, unique, tmp_path, context):
    """remove_members_after on a streams group: no LeaveGroup (the broker rejects it; and with no controller no
    member is paired with an instance, so none is forced out: issue 46), the wait says why and ends Empty when the
    killed instance's member expires (streams.session.timeout.ms)."""
    from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC

    app_id = unique("wc")
    create_topics(cluster.bootstrap_servers, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    app = cluster.start_wordcount(app_id, group_protocol="streams")
    try:
        with _admin(cluster) as admin:
            wait_until(lambda: (d := admin.describe_group(app_id)).type is GroupType.STREAMS and d.members,
                       timeout=120, what="a streams member")
        app.kill()  # its member stays until streams.session.timeout.ms (6 s on the test brokers)
        result = KafkaGroupEmptySensor(task_id="empty", deferrable=False, kafka_conn_id=CONN, group_id=app_id, poll_interval=0.5,
                                       remove_members_after=0, settle_seconds=1, instances_gone=not app.running,
                                       timeout=120).execute(context)
    finally:
        app.kill()
    assert result["members_removed"] == []
    assert any("members not forced out" in n and "no application controller" in n for n in result["notes"]), result["notes"]
    with _admin(cluster) as admin:
        assert admin.describe_group(app_id).is_empty


def test_migrated_is_not_declared_with_a_static_instance_down(cluster, conn, unique, tmp_path, context):
    """Three static instances on the consumer protocol, one shut down: its member stays listed (epoch -2) until
    its session expires; "migrated" with 3 expected must not be declared, and is once it is back."""
    topic, group = _topic_with_records(cluster, unique), unique("g")
    members = [ConsumerProcess.start(cluster.bootstrap_servers, group, [topic], protocol="consumer",
                                     client_id=f"s-{i}", instance_id=f"s-{i}", log_file=str(tmp_path / f"s-{i}.log"))
               for i in range(3)]
    three = GroupCondition("migrated", group_type="consumer", min_members=3)
    try:
        _live_described(cluster, group, 3, GroupType.CONSUMER)
        members[2].stop()
        with _admin(cluster) as admin:
            # the departed member is listed until its session expires (6 s on the test brokers): judge it then
            verdict = wait_until(lambda: (v := evaluate_condition(admin, group, three)) and "departed" in v.summary
                                 and v, timeout=30, interval=0.2, what="a verdict with the departed static member")
            departed = [m for m in admin.describe_group(group).members if m.instance_id == "s-2"]
        assert not verdict.met
        assert verdict.summary.startswith("type consumer, 2 of 2 live member(s) on the new protocol, 3 expected")
        assert any(not m["live"] and m["instance_id"] == "s-2" for m in verdict.detail["members"]) or not departed
        members[2] = ConsumerProcess.start(cluster.bootstrap_servers, group, [topic], protocol="consumer",
                                           client_id="s-2", instance_id="s-2", log_file=str(tmp_path / "s-2b.log"))
        result = KafkaGroupMigratedSensor(task_id="m2", deferrable=False, kafka_conn_id=CONN, group_id=group, expected_members=3,
                                          poll_interval=0.5, timeout=120).execute(context)
        assert result["summary"].startswith("type consumer, 3 of 3 live member(s)")
    finally:
        for m in members:
            m.stop()


def test_describe_cluster_rides_out_the_death_of_the_node_librdkafka_calls_controller(cluster) -> None:
    """DescribeCluster goes to the node librdkafka's metadata names as controller; killed, that node was waited for
    past the whole request timeout (a restore failed on it during a coordinator kill, in a clean-clone run). The
    same client asks again within its timeout, after a metadata refresh names a live node. (On the old code this
    waited out the timeout in some runs, 24 s seen once, and passed at once in others: librdkafka's metadata
    refresh timing decides.)"""
    with _admin(cluster) as admin:
        before = admin.describe_cluster()
        assert before.controller_id is not None
        cluster.kill_node(before.controller_id)
        # the answer comes from a live node (a live node may still name the dead one until the quorum fences it)
        after = admin.describe_cluster()
        assert after.cluster_id == before.cluster_id


def _node_with(cluster, node_id: int, extra: str | None) -> None:
    """Restart one node with ``extra`` appended to its server.properties (None: as it was), as a rolling config
    change does broker by broker, and wait until the cluster's metadata lists it again."""
    path = cluster.node_config_path(node_id)
    original = path.read_text().split("\n# kip848-test-extra\n")[0]
    cluster.stop_node(node_id)
    path.write_text(original if extra is None else f"{original}\n# kip848-test-extra\n{extra}\n")
    cluster.start_node(node_id)
    with _admin(cluster) as admin:
        wait_until(lambda: len(admin.describe_cluster().brokers) == 3, what=f"node {node_id} back in the metadata")


def test_brokers_that_disagree_on_the_migration_policy_fail_the_preflight_naming_both(cluster, unique):
    """Half-way through a rolling change of group.consumer.migration.policy, one broker says disabled and the others
    bidirectional: whether an online migration works would depend on which broker coordinates the group. The
    preflight reads every broker's configs (not one) and fails, naming each broker and its value."""
    group = unique("policy-split")
    _node_with(cluster, 2, "group.consumer.migration.policy=disabled")
    try:
        with _admin(cluster) as admin:
            configs = admin.group_coordinator_configs()
            assert {c.broker_id: c.migration_policy for c in configs} == {1: "bidirectional", 2: "disabled",
                                                                          3: "bidirectional"}
            report = run_preflight(read_preflight_facts(admin, group), "classic_to_consumer", group_id=group)
        check = next(c for c in report.checks if c.name == "brokers_agree")
        assert check.status == "fail" and not report.passed
        assert ("group.consumer.migration.policy: broker 1 = bidirectional, broker 2 = disabled, "
                "broker 3 = bidirectional") in check.evidence
    finally:
        _node_with(cluster, 2, None)
    with _admin(cluster) as admin:  # the change rolled back on every broker: they agree again
        report = run_preflight(read_preflight_facts(admin, group), "classic_to_consumer", group_id=group)
    assert next(c for c in report.checks if c.name == "brokers_agree").status == "pass"

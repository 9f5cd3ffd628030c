"""The fleet's per-application move (KafkaApplicationMigrationOperator) on the 3-node cluster.

A fleet wave moves many applications while brokers fail: the verdict of each application ("migrated",
"back on classic") must hold on what the cluster really shows. Here an application of two real consumer
groups moves offline while the coordinator of one group is killed right after the restart, and another
one's wait ends while its coordinator is paused: the move fails and its groups' outcome is "unknown",
never a guessed type or member count. The operator is driven as Airflow drives it: execute() until it
defers, its trigger serialised and rebuilt and run to its first event, resume() with the event.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import is_live
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.fleet import RESULT_KEY, KafkaApplicationMigrationOperator
from kip848_harness.appcontrol import LocalConsumerFleetAppController
from kip848_harness.clients import create_topics, produce
from kip848_harness.faults import coordinator_node, kill_coordinator
from kip848_harness.supervised import SupervisedConsumerApp
from tests.conftest import RecordingTI, set_kafka_connection, wait_until
from tests.e2e.helpers import Feeder
from tests.integration.test_cluster_faults import _first_event, _rebuilt

CONN = "kafka_cluster_fleet"


class FleetTI(RecordingTI):
    """A mapped task instance of a fleet run (the change lock names its DAG and run)."""

    dag_id, run_id, map_index = "kip848_fleet_migration", "test-run", 0

    def get_dagrun_state(self, dag_id: str, run_id: str) -> str:
        raise LookupError("not an Airflow run")


@pytest.fixture
def conn(cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("KIP848_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    return set_kafka_connection(monkeypatch, CONN, cluster.bootstrap_servers, request_timeout_ms=15000)


def _admin(cluster) -> KafkaAdmin:
    return KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=15000))


def _application(cluster, unique, tmp_path, controllers, groups: int = 2):
    """A running classic application of ``groups`` groups (one instance each), caught up, registered in the
    deployment's controller registry (the unit names it, as the ownership map does)."""
    names = {unique("fleet-g"): unique("fleet-t") for _ in range(groups)}
    create_topics(cluster.bootstrap_servers, {t: 3 for t in names.values()})
    for t in names.values():
        produce(cluster.bootstrap_servers, t, (f"v{i}" for i in range(30)), keys=(str(i) for i in range(30)))
    args = {"workdir": str(tmp_path / "apps"), "bootstrap_servers": cluster.bootstrap_servers,
            "groups": {g: [t] for g, t in names.items()}, "instances": 1}
    controller = LocalConsumerFleetAppController(**args)
    name = controllers.add(unique("fleet-app"), "local-consumer-fleet-app", args)
    controller.start("classic")
    with _admin(cluster) as admin:
        def settled() -> bool:
            for g in names:
                d, o = admin.describe_group(g), admin.group_offsets(g)
                if d.state != "Stable" or len(d.members) != 1 or o.total_lag or o.uncommitted_with_records:
                    return False
            return True

        wait_until(settled, timeout=120, what="the application's classic groups Stable and caught up")
        before = {g: admin.group_offsets(g).committed for g in names}
    unit = {"app": "orders", "team": "commerce", "wave": 1, "path": "offline", "app_controller": name,
            "app_controller_args": {}, "expected_instances": 1,
            "groups": [{"group_id": g, "type": "classic", "live_members": 1} for g in sorted(names)]}
    return unit, controller, before


def _operator(unit, tmp_path, **kw) -> KafkaApplicationMigrationOperator:
    args = {"kafka_conn_id": CONN, "snapshot_dir": str(tmp_path / "snapshots"), "poll_interval": 0.5,
            "remove_members_after": 2, "empty_settle_seconds": 2, "empty_timeout_minutes": 2,
            "start_timeout_minutes": 2, **kw}
    return KafkaApplicationMigrationOperator(task_id="wave_1.migrate", application=unit, **args)


def _drive(op, context, before_wait=None, deferrals: list | None = None):
    """execute(), then every deferral as the triggerer runs it, until the operator returns or fails."""
    try:
        return op.execute(context)
    except TaskDeferred as deferred:
        pending = deferred
    while True:
        trigger = pending.trigger
        if deferrals is not None:
            deferrals.append(trigger.carry["move"]["position"])
        if before_wait is not None:
            before_wait(trigger)
        event = asyncio.run(_first_event(_rebuilt(trigger))).payload
        try:
            return op.resume(context, event=event)
        except TaskDeferred as deferred:
            pending = deferred


def test_an_application_moves_offline_while_a_coordinator_dies(cluster, conn, unique, tmp_path, controllers):
    """A producer writes to each group's topic throughout (live traffic, issue 32): the lag waits end by their rule
    against the move's own snapshot, never waiting for a lag of 0."""
    unit, controller, before = _application(cluster, unique, tmp_path, controllers)
    feeders = [Feeder(cluster.bootstrap_servers, part.topics[0], lambda: False, first=30, every_s=0.04,
                      limit=1_000_000) for part in controller.parts]
    for feeder in feeders:
        feeder.start()
    context = {"ti": FleetTI()}
    killed: list[int] = []
    published: list[dict] = []

    def kill_once(trigger) -> None:  # the first group's coordinator dies just as the restarted app joins
        published.append(dict(context["ti"].xcom["fleet_progress"]))  # what the fleet view shows meanwhile
        state = trigger.carry["move"]
        if not killed and "start" in [s["step"] for s in state["steps"]]:
            killed.append(kill_coordinator(cluster, trigger.waits[0]["group_id"]))

    try:
        deferrals: list[int] = []
        result = _drive(_operator(unit, tmp_path), context, before_wait=kill_once, deferrals=deferrals)
        assert killed, "the coordinator was killed during a wait after the start"
        assert result["ok"] is True, result
        assert context["ti"].xcom[RESULT_KEY] == result
        assert [s["step"] for s in result["steps"]][:4] == ["lock", "snapshot", "stop", "wait_empty"]
        assert result["gap_s"] and result["gap_s"] > 0 and result["gap_to"] > result["gap_from"]
        # one wait per group and condition in the record, but one deferral per run of waits at most: the
        # platform confirmed the instances gone, so Empty held at the first look in the worker; migrated and lag
        # (both groups) were followed by one trigger
        waits = [s for s in result["steps"] if s["step"].startswith("wait_")]
        assert len(waits) == 6, waits
        assert all(f.is_alive() and f.error is None for f in feeders), "the producers ran throughout"
        lags = [s["detail"] for s in waits if s["step"] == "wait_lag"]
        assert len(lags) == 2 and all("caught up by the baseline rule" in d for d in lags), lags
        ended = {(s["step"], s["group_id"]): s["ended_at"] for s in waits}
        print("figures: fleet move lag waits ended " + ", ".join(  # after each group was migrated (not asserted)
            f"{ended[('wait_lag', g)] - ended[('wait_migrated', g)]:.1f} s" for g in sorted(before))
            + " after their group was migrated, with producers running")
        assert deferrals == [6], deferrals  # position 6 = wait_migrated (lock, snapshot, stop, wait_empty, ...)
        # the step published for the fleet view when the move deferred: the stage and each group's wait in it
        assert [(p["step"], p["position"], p["waiting"]) for p in published] == [("wait_migrated", 6, True)]
        assert set(published[0]["groups"]) == set(before)
        assert set(published[0]["groups"].values()) <= {"wait_migrated", "wait_lag", "done"}, published
        final = context["ti"].xcom["fleet_progress"]
        assert (final["step"], final["waiting"], set(final["groups"].values())) == (None, False, {"done"})
        with _admin(cluster) as admin:  # the verdict is true, seen by an independent client
            for g in before:
                desc = admin.describe_group(g)
                assert desc.type is GroupType.CONSUMER, g
                assert [m.protocol for m in desc.members if is_live(m)] == [MemberProtocol.CONSUMER], g
                now = admin.group_offsets(g).committed
                assert all(now.get(tp, -1) >= off for tp, off in before[g].items()), (g, before[g], now)
            assert coordinator_node(cluster.bootstrap_servers, unit["groups"][0]["group_id"]) != killed[0]
        assert {o["group_id"]: (o["ok"], o["type_after"], o["members_after"]) for o in result["groups"]} == {
            g: (True, "consumer", 1) for g in before}
    finally:
        for feeder in feeders:
            feeder.stop()
        controller.stop()


class _Watcher:
    """An independent client describing one group as fast as the cluster answers, in its own thread: every
    (type, live members) the cluster answered while it ran. A describe that fails records nothing."""

    def __init__(self, cluster, group: str) -> None:
        self.cluster, self.group = cluster, group
        self.seen: set[tuple[str, int]] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{group}", daemon=True)

    def _run(self) -> None:
        with KafkaAdmin(ClientSettings(self.cluster.bootstrap_servers, request_timeout_ms=2000)) as admin:
            while not self._done.is_set():
                try:
                    d = admin.describe_group(self.group)
                except Exception:  # noqa: BLE001 - no answer: nothing seen
                    pass
                else:
                    self.seen.add((d.type.value, sum(1 for m in d.members if is_live(m))))
                self._done.wait(0.05)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=30)


def test_with_a_paused_coordinator_the_outcome_is_true_or_unknown(cluster, conn, unique, tmp_path, controllers):
    """The restarted application joins while the coordinator of its group is paused (a node that stops
    answering without closing its connections). Whether the wait rides out the failover or runs out of
    time, each group's recorded outcome is either a (type, live members) that an independent client saw
    the cluster answer during the move or once the node is back, or "unknown": never a guessed type or
    member count. (Not only the state once the node is back: a member fenced during the failover is out
    of the group until it rejoins, and an outcome read then says so truly, as a CI run showed.)"""
    unit, controller, _ = _application(cluster, unique, tmp_path, controllers, groups=1)
    group = unit["groups"][0]["group_id"]
    context = {"ti": FleetTI()}
    paused: list[int] = []
    watcher = _Watcher(cluster, group)

    def pause_once(trigger) -> None:
        if not paused and "start" in [s["step"] for s in trigger.carry["move"]["steps"]]:
            paused.append(coordinator_node(cluster.bootstrap_servers, group))
            cluster.pause_node(paused[0])

    try:
        watcher.start()
        try:
            _drive(_operator(unit, tmp_path, start_timeout_minutes=0.5), context, before_wait=pause_once)
        except AirflowFailException:
            pass  # failing is allowed (the wait ran out, or a step could not reach the cluster): guessing is not
        finally:
            watcher.stop()
        result = context["ti"].xcom[RESULT_KEY]
        assert paused, "the coordinator was paused during the wait after the start"
        outcome = result["groups"][0]
    finally:
        for node in paused:
            cluster.resume_node(node)
    try:
        with _admin(cluster) as admin:
            truth = wait_until(lambda: (d := admin.describe_group(group)).state == "Stable" and d, timeout=120,
                               what="the group Stable once the node is back")
        if outcome["type_after"] is None:
            assert outcome["ok"] is False and outcome["detail"].startswith("unknown"), outcome
            assert outcome["members_after"] is None, outcome
        else:
            answered = watcher.seen | {(truth.type.value, sum(1 for m in truth.members if is_live(m)))}
            assert (outcome["type_after"], outcome["members_after"]) in answered, (outcome, sorted(answered), truth)
        assert result["ok"] is (outcome["ok"] and truth.type is GroupType.CONSUMER)
    finally:
        controller.stop()


def test_a_move_whose_task_is_lost_is_taken_up_at_its_recorded_step(cluster, conn, unique, tmp_path, controllers):
    """An executor that loses a resumed deferred task (apache/airflow#71580) or a worker that dies ends the task
    process mid-move; Airflow retries it. The retry's execute() must take the move up where it was recorded,
    not start it again: the application is not stopped a second time, its snapshot stays the one taken before
    the move, and the result counts every group migrated."""
    unit, controller, before = _application(cluster, unique, tmp_path, controllers, groups=2)
    context = {"ti": FleetTI()}
    try:
        with pytest.raises(TaskDeferred) as first:
            _operator(unit, tmp_path).execute(context)  # the process that gets lost, waiting after the start
        assert first.value.trigger.carry["move"]["position"] == 6
        snapshots = {g: (tmp_path / "snapshots" / unit["app"] / f"{g}.json").read_text() for g in before}
        # the retry: a new operator and task process, no event, only the record on the run's snapshot location
        deferrals: list[int] = []
        result = _drive(_operator(unit, tmp_path), context, deferrals=deferrals)
        assert result["ok"] is True, result
        steps = [s["step"] for s in result["steps"]]
        assert steps.count("stop") == 1 and steps.count("start") == 1 and steps.count("snapshot") == 1, steps
        assert deferrals == [6], deferrals
        assert all((tmp_path / "snapshots" / unit["app"] / f"{g}.json").read_text() == snapshots[g] for g in before)
        record = json.loads((tmp_path / "snapshots" / unit["app"] / "move-migrate.json").read_text())
        assert record["attempts"] == 2 and record["result"]["ok"] is True
        assert record["deferrals"] == 2  # one by the lost process, one by the retry, at the same stage
        assert any("taken up again at step wait_migrated" in n for n in record["notes"]), record["notes"]
        with _admin(cluster) as admin:
            for g in before:
                assert admin.describe_group(g).type is GroupType.CONSUMER, g
        # a third process after the move finished (its success lost too): the recorded result, nothing redone
        again = _operator(unit, tmp_path).execute(context)
        assert again["ok"] is True and again["steps"] == result["steps"]
    finally:
        controller.stop()


def test_the_online_path_stops_at_the_first_instance_of_an_application_that_does_not_convert(
        cluster, conn, unique, tmp_path, controllers, supervisor):
    """The fleet's online path through a command controller that can restart one instance, over a real
    supervisord: the deployment never reads the protocol switch, so its first instance comes back on classic.
    The move fails at the roll naming that instance (the first-instance gate), the other instance was never
    restarted, and the group is not counted migrated."""
    topic, group = unique("fleet-gate-t"), unique("fleet-gate-g")
    create_topics(cluster.bootstrap_servers, {topic: 2})
    produce(cluster.bootstrap_servers, topic, (f"v{i}" for i in range(20)), keys=(str(i) for i in range(20)))
    app = SupervisedConsumerApp(supervisor, group, tmp_path / "supervised", bootstrap_servers=cluster.bootstrap_servers,
                                group_id=group, topics=[topic], instances=2, stale_launcher=True)
    app.install("classic")
    name = controllers.add(group, "command", app.target(by_instance=True))
    try:
        app.start("classic")
        with _admin(cluster) as admin:
            wait_until(lambda: (d := admin.describe_group(group)).state == "Stable" and len(d.members) == 2
                       and admin.group_offsets(group).total_lag == 0, timeout=120, what="2 classic instances")
        untouched = app.pids()[f"{group}_1"]
        unit = {"app": "orders", "team": "commerce", "wave": 1, "path": "online", "app_controller": name,
                "app_controller_args": {}, "expected_instances": 2,
                "groups": [{"group_id": group, "type": "classic", "live_members": 2}]}
        context = {"ti": FleetTI()}
        with pytest.raises(AirflowFailException):
            _drive(_operator(unit, tmp_path, start_timeout_minutes=10), context)
        result = context["ti"].xcom[RESULT_KEY]
        assert result["ok"] is False, result
        failed = [s for s in result["steps"] if not s.get("ok", True)]
        assert failed and failed[0]["step"] == "roll", result["steps"]
        assert (f"the first-instance gate: instance {group}:{group}_0 restarted with group.protocol=consumer but "
                "its new member joined on another protocol") in failed[0]["detail"], failed[0]
        assert app.pids()[f"{group}_1"] == untouched, "the second instance was never restarted"
    finally:
        app.remove()

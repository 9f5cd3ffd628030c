"""A fleet move's waits watch the platform through the whole stage, deferred and poked (issue 46, item 2).

The finding, for the fleet: an application's move (engine/move.py) waits in stages (after the start: migrated,
then lag, for every group), one trigger per stage (triggers/move.py). Neither looked at the platform during the
stage: an instance stopped by hand while its group was being migrated left the group one member short, and the
stage counted members until its own deadline ("did not hold within its timeout"). Here, against a real broker,
a real supervisord and the shipped ``command`` controller, three consumer instances move offline; instance 1 is
stopped by hand (``supervisorctl stop``) while the migrated stage waits. The stage fails at the platform's next
look, naming the instance STOPPED: deferred (the move's trigger, serialised and rebuilt as the triggerer does,
looks from there, racing its broker polls; its kwargs carry the controller's name, never a command) and poked
(``deferrable=False``: the worker looks between its polls). The latency from the stop to the failure is printed
(never asserted: the machine is shared).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred

from airflow_provider_kip848.fleet.names import PROGRESS_KEY
from airflow_provider_kip848.operators.fleet import RESULT_KEY, KafkaApplicationMigrationOperator
from tests.conftest import RecordingTI, wait_until
from tests.integration.test_platform_watch import _application, _first_event, _rebuilt, _started

#: the stage's own deadline (start_timeout_minutes): generous, so a failure before it is the platform's look
STAGE_TIMEOUT_MINUTES = 3


class FleetTI(RecordingTI):
    """A mapped task instance of a fleet run (the change lock names its DAG and run)."""

    dag_id, run_id, map_index = "kip848_fleet_migration", "watch-run", 0

    def get_dagrun_state(self, dag_id: str, run_id: str) -> str:
        raise LookupError("not an Airflow run")


class Move(threading.Thread):
    """The application's move as Airflow runs it, in the background: deferred (execute(), every deferral's
    trigger serialised, rebuilt and run to its first event, resume()) or poked (execute() alone)."""

    def __init__(self, op: KafkaApplicationMigrationOperator, context: dict, deferred: bool) -> None:
        super().__init__(daemon=True)
        self.op, self.context, self.deferred = op, context, deferred
        self.result = self.error = None
        self.events: list[dict] = []
        self.triggers: list[dict] = []  # each deferral's serialised kwargs
        self.ended: float | None = None

    def run(self) -> None:
        try:
            try:
                self.result = self.op.execute(self.context)
                return
            except TaskDeferred as deferred:
                pending = deferred
            while True:
                trigger = pending.trigger
                self.triggers.append(trigger.serialize()[1])
                event = asyncio.run(_first_event(_rebuilt(trigger))).payload
                self.events.append(event)
                try:
                    self.result = self.op.resume(self.context, event=event)
                    return
                except TaskDeferred as again:
                    pending = again
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
        finally:
            self.ended = time.monotonic()


@pytest.mark.parametrize("deferred", [True, False], ids=["deferred", "poked"])
def test_an_instance_stopped_by_hand_during_a_fleet_moves_migrated_stage_fails_it_named(
        deferred, kafka, kafka_conn, native, unique, tmp_path, controllers, supervisor):
    """Three classic instances under supervisord move offline (stop, Empty, start on consumer, migrated + lag).
    Once the migrated stage waits, instance 1 is stopped by hand: its member leaves, the group counts 2 of 3
    and would until the stage's deadline. The stage fails at the platform's next look, named STOPPED; the
    move's result says so; deferred, every trigger of the move carries the controller's name and the baseline's
    instances, never a command."""
    app = _application(supervisor, kafka.bootstrap_servers, unique, tmp_path, tag="-fd" if deferred else "-fp")
    context = {"ti": FleetTI()}
    try:
        name, _ = _started(app, controllers, context, native, protocol="classic")
        unit = {"app": "orders", "team": "commerce", "wave": 1, "path": "offline", "app_controller": name,
                "app_controller_args": {}, "expected_instances": app.instances,
                "groups": [{"group_id": app.group_id, "type": "classic", "live_members": app.instances}]}
        op = KafkaApplicationMigrationOperator(
            task_id="wave_1.migrate", application=unit, kafka_conn_id=kafka_conn,
            snapshot_dir=str(tmp_path / "snapshots"), poll_interval=1, remove_members_after=2,
            empty_settle_seconds=2, empty_timeout_minutes=2, start_timeout_minutes=STAGE_TIMEOUT_MINUTES,
            deferrable=deferred)
        move = Move(op, context, deferred)
        move.start()

        def migrating() -> bool:  # the move's next step is its migrated stage (the start is done)
            progress = context["ti"].xcom.get(PROGRESS_KEY) or {}
            return progress.get("step") == "wait_migrated"

        # the move waits in its migrated stage: the application started on consumer, its members joined
        wait_until(lambda: not move.is_alive() or (
            migrating() and len(native.describe_group(app.group_id).members) == app.instances
            and native.describe_group(app.group_id).type == "consumer"), timeout=240, what="the migrated stage")
        assert move.is_alive(), (move.error, move.result, move.events)
        victim = f"{app.name}:{app.name}_1"
        app.supervisor.run_ctl("stop", victim, check=True)
        stopped_at = time.monotonic()
        move.join(STAGE_TIMEOUT_MINUTES * 60 + 120)
        assert not move.is_alive(), "the move did not end"
        assert isinstance(move.error, AirflowFailException), (move.error, move.result, move.events)
        message = str(move.error)
        result = context["ti"].xcom[RESULT_KEY]
        print(f"figures: an instance stopped by hand (fleet move, migrated stage), "
              f"{'deferred' if deferred else 'poked'}: failed {move.ended - stopped_at:.1f} s after the stop")
        assert "did not hold within its timeout" not in message, message
        assert "lost during the wait" in message and "wait_migrated" in message, message
        assert f"{victim} (STOPPED" in message or f"{victim} (STOPPING" in message, message
        assert f"{app.name}_0" not in message and f"{app.name}_2" not in message, message
        assert result["ok"] is False and "lost during the wait" in result["detail"], result
        if deferred:
            assert move.events[-1]["status"] == "instance_lost", move.events[-1]
            watches = [t["platform_watch"] for t in move.triggers]
            assert all(w is not None and w["controller"] == name for w in watches), watches
            assert [w["rule"] for w in watches][-1] == "lost", watches
            kwargs = json.dumps(move.triggers, default=str)
            assert app.supervisor.ctl not in kwargs and "supervisorctl" not in kwargs, "no command travels"
        else:
            assert not move.triggers, "poked: the move never deferred"
    finally:
        app.remove()

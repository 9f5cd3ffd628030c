"""One application's move through the steps of a migration: the engine of the fleet's per-application task.

:class:`ApplicationMove` runs the steps of :data:`~airflow_provider_kip848.engine.state.PATHS` for every
group of one application (the ownership map's unit), with the same step implementations as the
single-group DAGs' tasks (:mod:`.offsets`, :mod:`.application`, :mod:`.lock`, the controller's
stop/start/roll, the sensors' conditions and instance verdicts). It never waits in a worker:

* the actions (lock, snapshot, stop or roll, restore, start, compare) run in the worker, one after the
  other, each retried after a retriable error (every one is idempotent);
* consecutive waits form one *stage* (after a start: migrated, then lag, for every group) and are followed
  by one :class:`~airflow_provider_kip848.triggers.move.KafkaMoveTrigger`: the task defers once per
  stage, not once per condition and group. A stage is looked at once in the worker first: conditions that
  already hold are not deferred (an Empty group whose instances the platform confirmed gone, after the
  members left behind were forced out at once: only those paired with a stopped or gone instance,
  :mod:`~airflow_provider_kip848.controllers.pairing`; a lag already drained);
* the platform's word (the controller) is asked in the worker when a stage ends: Empty needs no instance
  running; migrated needs every instance of the start running, ready and not restarted since;
* and the platform is watched through the whole stage, every ``platform_check_seconds``
  (:class:`~airflow_provider_kip848.hooks.platform_watch.PlatformWatch`): deferred, by the stage's trigger
  from the triggerer, racing its broker polls; poked (``deferrable=False``, or a triggerer that cannot build
  the controller), by :meth:`ApplicationMove.poke` between its polls. An instance of the start (or roll)
  stopped, exited, restarted or starting again fails an arrival stage at once, named with its state; during
  Empty, an instance running again (against the status after the stop) fails it.

:class:`MoveState` is recorded on the run's snapshot location after every step (``move-<kind>.json``
next to the application's snapshots). A task process that ends without finishing the move (an
executor that loses a resumed deferred task, a worker that dies) is retried by Airflow, and the retry
takes the move up at its recorded step: a migrated application is never counted failed for it, nor
rolled back.

Why over 500 lines: :class:`ApplicationMove` is one state machine. Every step method reads and records the
same :class:`~.state.MoveState`, and where a move defers and resumes is read top to bottom in the order the
steps run; the step implementations themselves are elsewhere (:mod:`.offsets`, :mod:`.application`,
:mod:`.lock`, :mod:`.instance_roll`). Split, the order of the steps would be spread over modules.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.audit_trail import TaskAudit
from airflow_provider_kip848.changecontrol.downtime import downtime_summary
from airflow_provider_kip848.changecontrol.runpaths import path_segment
from airflow_provider_kip848.controllers import ApplicationStatus, ControllerError, NamedController
from airflow_provider_kip848.controllers.pairing import removable
from airflow_provider_kip848.engine.application import last_look
from airflow_provider_kip848.engine.instance_roll import InstanceRollFailed, RollLimits, roll_application
from airflow_provider_kip848.engine.lock import holder_run_ended, lock_holder
from airflow_provider_kip848.engine.offsets import (
    RestoreResult,
    compare_with_snapshot,
    load_snapshot,
    restore_lost_offsets,
    write_snapshot,
)
from airflow_provider_kip848.engine.state import ARRIVALS, WAITS, MoveState, Step, path_of, wait_stage
from airflow_provider_kip848.fleet.results import (
    MIGRATE,
    ROLLBACK,
    ApplicationResult,
    GroupOutcome,
    MoveProgress,
    StepRecord,
)
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.audit import complete_earlier_tries, task_audit
from airflow_provider_kip848.hooks.instances import (
    group_members,
    instances_verdict,
    liveness_window,
    members_pairing,
    named_controller,
)
from airflow_provider_kip848.hooks.members import force_out_members
from airflow_provider_kip848.hooks.platform_watch import PLATFORM_CHECK_SECONDS, PlatformWatch, Rule
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.arguments import require_group_id
from airflow_provider_kip848.kafka.errors import GroupNotFound, InvalidArgument, Kip848Error, ResourceLocked
from airflow_provider_kip848.kafka.lock import ChangeLock
from airflow_provider_kip848.kafka.rules.conditions import (
    UNAVAILABLE_LIMIT_S,
    GroupCondition,
    TaskLog,
    advance_staged,
    is_live,
    pending_condition,
    staged_wait,
)
from airflow_provider_kip848.kafka.rules.lag import (
    MARGIN_FRACTION,
    MARGIN_RECORDS,
    WINDOW_SECONDS,
    baseline_from_snapshot,
)

#: attempts of an action that meets a retriable error (each action is idempotent)
STEP_ATTEMPTS = 3
#: how long past a stage's own timeouts Airflow may keep the task deferred (a safety net: the trigger's own
#: timeouts end the wait first, with the group and the step named)
DEFER_MARGIN_S = 300.0


class StepFailed(Exception):
    """A step did not hold: the application's move ends here, failed, with this message."""


class NotYet(Exception):
    """A stage holds on the broker but the platform is not there yet (an instance not ready): wait on."""


@dataclass(frozen=True)
class UnitGroup:
    """A group of the application as the wave was checked: its type, state and live members then."""

    group_id: str
    type: str | None = None
    state: str | None = None
    live_members: int | None = None


@dataclass(frozen=True)
class Unit:
    """The application to move, as the fleet's recheck hands it over (one mapped task's input)."""

    app: str
    team: str
    path: str
    app_controller: str
    groups: tuple[UnitGroup, ...]
    wave: int = 0
    app_controller_args: Mapping[str, Any] = field(default_factory=dict)  # Any: registry arguments (YAML values)
    expected_instances: int | None = None

    @classmethod
    def from_dict(cls, unit: Any) -> Unit:  # Any: JSON read back (XCom, a file, a response)
        """Strict: a unit without its application, team, path, controller or groups is refused."""
        if not isinstance(unit, Mapping) or not isinstance(unit.get("groups"), list) or not unit["groups"]:
            raise InvalidArgument(f"application must be a mapping with a non-empty 'groups' list, got {unit!r}")
        for key in ("app", "team", "path", "app_controller"):
            if not isinstance(unit.get(key), str) or not unit[key]:
                raise InvalidArgument(f"application {unit.get('app')!r}: {key!r} is missing")
        path_of(MIGRATE, unit["path"])  # online or offline
        groups = []
        for g in unit["groups"]:
            if not isinstance(g, Mapping):
                raise InvalidArgument(f"application {unit['app']!r}: a group must be a mapping, got {g!r}")
            require_group_id(g.get("group_id"))
            groups.append(UnitGroup(g["group_id"], g.get("type"), g.get("state"), g.get("live_members")))
        args = unit.get("app_controller_args") or {}
        if not isinstance(args, Mapping):
            raise InvalidArgument(f"application {unit['app']!r}: app_controller_args must be a mapping")
        return cls(app=unit["app"], team=unit["team"], path=unit["path"], app_controller=unit["app_controller"],
                   groups=tuple(groups), wave=int(unit.get("wave") or 0), app_controller_args=dict(args),
                   expected_instances=unit.get("expected_instances"))

    @property
    def group_ids(self) -> list[str]:
        return [g.group_id for g in self.groups]

    def expected(self, group: UnitGroup) -> int:
        """The live members a group must have on the new protocol: the application's instances when the
        ownership map says, else the live members it had when the wave was checked (at least 1)."""
        return int(self.expected_instances or group.live_members or 1)


def application_folder(snapshot_dir: str, app: str) -> str:
    """``<snapshot_dir>/<app>``: the application's folder of the run's snapshots. The application's name (the
    ownership map's) is one path segment (``runpaths.path_segment``): no name leads out of the run's folder."""
    return f"{str(snapshot_dir).rstrip('/')}/{path_segment(app)}"


def group_snapshot_location(snapshot_dir: str, app: str, group_id: str, suffix: str = ".json") -> str:
    """``<snapshot_dir>/<app>/<group><suffix>``: a group's snapshot before its move (``.validated.json``: the
    wave validation's, after it). A group id (anyone who may create a group chooses it) is one path segment."""
    return f"{application_folder(snapshot_dir, app)}/{path_segment(group_id)}{suffix}"


@dataclass(frozen=True)
class MoveSettings:
    """The run's settings of every move (the fleet DAG's Params)."""

    kafka_conn_id: str
    snapshot_dir: str
    target_protocol: str = "consumer"
    source_protocol: str = "classic"
    poll_interval: float = 5.0
    remove_members_after: float | None = 30.0
    empty_settle_seconds: float = 10.0
    empty_timeout_minutes: float = 10.0
    start_timeout_minutes: float = 10.0
    #: the lag wait (kafka/rules/lag.py): the absolute override (None: the baseline rule over the move's own
    #: snapshot before the change, or the not-growing rule), the margin over a lag before, the window
    max_lag: int | None = None
    lag_margin_fraction: float = MARGIN_FRACTION
    lag_margin_records: int = MARGIN_RECORDS
    lag_window_seconds: float = WINDOW_SECONDS
    audit_log: str | None = None
    #: the online path's first-instance gate, with a controller that can restart one instance (instance_roll)
    first_instance_timeout_minutes: float = 5.0
    #: how often a stage's waits look at the platform (deferred: from the trigger; poked: between polls)
    platform_check_seconds: float = PLATFORM_CHECK_SECONDS


@dataclass(frozen=True)
class Waiting:
    """The move waits: defer on a :class:`~airflow_provider_kip848.triggers.move.KafkaMoveTrigger` with these
    ``waits`` (one entry per group) and ``remove_members_at``, for at most ``timeout_s``, watching the platform
    with ``platform_watch`` (:meth:`PlatformWatch.to_dict`: a registry name and a baseline, never a command;
    None: nothing to watch). ``poke``: the triggerer could not watch it, the worker pokes the stage."""

    waits: list[dict[str, Any]]  # Any: JSON of several shapes
    poll_interval: float
    timeout_s: float
    state: MoveState
    remove_members_at: float | None = None
    platform_watch: dict[str, object] | None = None
    poke: bool = False


@dataclass(frozen=True)
class Finished:
    """The move ended: ``result`` (ok or not) is the application's record for the judge and the report."""

    result: ApplicationResult
    state: MoveState


class ApplicationMove:
    """Moves one application (``kind`` migrate: to ``target_protocol``; rollback: back to ``source_protocol``).

    :param context: the task's Airflow context (the change lock's holder, the audit trail's run).
    :param task_id: the task's id (audit records and the approvals they quote).
    """

    def __init__(self, unit: Unit, kind: str, settings: MoveSettings, *, context: Context, task_id: str,
                 log: TaskLog, on_progress: Callable[[MoveProgress], None] | None = None) -> None:
        if kind not in (MIGRATE, ROLLBACK):
            raise InvalidArgument(f"kind must be {MIGRATE!r} or {ROLLBACK!r}, not {kind!r}")
        self.unit, self.kind, self.settings = unit, kind, settings
        self.context, self.task_id, self.log = context, task_id, log
        #: told where the move stands after every recorded step (the operator pushes it for the fleet view)
        self.on_progress = on_progress
        self._hook: KafkaGroupAdminHook | None = None

    # -- one admin client per task process ---------------------------------------------------------

    def __enter__(self) -> ApplicationMove:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the admin client the steps shared (the next task process makes its own)."""
        if self._hook is not None:
            self._hook.close()
            self._hook = None

    @contextmanager
    def _admin(self) -> Iterator[KafkaGroupAdminHook]:
        """The admin hook every step of this task process uses: one connection lookup and one client for the
        whole move instead of one per step (a task start already costs enough). Closed by :meth:`close`."""
        if self._hook is None:
            self._hook = KafkaGroupAdminHook(self.settings.kafka_conn_id)
        yield self._hook

    # -- where things are -------------------------------------------------------------------------

    @property
    def protocol(self) -> str:
        """The protocol this move ends on."""
        return self.settings.target_protocol if self.kind == MIGRATE else self.settings.source_protocol

    def _base(self) -> str:
        return application_folder(self.settings.snapshot_dir, self.unit.app)

    def snapshot_path(self, group_id: str) -> str:
        return group_snapshot_location(self.settings.snapshot_dir, self.unit.app, group_id)

    def record_location(self) -> str:
        """Where the move's state is recorded after every step (next to the application's snapshots)."""
        return f"{self._base()}/move-{self.kind}.json"

    # -- the record ---------------------------------------------------------------------------------

    def begin(self) -> MoveState:
        """The move as recorded by an earlier task process of this run (taken up at its step), or a new one.
        A recorded move that finished failed starts again (a person cleared the task to try again). On a retry,
        the audit intents an earlier try left without an outcome are completed first."""
        with self._admin() as hook:
            complete_earlier_tries(self.context, self.task_id, hook, self.settings.audit_log, log=self.log)
        location = self.record_location()
        recorded = self.recorded()
        if recorded is not None and (recorded.app, recorded.kind, recorded.path) == (self.unit.app, self.kind,
                                                                                      self.unit.path):
            if recorded.result is None or recorded.result.get("ok") is True:
                recorded.attempts += 1
                if recorded.result is None:
                    recorded.notes.append(f"taken up again at step {recorded.next_step} (task process "
                                          f"{recorded.attempts}): an earlier one ended without finishing the move")
                    self.log.warning("%s: the move was recorded at step %s by an earlier task process; taking it "
                                     "up there (%s).", self.unit.app, recorded.next_step, location)
                return recorded
        return MoveState(app=self.unit.app, kind=self.kind, path=self.unit.path, started_at=time.time())

    def recorded(self) -> MoveState | None:
        """The move's record, or None (none yet, or one that does not parse: kept aside, never used)."""
        location = self.record_location()
        try:
            if not storage.exists(location):
                return None
            return MoveState.from_dict(json.loads(storage.read_text(location)))
        except (Kip848Error, ValueError) as exc:
            self.log.warning("The move record %s is unreadable (%s); moved aside to %s.", location, exc,
                             storage.quarantine(location))
            return None

    def save(self, state: MoveState, pending: Mapping[str, str | None] | None = None) -> None:
        """Record the move (durable: a retry takes it up here), then tell :attr:`on_progress` where it stands
        (``pending``: each group's wait when the move defers on a stage)."""
        storage.write_text(self.record_location(), json.dumps(state.to_dict(), sort_keys=True, default=str))
        if self.on_progress is not None:
            progress = state.progress(self.unit.group_ids, time.time(), pending)
            try:
                self.on_progress(progress)
            except Exception as exc:  # noqa: BLE001 - what the view shows; the record above is the move's truth
                self.log.warning("%s: where the move stands (%s) could not be published for the fleet view: %s",
                                 self.unit.app, progress.step, exc)

    # -- the steps ----------------------------------------------------------------------------------

    def advance(self, state: MoveState) -> Waiting | Finished:
        """Run the steps from where ``state`` stands until the move waits or ends."""
        if state.result is not None:
            return Finished(ApplicationResult.from_dict(state.result), state)
        steps = state.path_steps
        while state.position < len(steps):
            step = steps[state.position]
            if step in WAITS:
                stage = wait_stage(steps, state.position)
                try:
                    outcome = self._begin_stage(state, stage)
                except (StepFailed, Kip848Error, ControllerError, AirflowFailException) as exc:
                    return self._fail(state, step, None, state.wait_started, str(exc))
                if outcome is not None:
                    return outcome
                continue
            started = time.time()
            try:
                detail = self._action_with_retries(state, step)
            except StepFailed as exc:
                return self._fail(state, step, None, started, str(exc))
            except (Kip848Error, ControllerError, AirflowFailException, OSError, ValueError) as exc:
                return self._fail(state, step, None, started, f"{type(exc).__name__}: {exc}")
            state.record(step, started, time.time(), ok=True, detail=detail)
            state.position += 1
            self.save(state)
        return self._finish(state, failed=None)

    def resume(  # Any: JSON of several shapes (XCom, reports)
            self, state: MoveState, event: Mapping[str, Any]) -> Waiting | Finished:
        """Continue after the stage's trigger fired with ``event``."""
        stage = wait_stage(state.path_steps, state.position)
        if not stage:
            raise InvalidArgument(f"{self.unit.app}: resumed at step {state.next_step}, which is not a wait")
        entries = [dict(e) for e in event.get("waits") or []]
        status = event.get("status")
        if status == "met":
            outcome = self._end_stage(state, stage, entries)
            return outcome if outcome is not None else self.advance(state)
        if status == "remove_members_due":
            try:
                self._remove_due(state, entries)
            except (StepFailed, Kip848Error, ControllerError, AirflowFailException) as exc:
                return self._fail_stage(state, entries, Step.WAIT_EMPTY, None, str(exc))
            return self._waiting(state, stage, entries, remove=False)
        step = Step(str(event.get("step") or stage[0]))
        group_id = event.get("group_id")
        if status == "platform_unwatched":  # the triggerer cannot ask the platform: the worker pokes the stage
            self.log.warning("%s: %s; the rest of the stage pokes in this worker, which asks the platform every "
                             "%g s.", self.unit.app, event.get("found"), self.settings.platform_check_seconds)
            note = f"{event.get('found')}: the rest of the stage poked in a worker, watching the platform there"
            if note not in state.notes:
                state.notes.append(note)
            removed = any((e.get("wait") or {}).get("removed") for e in entries)
            return replace(self._waiting(state, stage, entries, remove=not removed), poke=True)
        if status == "instance_lost":
            detail = (f"{step} of {group_id}: the platform shows an instance of the application lost during the "
                      f"wait: {event.get('found')}")
            self.log.warning("%s: %s", self.unit.app, detail)
            return self._fail_stage(state, entries, step, group_id, detail)
        if status == "timeout":
            detail = (f"{step} of {group_id}: did not hold within its timeout (last seen: "
                      f"{event.get('summary')})")
        else:
            detail = f"{step} of {group_id}: {event.get('message', event)}"
        return self._fail_stage(state, entries, step, group_id, detail)

    # -- stages (consecutive waits, one deferral) ---------------------------------------------------

    def _timeout_s(self, step: Step) -> float:
        minutes = (self.settings.empty_timeout_minutes if step is Step.WAIT_EMPTY
                   else self.settings.start_timeout_minutes)
        return float(minutes) * 60.0

    def _condition(self, state: MoveState, group: UnitGroup, step: Step) -> GroupCondition:
        if step is Step.WAIT_EMPTY:  # confirmed gone by the platform: nothing can rejoin, no settle window
            settle = 0.0 if state.gone is True else float(self.settings.empty_settle_seconds)
            # a fleet's groups are the ones the cluster listed when the wave was planned (and the migration's
            # snapshot described): one gone by now was deleted by the coordinator (Empty, no offsets)
            return GroupCondition("empty", settle_s=settle, allow_absent=True)
        if step is Step.WAIT_LAG:
            return GroupCondition("lag", max_lag=self.settings.max_lag, baseline=self._lag_baseline(group),
                                  margin_fraction=self.settings.lag_margin_fraction,
                                  margin_records=self.settings.lag_margin_records,
                                  window_s=self.settings.lag_window_seconds)
        protocol = self.settings.target_protocol if step is Step.WAIT_MIGRATED else self.settings.source_protocol
        key = f"{group.group_id}:{protocol}"
        if key not in state.liveness:  # read once in a worker, then carried with the state
            with self._controller() as controller:
                config = controller.config(protocol) if protocol == "classic" else None
            with self._admin() as hook:
                state.liveness[key], _ = liveness_window(hook, group.group_id, protocol, config)
        return GroupCondition("migrated", group_type=protocol, min_members=self.unit.expected(group),
                              liveness_s=float(state.liveness[key]))

    def _lag_baseline(self, group: UnitGroup) -> dict[str, int | None] | None:
        """Each partition's lag in the move's snapshot before the change (the lag wait's baseline); None with
        ``max_lag`` (the override needs none) or when the snapshot cannot be read: the not-growing rule then,
        said in the log and in the wait's summary (never "lag 0")."""
        if self.settings.max_lag is not None:
            return None
        try:
            return baseline_from_snapshot(load_snapshot(self.snapshot_path(group.group_id)))
        except Kip848Error as exc:
            self.log.warning("Group %s: no lag baseline (%s); its lag wait uses the not-growing rule alone.",
                             group.group_id, exc)
            return None

    def _entries(self, state: MoveState, stage: tuple[Step, ...], started: float,
                 removed: Mapping[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
        removed = removed or {}
        return [staged_wait(g.group_id, [(s.value, self._condition(state, g, s), self._timeout_s(s)) for s in stage],
                            started=started, wait={"removed": removed[g.group_id]} if removed.get(g.group_id) else None)
                for g in self.unit.groups]

    def _begin_stage(self, state: MoveState, stage: tuple[Step, ...]) -> Waiting | Finished | None:
        """Start a stage: members left behind forced out at once when the platform confirmed every instance
        gone, one look in the worker, then the deferral for whatever does not hold yet (None: it all held,
        the stage is recorded and the move goes on; Finished: the platform refused it)."""
        if state.wait_started is None:
            state.wait_started = time.time()
        removed: dict[str, list[dict[str, Any]]] = {}
        if (Step.WAIT_EMPTY in stage and state.gone is True and self.settings.remove_members_after is not None):
            removed = self._force_out_listed(state)
        entries = self._entries(state, stage, state.wait_started, removed)
        self._first_look(entries)
        if all(pending_condition(e) is None for e in entries):
            return self._end_stage(state, stage, entries)
        return self._waiting(state, stage, entries, remove=True)

    def _first_look(self, entries: list[dict[str, Any]]) -> None:
        """Each group through the conditions that already hold, in the worker (no deferral for those). Any doubt
        (an error, a coordinator that does not answer) is left to the deferred wait and its failover handling."""
        try:
            with self._admin() as hook:
                evaluate = partial(evaluate_condition, hook.get_conn())
                for entry in entries:
                    outcome = advance_staged(entry, evaluate, UNAVAILABLE_LIMIT_S, self.log, time.time)
                    if outcome != "waiting":
                        return
        except Exception as exc:  # noqa: BLE001 - not established here: the trigger waits for it
            self.log.info("%s: first look not established in the worker (%s); deferring.", self.unit.app, exc)

    def _waiting(self, state: MoveState, stage: tuple[Step, ...], entries: list[dict[str, Any]], *,
                 remove: bool) -> Waiting:
        started = float(state.wait_started or time.time())
        remove_at = None
        after = self.settings.remove_members_after
        if remove and Step.WAIT_EMPTY in stage and after is not None and state.gone is not True:
            remove_at = started + float(after)
        self.log.info("%s: waiting (deferred) for %s of %s", self.unit.app, ", ".join(stage),
                      ", ".join(e["group_id"] for e in entries if pending_condition(e) is not None))
        state.deferrals += 1
        self.save(state, pending={e["group_id"]: (pending_condition(e) or {}).get("step") for e in entries})
        watch = self._stage_watch(state, stage)
        return Waiting(waits=entries, poll_interval=float(self.settings.poll_interval),
                       timeout_s=sum(self._timeout_s(s) for s in stage) + DEFER_MARGIN_S, state=state,
                       remove_members_at=remove_at, platform_watch=watch.to_dict() if watch is not None else None)

    def _stage_watch(self, state: MoveState, stage: tuple[Step, ...]) -> PlatformWatch | None:
        """What a stage watches on the platform while it waits: an arrival stage, the instances of the start or
        roll (rule ``lost``); the Empty stage, an instance running again since the stop (rule ``appeared``).
        None when the baseline is missing or the controller could not tell it (nothing to compare with)."""
        rule: Rule
        if ARRIVALS & set(stage):
            rule = "lost"
        elif Step.WAIT_EMPTY in stage:
            rule = "appeared"
        else:
            return None
        return PlatformWatch.of(self.unit.app_controller, self.unit.app_controller_args, state.baseline, rule,
                                every_s=float(self.settings.platform_check_seconds))

    def poke(self, waiting: Waiting) -> dict[str, Any]:  # Any: the trigger's event shapes (MoveTriggerEvent)
        """The stage polled in this worker (``deferrable=False``, or a triggerer that cannot build the
        controller) until it ends: the broker every ``poll_interval``, the platform every
        ``platform_check_seconds`` between polls. Returns the event the stage's trigger would have fired (same
        statuses, same messages), for :meth:`resume`."""
        waits = [dict(w, met=list(w.get("met") or []), wait=dict(w.get("wait") or {})) for w in waiting.waits]
        watch = PlatformWatch.from_dict(waiting.platform_watch)
        looks = {"looks": 0, "failed": 0, "where": "worker"}
        looked_at, polls = 0.0, 0

        def event(status: str, **more: object) -> dict[str, Any]:  # Any: as above
            pending = next((e for e in waits if pending_condition(e) is not None), None)
            where = ({"group_id": pending["group_id"], "step": (pending_condition(pending) or {}).get("step")}
                     if pending is not None else {})
            return {"status": status, "waits": waits, "polls": polls, "carry": {}, "platform": dict(looks),
                    **where, **more}

        while True:
            if watch is not None and time.time() - looked_at >= watch.every_s:
                looked_at = time.time()
                found = self._look(watch, looks)
                if found is not None:
                    return event("instance_lost", found=found)
            polls += 1
            with self._admin() as hook:
                evaluate = partial(evaluate_condition, hook.get_conn())
                for entry in waits:
                    outcome = advance_staged(entry, evaluate, UNAVAILABLE_LIMIT_S, self.log, time.time)
                    if isinstance(outcome, Exception):
                        return event("error", message=str(outcome), group_id=entry["group_id"],
                                     step=(pending_condition(entry) or {}).get("step"),
                                     members=getattr(outcome, "members", None))
                    if outcome == "broken":
                        self.close()  # a new client at the next poll
                        break
            if all(pending_condition(e) is None for e in waits):
                return event("met")
            now = time.time()
            for entry in waits:
                spec = pending_condition(entry)
                if spec is not None and now >= float(entry["step_started"]) + float(spec["timeout_s"]):
                    return event("timeout", group_id=entry["group_id"], step=spec["step"],
                                 summary=entry.get("last") or "never evaluated")
            if waiting.remove_members_at is not None and now >= waiting.remove_members_at and any(
                    (pending_condition(e) or {}).get("condition", {}).get("kind") == "empty" for e in waits):
                return event("remove_members_due")
            pause = float(waiting.poll_interval)
            if watch is not None:
                pause = min(pause, max(0.0, looked_at + watch.every_s - time.time()))
            time.sleep(pause)

    def _look(self, watch: PlatformWatch, looks: dict[str, Any]) -> str | None:  # Any: counters and a word
        """One look at the platform from the worker: what fails the stage (the instances named with their state),
        or None. A look that fails in a way a retry may not repeat is counted and asked again next time."""
        try:
            named = watch.resolve()
        except Kip848Error as exc:  # a name or argument the registry refuses: bad input, never retried
            raise StepFailed(str(exc)) from exc
        try:
            found = watch.look(named)
        except ControllerError as exc:
            if not exc.retriable:
                raise StepFailed(f"the platform could not be asked: {exc}") from exc
            looks["failed"] += 1
            self.log.warning("%s: a look at the platform (%s) failed, asking again in %g s: %s", self.unit.app,
                             watch.describe(), watch.every_s, exc)
            return None
        finally:
            named.close()
        looks["looks"] += 1
        return found

    def _end_stage(self, state: MoveState, stage: tuple[Step, ...],
                   entries: list[dict[str, Any]]) -> Waiting | Finished | None:
        """Every group passed every condition of the stage on the broker: the platform's word, then the
        records. None: the stage is done and the move goes on; Waiting: an instance is not ready yet (the
        stage waits on, within its deadline); Finished: the platform refused it."""
        try:
            checked = self._platform_check(state, stage)
        except NotYet as exc:
            self.log.info("%s: %s; waiting on.", self.unit.app, exc)
            again = self._entries(state, stage, float(state.wait_started or time.time()))
            return self._waiting(state, stage, again, remove=False)
        except (StepFailed, Kip848Error, ControllerError, AirflowFailException) as exc:
            return self._fail_stage(state, entries, stage[-1], None, str(exc))
        for entry in entries:
            for met in entry.get("met") or []:
                detail = str(met.get("summary"))
                if checked and Step(met["step"]) in ARRIVALS | {Step.WAIT_EMPTY}:
                    detail += f"; {checked}"
                state.record(Step(met["step"]), met.get("started_at"), float(met["ended_at"]), ok=True,
                             detail=detail, group_id=entry["group_id"])
        state.position += len(stage)
        state.wait_started = None
        self.save(state)
        return None

    def _fail_stage(self, state: MoveState, entries: list[dict[str, Any]], step: Step, group_id: str | None,
                    detail: str) -> Finished:
        for entry in entries:
            for met in entry.get("met") or []:
                state.record(Step(met["step"]), met.get("started_at"), float(met["ended_at"]), ok=True,
                             detail=str(met.get("summary")), group_id=entry["group_id"])
        return self._fail(state, step, group_id, state.wait_started, detail)

    def _platform_check(self, state: MoveState, stage: tuple[Step, ...]) -> str:
        """Once a stage holds on the broker: the platform's word. Empty needs no instance running (one that
        runs rejoins); migrated and back need every instance of the start running, none restarted since."""
        out = []
        with self._controller() as controller:
            if Step.WAIT_EMPTY in stage:
                status = controller.status()
                if status.gone is False:
                    raise StepFailed(f"the group is empty, but the platform shows {status.summary()}: such an "
                                     "instance rejoins at its next heartbeat or poll")
                if not status.gone:
                    out.append(f"the controller cannot tell whether instances exist ({status.reason})")
            if ARRIVALS & set(stage):
                baseline = ApplicationStatus.from_dict(state.baseline)
                expected = (len(baseline.running) if baseline is not None and baseline.known
                            else int(self.unit.expected_instances or 1))
                verdict = instances_verdict(controller, expected=expected, baseline=state.baseline)
                if verdict.outcome == "pending":  # an instance not ready yet: the wait goes on (as the sensors')
                    raise NotYet(verdict.message)
                if verdict.outcome == "failed":
                    raise StepFailed(verdict.message)
                out.append(verdict.message)
        return "; ".join(out)

    def _force_out_listed(self, state: MoveState) -> dict[str, list[dict[str, Any]]]:
        """The platform confirmed every instance gone: the members its groups still list that are paired with a
        stopped or gone instance were left behind (a Streams instance that closed without leaving, a crashed
        one); forced out now, audited. The others are left to the broker (:meth:`_paired_removal`)."""
        removed: dict[str, list[dict[str, Any]]] = {}
        with self._controller() as controller:
            status = controller.status()
        for g in self.unit.group_ids:
            chosen = self._paired_removal(state, g, status)
            if chosen:
                removed[g] = force_out_members(self.context, self.task_id, self.settings.kafka_conn_id, g,
                                               self.settings.audit_log, 0, state.notes, self.log, member_ids=chosen,
                                               why="their instances stopped or gone, as the platform says")
                state.removed += removed[g]
        return removed

    def _paired_removal(self, state: MoveState, group_id: str, status: ApplicationStatus) -> list[str]:
        """The members of ``group_id`` that may be forced out on the platform's word: those the pairing
        (:mod:`~airflow_provider_kip848.controllers.pairing`, with the status before the stop for instances
        gone since) matches with an instance ``status`` shows stopped or gone. The others are named in the
        notes and left to the broker's session timeout: never forced out on the platform's word."""
        with self._admin() as hook:
            members = group_members(hook, group_id)
        if not members:
            return []
        pairing = members_pairing(members, status, earlier=state.before)
        if not pairing.mappable:
            note = (f"{group_id}: members not forced out: {pairing.basis}; they leave when their session times "
                    "out")
        elif pairing.unaccounted:
            note = (f"{group_id}: {pairing.describe()}; only the members of stopped or gone instances are forced "
                    "out, the others are left to the broker")
        else:
            note = ""
        if note and note not in state.notes:
            self.log.warning("%s", note)
            state.notes.append(note)
        return [str(m["member_id"]) for m in removable(pairing)]

    def _remove_due(self, state: MoveState, entries: list[dict[str, Any]]) -> None:
        """``remove_members_after`` passed while a group waits for Empty: force out the members paired with a
        stopped or gone instance when the platform now confirms every instance gone; never while it shows one
        running, never a member no instance accounts for."""
        with self._controller() as controller:
            status = controller.status()
        if status.gone is False:
            raise StepFailed(f"not forcing out the members: the platform still shows {status.summary()}")
        for entry in entries:
            spec = pending_condition(entry)
            if spec is None or spec["condition"]["kind"] != "empty":
                continue
            if status.gone is True:  # only the members paired with a stopped or gone instance
                removed = force_out_members(self.context, self.task_id, self.settings.kafka_conn_id,
                                            entry["group_id"], self.settings.audit_log,
                                            self.settings.remove_members_after, state.notes, self.log,
                                            member_ids=self._paired_removal(state, entry["group_id"], status),
                                            why="their instances stopped or gone, as the platform says")
                state.removed += removed
                entry["wait"] = {**entry.get("wait", {}), "removed": list(entry.get("wait", {}).get("removed")
                                                                          or []) + removed}
            else:
                state.notes.append(f"{entry['group_id']}: members not forced out: the controller cannot tell "
                                   f"whether instances exist ({status.reason}); they leave at their session timeout")

    # -- actions ------------------------------------------------------------------------------------

    def _controller(self) -> NamedController:
        """The application's controller from the deployment's registry (the ownership map names it)."""
        try:
            named = named_controller(self.unit.app_controller, dict(self.unit.app_controller_args))
        except Kip848Error as exc:
            raise StepFailed(str(exc)) from exc
        if named is None:
            raise StepFailed("no app_controller in the ownership map")
        return named

    def _action_with_retries(self, state: MoveState, step: Step) -> str:
        """An action again after a retriable error (a coordinator moving, a broker not answering): every action
        is idempotent (a snapshot already taken is kept, a running application is not started twice, a
        restore puts back only what is lost, a lock is re-entered), so a failover costs a retry."""
        for attempt in range(1, STEP_ATTEMPTS + 1):
            try:
                return self._action(state, step)
            except Kip848Error as exc:
                if not exc.retriable or attempt == STEP_ATTEMPTS:
                    raise
                self.log.warning("%s: %s failed (attempt %d of %d, retriable): %s", self.unit.app, step, attempt,
                                 STEP_ATTEMPTS, exc)
                time.sleep(min(2.0 * attempt, 10.0))
        raise AssertionError("unreachable")  # pragma: no cover

    def _action(self, state: MoveState, step: Step) -> str:
        group_ids = self.unit.group_ids
        if step is Step.LOCK:
            return self._lock(group_ids)
        if step is Step.SNAPSHOT:
            with self._admin() as hook:
                taken = [write_snapshot(hook, g, self.snapshot_path(g), self.log) for g in group_ids]
            return "; ".join(f"{t['group_id']}: {t['committed_partitions']} committed partition(s), lag "
                             f"{t['total_lag']}" + (" (kept the earlier snapshot)" if t["reused"] else "")
                             for t in taken)
        if step is Step.STOP:
            with self._controller() as controller:
                stopped = controller.stop()
            state.gone, state.before = stopped["instances_gone"], stopped.get("before")
            state.baseline = stopped["status"]  # the Empty stage's watch: an instance running again since
            return f"stopped: {stopped['status']['summary']} (instances gone: {stopped['instances_gone']})"
        if step is Step.ROLL:
            limits = RollLimits(first_instance_s=60 * self.settings.first_instance_timeout_minutes,
                                instance_s=60 * self.settings.start_timeout_minutes,
                                poll_s=min(self.settings.poll_interval, 2.0))
            with self._controller() as controller, self._admin() as hook:
                if not (controller.can_roll() or controller.can_roll_instances()):
                    raise StepFailed(f"the controller {self.unit.app_controller} cannot roll: the online path "
                                     "needs a rolling restart; give the application migration: offline")
                try:  # instance by instance (the first-instance gate) where the controller can
                    rolled = roll_application(controller, hook, group_ids, self.settings.target_protocol, limits,
                                              context=self.context, task_id=self.task_id,
                                              audit_log=self.settings.audit_log, log=self.log)
                except InstanceRollFailed as exc:
                    raise StepFailed(exc.what) from exc
            state.baseline = rolled["status"]
            how = "instance by instance, the first one gated" if rolled["mode"] == "by_instance" else "by the platform"
            return f"rolled {how}: {rolled['status']['summary']}"
        if step in (Step.START, Step.START_BACK):
            protocol = self.settings.target_protocol if step is Step.START else self.settings.source_protocol
            with self._admin() as hook:
                last_look(hook, group_ids, protocol)
            with self._controller() as controller:
                started = controller.start(protocol)
            state.baseline = started["status"]
            return f"started on {protocol}: {started['status']['summary']}"
        if step is Step.RESTORE:
            return self._restore(group_ids)
        if step is Step.COMPARE:
            out = []
            with self._admin() as hook:
                for g in group_ids:
                    result = compare_with_snapshot(hook, hook, g, self.snapshot_path(g), self.log)
                    if result.lost():
                        raise StepFailed(f"{g} lost committed offsets on {len(result.lost())} partition(s) "
                                         f"({', '.join(f'{p.topic}:{p.partition}' for p in result.lost()[:10])})")
                    out.append(f"{g}: {result.counts}")
            return "; ".join(out)
        raise InvalidArgument(f"{step} is not an action")  # pragma: no cover

    def _lock(self, group_ids: list[str]) -> str:
        ti = self.context["ti"]
        holder = lock_holder(self.context)
        out = []
        with self._admin() as hook:
            try:
                results = ChangeLock.acquire_all(hook.get_conn(), [f"group:{g}" for g in group_ids], holder,
                                                 is_stale=lambda current: holder_run_ended(ti, current, self.log))
            except ResourceLocked as exc:
                raise StepFailed(f"a group is locked by another change, nothing was changed: {exc}") from exc
        for result in results:
            out.append(f"{result.resource.removeprefix('group:')} "
                       f"({'re-entered' if result.reentered else 'acquired'})")
        return "change lock held on " + ", ".join(out)

    def _restore(self, group_ids: list[str]) -> str:
        out = []
        with self._admin() as hook:
            for g in group_ids:
                # a change to the cluster: audited like any operator's, the intent before the commit
                trail = task_audit(self.context, self.task_id, hook, self.settings.audit_log, log=self.log,
                                   approval_task_ids=(f"{self.task_id.rpartition('.')[0]}.approval",))
                with trail.guard():
                    restored = restore_lost_offsets(hook, hook, g, self.snapshot_path(g), self.log,
                                                    before_send=partial(_intend_restore, trail))
                if restored.restored:  # read back by the commit itself (OffsetsNotConfirmed otherwise)
                    trail.applied(restored.changes()[:1])
                trail.push()
                out.append(restored.describe())
        return "; ".join(out)

    # -- the result ---------------------------------------------------------------------------------

    def _fail(self, state: MoveState, step: Step, group_id: str | None, started: float | None,
              detail: str) -> Finished:
        state.record(step, started, time.time(), ok=False, detail=detail, group_id=group_id)
        return self._finish(state, failed=detail)

    def _finish(self, state: MoveState, *, failed: str | None) -> Finished:
        steps = tuple(state.steps)
        outcomes = self._outcomes(steps, failed)
        if state.changed():
            outcomes = self._with_downtime(outcomes, state.started_at)
        ok = failed is None and all(o.ok for o in outcomes)
        gap_from = gap_to = gap = None
        stop = next((s for s in steps if s.step == Step.STOP and s.ok), None)
        back = [s for s in steps if s.step in ARRIVALS and s.ok]
        if stop is not None and len(back) == len(self.unit.groups):
            gap_from, gap_to = stop.started_at, max(s.ended_at or s.started_at for s in back)
            gap = gap_to - gap_from
        ti = self.context["ti"]
        result = ApplicationResult(
            app=self.unit.app, team=self.unit.team, wave=self.unit.wave, kind=self.kind, path=self.unit.path, ok=ok,
            groups=outcomes, steps=steps, started_at=state.started_at, ended_at=time.time(), gap_s=gap,
            gap_from=gap_from, gap_to=gap_to,
            detail=failed or ("; ".join(o.detail for o in outcomes if not o.ok) if not ok else ""),
            map_index=getattr(ti, "map_index", None), task_id=self.task_id)
        state.result = result.to_dict()
        self.save(state)
        return Finished(result, state)

    def _with_downtime(self, outcomes: tuple[GroupOutcome, ...], since: float) -> tuple[GroupOutcome, ...]:
        """Each touched group's settle time, rebalances and longest commit stall since the move began, read
        from its own records (what the single-group DAGs' reports show, in a few figures per group). A group
        whose records cannot be read says why; it never reads as no downtime, and it does not fail the move:
        the verdict is the group's state, this is its cost."""
        # the plan's facts describe the group before the move: they seed a move's history, never a way back's
        planned = {g.group_id: g for g in self.unit.groups} if self.kind == MIGRATE else {}
        out = []
        with self._admin() as hook:
            for o in outcomes:
                g = planned.get(o.group_id)
                members = g.live_members if g is not None and g.type == "classic" else None
                try:
                    downtime = hook.group_downtime(o.group_id, since, members_before=members,
                                                   state_before=g.state if g is not None and members is not None
                                                   else None, target=self.protocol)
                except Exception as exc:  # noqa: BLE001 - no connection, no answer: this downtime unknown, said so
                    out.append(replace(o, downtime={"error": f"{type(exc).__name__}: {exc}"}))
                    continue
                out.append(replace(o, downtime=downtime_summary(downtime, target=self.protocol)))
        return tuple(out)

    def _outcomes(self, steps: tuple[StepRecord, ...], failed: str | None) -> tuple[GroupOutcome, ...]:
        """Each group as the cluster shows it now (a group that cannot be described is not ok: unknown)."""
        compared = any(s.step == Step.COMPARE and s.ok for s in steps)
        outcomes = []
        with self._admin() as hook:
            for g in self.unit.groups:
                try:
                    desc = hook.describe_group(g.group_id)
                except GroupNotFound:
                    outcomes.append(GroupOutcome(g.group_id, False, type_before=g.type, detail="the group is gone"))
                    continue
                except Exception as exc:  # noqa: BLE001 - unknown, never guessed
                    outcomes.append(GroupOutcome(g.group_id, False, type_before=g.type,
                                                 detail=f"unknown: {type(exc).__name__}: {exc}"))
                    continue
                live = sum(1 for m in desc.members if is_live(m))
                reached = desc.type.value == self.protocol and live >= self.unit.expected(g)
                ok = failed is None and reached and compared
                detail = "" if ok else (failed or f"{desc.type.value} / {desc.state.value} with {live} live member(s)")
                outcomes.append(GroupOutcome(g.group_id, ok, type_before=g.type, type_after=desc.type.value,
                                             state_after=desc.state.value, members_after=live, detail=detail))
        return tuple(outcomes)


def _intend_restore(trail: TaskAudit, planned: RestoreResult) -> None:
    trail.intend(planned.changes())


__all__ = ["ApplicationMove", "Finished", "MoveSettings", "NotYet", "StepFailed", "Unit", "UnitGroup", "Waiting"]

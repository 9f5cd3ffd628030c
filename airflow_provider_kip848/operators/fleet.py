"""``KafkaApplicationMigrationOperator``: one application of a fleet wave, moved (or moved back) whole.

The fleet migration DAG maps this operator over a wave's applications
(dynamic task mapping, one task instance per application). Each instance runs
the single-group DAGs' steps for every group of its application, with the same
building blocks: the offsets snapshot (``operators.offsets``), the
application controller (``controllers``), the last look before a start
(``operators.application``), the deferred group waits of the sensors (the
same :class:`~airflow_provider_kip848.triggers.group.KafkaGroupConditionTrigger`,
so no worker slot is held while a group empties or converts), the forced
removal of members left behind (``sensors.group``), the restore of lost
offsets and the comparison with the snapshot.

Steps (``kind="migrate"``):

* offline path: snapshot each group -> stop the application -> wait until each
  group is Empty (settled; members left behind are forced out after
  ``remove_members_after``) -> restore any lost committed offset -> start with
  ``group.protocol=consumer`` -> wait until each group is a consumer group with
  the expected live members -> wait for the lag to drain -> compare each group's
  offsets with its snapshot;
* online path: snapshot -> the controller's rolling restart (``roll``) with the
  new protocol -> wait migrated -> lag -> compare.

``kind="rollback"`` (an application that failed): stop -> Empty -> restore ->
start on ``classic`` -> wait until each group is classic with its members ->
compare with the snapshot the migration took. The way back always stops the
application: an application that failed half-way is brought to a known state
rather than rolled.

Every instance records an :class:`~airflow_provider_kip848.fleet.results.ApplicationResult`
(steps with their times, each group's outcome, the processing gap) as XCom
``fleet_result``, whether it succeeds or fails, so the wave's judge can count
failures against the error budget; a failed application fails its task
instance (red in the UI) after recording it. The application's groups are
held under the same change lock as the single-group DAGs (``group:<id>``):
a single-group run of one of them refuses to start, and this one fails
(nothing changed) when such a run holds it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.artifacts import artifact_root
from airflow_provider_kip848.changecontrol.audit import audit_location, record_changes
from airflow_provider_kip848.changecontrol.downtime import downtime_summary
from airflow_provider_kip848.controllers import ApplicationStatus, NamedController
from airflow_provider_kip848.fleet.results import MIGRATE, ROLLBACK, ApplicationResult, GroupOutcome, StepRecord
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.instances import instances_verdict, liveness_window, named_controller
from airflow_provider_kip848.hooks.members import force_out_members
from airflow_provider_kip848.kafka.api import evaluate_condition
from airflow_provider_kip848.kafka.arguments import parse_number, require_group_id
from airflow_provider_kip848.kafka.errors import GroupNotFound, Kip848Error, ResourceLocked
from airflow_provider_kip848.kafka.lock import ChangeLock, LockHolder
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition, WaitState, follow, is_live
from airflow_provider_kip848.kafka.rules.offsets import restore_plan
from airflow_provider_kip848.operators.application import last_look
from airflow_provider_kip848.operators.lock import holder_run_ended, run_owner
from airflow_provider_kip848.operators.offsets import compare_with_snapshot, write_snapshot
from airflow_provider_kip848.triggers.group import KafkaGroupConditionTrigger

#: XCom key of every instance's ApplicationResult (success or failure)
RESULT_KEY = "fleet_result"
#: the steps that wait for a group (deferred, one group after the other)
WAITS = ("wait_empty", "wait_migrated", "wait_lag", "wait_back")
_PHASES = {
    (MIGRATE, "offline"): ("lock", "snapshot", "stop", "wait_empty", "restore", "start", "wait_migrated", "wait_lag",
                           "compare"),
    (MIGRATE, "online"): ("lock", "snapshot", "roll", "wait_migrated", "wait_lag", "compare"),
    (ROLLBACK, "offline"): ("lock", "stop", "wait_empty", "restore", "start_back", "wait_back", "compare"),
    (ROLLBACK, "online"): ("lock", "stop", "wait_empty", "restore", "start_back", "wait_back", "compare"),
}
#: attempts of a step that meets a retriable error (each step is idempotent)
STEP_ATTEMPTS = 3
#: the steps after which the application is no longer as it was (a failure from here on needs the way back)
CHANGING_STEPS = ("stop", "roll", "start", "start_back")


class _StepFailed(Exception):
    """A step did not hold: the application's move ends here, failed, with ``detail``."""


class _NotYet(Exception):
    """A wait's broker side holds but the platform is not there yet (an instance not ready): wait on."""


class KafkaApplicationMigrationOperator(BaseOperator):
    """Move one application (all of its groups) to the consumer protocol, or back (``kind="rollback"``).

    :param application: the unit to move (templated; in the fleet DAG, one element of the wave's mapped
        list): ``{app, team, wave, path ("online"/"offline"), app_controller, app_controller_args,
        expected_instances, groups: [{group_id, live_members}]}``.
    :param snapshot_dir: this run's snapshot location; the group's snapshot is
        ``<snapshot_dir>/<app>/<group>.json`` (the rollback compares with the one the migration took).
    :param poll_interval, remove_members_after, empty_settle_seconds, empty_timeout_minutes,
        start_timeout_minutes, max_lag: as in the single-group DAGs (templated).
    """

    template_fields = ("application", "kafka_conn_id", "snapshot_dir", "audit_log", "poll_interval",
                       "remove_members_after", "empty_settle_seconds", "empty_timeout_minutes",
                       "start_timeout_minutes", "max_lag")
    ui_color = "#fdf1e6"

    def __init__(self, *, application: Any, kafka_conn_id: str, snapshot_dir: str, kind: str = MIGRATE,
                 target_protocol: str = "consumer", source_protocol: str = "classic",
                 poll_interval: Any = 5, remove_members_after: Any = 30, empty_settle_seconds: Any = 10,
                 empty_timeout_minutes: Any = 10, start_timeout_minutes: Any = 10, max_lag: Any = 0,
                 audit_log: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kind not in (MIGRATE, ROLLBACK):
            raise ValueError(f"kind must be {MIGRATE!r} or {ROLLBACK!r}, not {kind!r}")
        self.application, self.kafka_conn_id, self.snapshot_dir = application, kafka_conn_id, snapshot_dir
        self.kind, self.target_protocol, self.source_protocol = kind, target_protocol, source_protocol
        self.poll_interval, self.remove_members_after = poll_interval, remove_members_after
        self.empty_settle_seconds, self.empty_timeout_minutes = empty_settle_seconds, empty_timeout_minutes
        self.start_timeout_minutes, self.max_lag, self.audit_log = start_timeout_minutes, max_lag, audit_log

    # -- inputs -------------------------------------------------------------------------------------

    def _unit(self) -> dict[str, Any]:
        unit = self.application
        if not isinstance(unit, dict) or not isinstance(unit.get("groups"), list) or not unit["groups"]:
            raise AirflowFailException(f"application must be a mapping with a non-empty 'groups' list, got {unit!r}")
        for key in ("app", "team", "path", "app_controller"):
            if not isinstance(unit.get(key), str) or not unit[key]:
                raise AirflowFailException(f"application {unit.get('app')!r}: {key!r} is missing")
        if unit["path"] not in ("online", "offline"):
            raise AirflowFailException(f"application {unit['app']!r}: path must be online or offline")
        for group in unit["groups"]:
            require_group_id(group.get("group_id") if isinstance(group, dict) else None)
        return unit

    def _number(self, value: Any, name: str, **kw: Any) -> float:
        try:
            out = parse_number(value, name, **kw)
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        return float(out or 0.0)

    def _expected(self, unit: dict[str, Any], group: dict[str, Any]) -> int:
        """The live members a group must have on the new protocol: the application's instances when the
        ownership map says, else the live members it had when the wave was checked (at least 1)."""
        return int(unit.get("expected_instances") or group.get("live_members") or 1)

    def _snapshot_path(self, unit: dict[str, Any], group_id: str) -> str:
        return f"{str(self.snapshot_dir).rstrip('/')}/{unit['app']}/{group_id}.json"

    def _controller(self, unit: dict[str, Any]) -> NamedController:
        """The application's controller from the deployment's registry (the ownership map names it)."""
        try:
            named = named_controller(unit["app_controller"], unit.get("app_controller_args") or {})
        except Kip848Error as exc:
            raise _StepFailed(str(exc)) from exc
        if named is None:
            raise _StepFailed("no app_controller in the ownership map")
        return named

    # -- the state machine --------------------------------------------------------------------------

    def execute(self, context: Any) -> dict[str, Any]:
        unit = self._unit()
        state = {"phase": 0, "group": 0, "steps": [], "started_at": time.time(), "wait_started": None,
                 "removed": [], "notes": []}
        return self._run(context, unit, state)

    def resume(self, context: Any, event: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        unit = self._unit()
        event = event or {}
        carry = dict(event.get("carry") or {})
        state = carry.get("fleet")
        if not isinstance(state, dict):
            raise AirflowFailException(f"the wait's event carries no state: {event!r}")
        phases = _PHASES[(self.kind, unit["path"])]
        name = phases[state["phase"]]
        group_id = unit["groups"][state["group"]]["group_id"]
        status = event.get("status")
        if status == "met":
            try:
                checked = self._platform_check(unit, state, name)
            except _NotYet as exc:
                self.log.info("%s: %s; waiting on.", unit["app"], exc)
                return self._wait(unit, state, name, group_id, remove=False)
            except (_StepFailed, Kip848Error) as exc:
                return self._fail(context, unit, state, name, group_id, state["wait_started"], str(exc))
            summary = str(event.get("summary")) + (f"; {checked}" if checked else "")
            self._record(state, name, group_id, state["wait_started"], ok=True, detail=summary)
            self._next_group(state, unit)
            return self._run(context, unit, state)
        if status == "remove_members_due":
            try:
                with self._controller(unit) as controller:
                    status_now = controller.status()
                if status_now.gone is False:
                    raise _StepFailed(f"not forcing out the members of {group_id}: the platform still shows "
                                      f"{status_now.summary()}")
                if status_now.gone is True:
                    state["removed"] += force_out_members(context, self.task_id, self.kafka_conn_id, group_id,
                                                          self.audit_log, self.remove_members_after, state["notes"],
                                                          self.log)
                else:
                    state["notes"].append(f"{group_id}: members not forced out: the controller cannot tell whether "
                                          f"instances exist ({status_now.reason}); they leave at their session "
                                          "timeout")
            except Exception as exc:  # noqa: BLE001 - the move fails, recorded
                return self._fail(context, unit, state, name, group_id, state["wait_started"], str(exc))
            return self._wait(unit, state, name, group_id, remove=False)
        detail = (f"{name} of {group_id}: did not hold within its timeout (last seen: {event.get('summary')})"
                  if status == "timeout" else f"{name} of {group_id}: {event.get('message', event)}")
        return self._fail(context, unit, state, name, group_id, state["wait_started"], detail)

    def _platform_check(self, unit: dict[str, Any], state: dict[str, Any], name: str) -> str:
        """Once a wait holds on the broker: the platform's word. Empty needs no instance running (one that runs
        rejoins); migrated and back need every instance of the start running, none restarted since."""
        if name not in ("wait_empty", "wait_migrated", "wait_back"):
            return ""
        with self._controller(unit) as controller:
            if name == "wait_empty":
                status = controller.status()
                if status.gone is False:
                    raise _StepFailed(f"the group is empty, but the platform shows {status.summary()}: such an "
                                      "instance rejoins at its next heartbeat or poll")
                return "" if status.gone else f"the controller cannot tell whether instances exist ({status.reason})"
            baseline = ApplicationStatus.from_dict(state.get("baseline"))
            expected = len(baseline.running) if baseline is not None and baseline.known else int(
                unit.get("expected_instances") or 1)
            verdict = instances_verdict(controller, expected=expected, baseline=state.get("baseline"))
        if verdict.outcome == "pending":  # an instance not ready yet: the wait goes on (as the sensors' does)
            raise _NotYet(verdict.message)
        if verdict.outcome == "failed":
            raise _StepFailed(verdict.message)
        return verdict.message

    def _next_group(self, state: dict[str, Any], unit: dict[str, Any]) -> None:
        state["group"] += 1
        state["wait_started"] = None
        if state["group"] >= len(unit["groups"]):
            state["group"] = 0
            state["phase"] += 1

    def _run(self, context: Any, unit: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        phases = _PHASES[(self.kind, unit["path"])]
        while state["phase"] < len(phases):
            name = phases[state["phase"]]
            if name in WAITS:
                group_id = unit["groups"][state["group"]]["group_id"]
                state["wait_started"] = time.time()
                try:
                    met = self._met_now(unit, state, name, group_id)
                    if met is None:
                        self._condition(unit, state, name)  # anything it must read, read here (not in a resume)
                except (_StepFailed, Kip848Error) as exc:
                    return self._fail(context, unit, state, name, group_id, state["wait_started"], str(exc))
                if met is not None:  # already holds: no deferral (and no resume round trip) for it
                    self._record(state, name, group_id, state["wait_started"], ok=True, detail=met)
                    self._next_group(state, unit)
                    continue
                self._wait(unit, state, name, group_id, remove=name == "wait_empty")
            started = time.time()
            try:
                detail = self._step_with_retries(context, unit, name, state)
            except _StepFailed as exc:
                return self._fail(context, unit, state, name, None, started, str(exc))
            except (Kip848Error, AirflowFailException, OSError, ValueError) as exc:
                return self._fail(context, unit, state, name, None, started, f"{type(exc).__name__}: {exc}")
            self._record(state, name, None, started, ok=True, detail=detail)
            state["phase"] += 1
        return self._finish(context, unit, state, failed=None)

    def _condition(self, unit: dict[str, Any], state: dict[str, Any], name: str) -> GroupCondition:
        group = unit["groups"][state["group"]]
        if name == "wait_empty":  # confirmed gone by the platform: nothing can rejoin, no settle window
            settle = 0.0 if state.get("gone") is True else self._number(self.empty_settle_seconds,
                                                                         "empty_settle_seconds")
            return GroupCondition("empty", settle_s=settle)
        if name == "wait_lag":
            return GroupCondition("lag", max_lag=int(self._number(self.max_lag, "max_lag", integer=True)))
        protocol = self.target_protocol if name == "wait_migrated" else self.source_protocol
        window = state.get("liveness", {}).get(f"{group['group_id']}:{protocol}")
        if window is None:  # read once in a worker, then carried with the state
            with self._controller(unit) as controller:
                config = controller.config(protocol) if protocol == "classic" else None
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                window, _ = liveness_window(hook, group["group_id"], protocol, config)
            state.setdefault("liveness", {})[f"{group['group_id']}:{protocol}"] = window
        return GroupCondition("migrated", group_type=protocol, min_members=self._expected(unit, group),
                              liveness_s=float(window))

    def _met_now(self, unit: dict[str, Any], state: dict[str, Any], name: str, group_id: str) -> str | None:
        """One look in the worker before deferring: the condition's summary when it already holds (a group whose
        lag is already drained, a settle window of 0), else None. Any doubt (an error, a coordinator that
        does not answer) is None: the deferred wait decides, with its own failover handling."""
        condition = self._condition(unit, state, name)
        if (condition.kind == "empty" and condition.settle_s > 0) or condition.liveness_s > 0:
            return None  # a settle or liveness window cannot hold at the first look
        try:
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                result = follow(condition, evaluate_condition(hook.get_conn(), group_id, condition), WaitState(),
                                time.time())
        except Exception as exc:  # noqa: BLE001 - not established here: the trigger waits for it
            self.log.info("%s: %s not established in the worker (%s); deferring.", unit["app"], name, exc)
            return None
        if not result.met:
            return None
        try:
            checked = self._platform_check(unit, state, name)
        except _NotYet:
            return None  # the deferred wait asks again
        return str(result.summary) + (f"; {checked}" if checked else "")

    def _wait(self, unit: dict[str, Any], state: dict[str, Any], name: str, group_id: str, *,
              remove: bool) -> dict[str, Any]:
        poll = self._number(self.poll_interval, "poll_interval")
        minutes = self._number(self.empty_timeout_minutes if name == "wait_empty" else self.start_timeout_minutes,
                               "timeout_minutes")
        condition = self._condition(unit, state, name)
        started = float(state["wait_started"])
        remove_after = (None if self.remove_members_after in (None, "", "None")
                        else self._number(self.remove_members_after, "remove_members_after"))
        if remove_after is not None and state.get("gone") is True:
            remove_after = 0.0  # the platform confirmed every instance gone: force out the leftovers at once
        self.log.info("%s: waiting (deferred) for %s: %s", unit["app"], group_id, condition.describe())
        self.defer(
            trigger=KafkaGroupConditionTrigger(
                kafka_conn_id=self.kafka_conn_id, group_id=group_id, condition=condition.to_dict(),
                poll_interval=poll, timeout_at=started + minutes * 60,
                remove_members_at=started + remove_after if remove and remove_after is not None else None,
                carry={"fleet": state}),
            method_name="resume",
            timeout=timedelta(minutes=minutes + 5),
        )
        raise AssertionError("unreachable: defer() raises")  # pragma: no cover

    def _step_with_retries(self, context: Any, unit: dict[str, Any], name: str, state: dict[str, Any]) -> str:
        """A step again after a retriable error (a coordinator moving, a broker not answering): every step is
        idempotent (a snapshot already taken is kept, a running application is not started twice, a restore
        puts back only what is lost, a lock is re-entered), so a failover costs a retry, not the application."""
        for attempt in range(1, STEP_ATTEMPTS + 1):
            try:
                return self._step(context, unit, name, state)
            except Kip848Error as exc:
                if not exc.retriable or attempt == STEP_ATTEMPTS:
                    raise
                self.log.warning("%s: %s failed (attempt %d of %d, retriable): %s", unit["app"], name, attempt,
                                 STEP_ATTEMPTS, exc)
                time.sleep(min(2.0 * attempt, 10.0))
        raise AssertionError("unreachable")  # pragma: no cover

    def _step(self, context: Any, unit: dict[str, Any], name: str, state: dict[str, Any]) -> str:
        """One step over the whole application (every group in turn); returns what it did."""
        group_ids = [g["group_id"] for g in unit["groups"]]
        if name == "lock":
            return self._lock(context, group_ids)
        if name == "snapshot":
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                taken = [write_snapshot(hook, g, self._snapshot_path(unit, g), self.log) for g in group_ids]
            return "; ".join(f"{t['group_id']}: {t['committed_partitions']} committed partition(s), lag "
                             f"{t['total_lag']}" + (" (kept the earlier snapshot)" if t["reused"] else "")
                             for t in taken)
        if name == "stop":
            with self._controller(unit) as controller:
                stopped = controller.stop()
            state["gone"] = stopped["instances_gone"]
            return f"stopped: {stopped['status']['summary']} (instances gone: {stopped['instances_gone']})"
        if name == "roll":
            with self._controller(unit) as controller:
                if not controller.can_roll():
                    raise _StepFailed(f"the controller {unit['app_controller']} cannot roll: the online path needs "
                                      "a rolling restart; give the application migration: offline")
                rolled = controller.roll(self.target_protocol)
            state["baseline"] = rolled["status"]
            return f"rolled: {rolled['status']['summary']}"
        if name in ("start", "start_back"):
            protocol = self.target_protocol if name == "start" else self.source_protocol
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                last_look(hook, group_ids, protocol)
            with self._controller(unit) as controller:
                started = controller.start(protocol)
            state["baseline"] = started["status"]
            return f"started on {protocol}: {started['status']['summary']}"
        if name == "restore":
            return self._restore(context, unit, group_ids)
        if name == "compare":
            out = []
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                for g in group_ids:
                    result = compare_with_snapshot(hook, hook, g, self._snapshot_path(unit, g), self.log)
                    if result.lost():
                        raise _StepFailed(f"{g} lost committed offsets on {len(result.lost())} partition(s) "
                                          f"({', '.join(f'{p.topic}:{p.partition}' for p in result.lost()[:10])})")
                    out.append(f"{g}: {result.counts}")
            return "; ".join(out)
        raise AirflowFailException(f"unknown step {name!r}")  # pragma: no cover

    def _lock(self, context: Any, group_ids: list[str]) -> str:
        ti = context["ti"]
        holder = LockHolder(owner=run_owner(context), dag_id=ti.dag_id, run_id=ti.run_id,
                            triggered_by=getattr(context.get("dag_run"), "triggering_user_name", None))
        out = []
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            for g in group_ids:
                try:
                    result = ChangeLock(hook.get_conn(), f"group:{g}").acquire(
                        holder, is_stale=lambda current: holder_run_ended(ti, current, self.log))
                except ResourceLocked as exc:
                    raise _StepFailed(f"{g} is locked by another change, nothing was changed: {exc}") from exc
                out.append(f"{g} ({'re-entered' if result.reentered else 'acquired'})")
        return "change lock held on " + ", ".join(out)

    def _restore(self, context: Any, unit: dict[str, Any], group_ids: list[str]) -> str:
        out = []
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            for g in group_ids:
                comparison = compare_with_snapshot(hook, hook, g, self._snapshot_path(unit, g), self.log)
                plan = restore_plan(comparison)
                if not plan:
                    out.append(f"{g}: nothing lost")
                    continue
                before = {str(tp): c.current for c in comparison.partitions
                          for tp in plan if (c.topic, c.partition) == (tp.topic, tp.partition)}
                hook.alter_group_offsets(g, plan)
                record_changes(context, self.task_id,
                               [("offsets", g, before, {str(tp): o for tp, o in sorted(plan.items())})],
                               admin=hook, location=audit_location(self.audit_log, hook.extra("audit_log"),
                                                                   artifact_root(None, self.kafka_conn_id)),
                               approval_task_ids=(f"{self.task_id.rpartition('.')[0]}.approval",), log=self.log)
                out.append(f"{g}: restored {len(plan)} partition(s)")
        return "; ".join(out)

    # -- the result ---------------------------------------------------------------------------------

    @staticmethod
    def _record(state: dict[str, Any], name: str, group_id: str | None, started: float | None, *, ok: bool,
                detail: str) -> None:
        state["steps"].append(StepRecord(step=name, group_id=group_id, started_at=float(started or time.time()),
                                         ended_at=time.time(), ok=ok, detail=detail[:2000]).to_dict())

    def _fail(self, context: Any, unit: dict[str, Any], state: dict[str, Any], name: str, group_id: str | None,
              started: float | None, detail: str) -> dict[str, Any]:
        self._record(state, name, group_id, started, ok=False, detail=detail)
        return self._finish(context, unit, state, failed=detail)

    def _finish(self, context: Any, unit: dict[str, Any], state: dict[str, Any], *,
                failed: str | None) -> dict[str, Any]:
        steps = tuple(StepRecord.from_dict(s) for s in state["steps"])
        protocol = self.target_protocol if self.kind == MIGRATE else self.source_protocol
        outcomes = self._outcomes(unit, steps, protocol, failed)
        if any(s.step in CHANGING_STEPS for s in steps):
            outcomes = self._with_downtime(unit, outcomes, float(state["started_at"]), protocol)
        ok = failed is None and all(o.ok for o in outcomes)
        gap_from = gap_to = gap = None
        stop = next((s for s in steps if s.step == "stop" and s.ok), None)
        back = [s for s in steps if s.step in ("wait_migrated", "wait_back") and s.ok]
        if stop is not None and len(back) == len(unit["groups"]):
            gap_from, gap_to = stop.started_at, max(s.ended_at or s.started_at for s in back)
            gap = gap_to - gap_from
        ti = context["ti"]
        result = ApplicationResult(
            app=unit["app"], team=unit["team"], wave=int(unit.get("wave") or 0), kind=self.kind, path=unit["path"],
            ok=ok, groups=outcomes, steps=steps, started_at=float(state["started_at"]), ended_at=time.time(),
            gap_s=gap, gap_from=gap_from, gap_to=gap_to,
            detail=failed or ("; ".join(o.detail for o in outcomes if not o.ok) if not ok else ""),
            map_index=getattr(ti, "map_index", None), task_id=self.task_id).to_dict()
        ti.xcom_push(key=RESULT_KEY, value=result)
        if not ok:
            raise AirflowFailException(f"{unit['app']}: {result['detail']}")
        self.log.info("%s: every group %s (%s)", unit["app"],
                      "migrated" if self.kind == MIGRATE else "back on classic",
                      ", ".join(g.group_id for g in outcomes))
        return result

    def _with_downtime(self, unit: dict[str, Any], outcomes: tuple[GroupOutcome, ...], since: float,
                       protocol: str) -> tuple[GroupOutcome, ...]:
        """Each touched group's settle time, rebalances and longest commit stall since the move began, read
        from its own records (what the single-group DAGs' reports show, in a few figures per group). A group
        whose records cannot be read says why; it never reads as no downtime, and it does not fail the move:
        the verdict is the group's state, this is its cost."""
        # the plan's facts describe the group before the move: they seed a move's history, never a way back's
        planned = {g["group_id"]: g for g in unit["groups"]} if self.kind == MIGRATE else {}
        out = []
        try:
            hook = KafkaGroupAdminHook(self.kafka_conn_id)
        except Exception as exc:  # noqa: BLE001 - no connection: every downtime unknown, said so
            return tuple(replace(o, downtime={"error": f"{type(exc).__name__}: {exc}"}) for o in outcomes)
        with hook:
            for o in outcomes:
                g = planned.get(o.group_id) or {}
                members = g.get("live_members") if g.get("type") == "classic" else None
                try:
                    downtime = hook.group_downtime(o.group_id, since, members_before=members,
                                                   state_before=g.get("state") if members is not None else None,
                                                   target=protocol)
                except Kip848Error as exc:
                    out.append(replace(o, downtime={"error": f"{type(exc).__name__}: {exc}"}))
                    continue
                out.append(replace(o, downtime=downtime_summary(downtime, target=protocol)))
        return tuple(out)

    def _outcomes(self, unit: dict[str, Any], steps: tuple[StepRecord, ...], protocol: str,
                  failed: str | None) -> tuple[GroupOutcome, ...]:
        """Each group as the cluster shows it now (a group that cannot be described is not ok: unknown)."""
        compared = any(s.step == "compare" and s.ok for s in steps)
        outcomes = []
        try:
            hook = KafkaGroupAdminHook(self.kafka_conn_id)
        except Exception as exc:  # noqa: BLE001 - no connection: every group unknown
            return tuple(GroupOutcome(g["group_id"], False, detail=f"unknown: {exc}") for g in unit["groups"])
        with hook:
            for g in unit["groups"]:
                gid = g["group_id"]
                try:
                    desc = hook.describe_group(gid)
                except GroupNotFound:
                    outcomes.append(GroupOutcome(gid, False, type_before=g.get("type"), detail="the group is gone"))
                    continue
                except Exception as exc:  # noqa: BLE001 - unknown, never guessed
                    outcomes.append(GroupOutcome(gid, False, type_before=g.get("type"),
                                                 detail=f"unknown: {type(exc).__name__}: {exc}"))
                    continue
                live = sum(1 for m in desc.members if is_live(m))
                reached = desc.type.value == protocol and live >= self._expected(unit, g)
                ok = failed is None and reached and compared
                detail = "" if ok else (failed or f"{desc.type.value} / {desc.state.value} with {live} live member(s)")
                outcomes.append(GroupOutcome(gid, ok, type_before=g.get("type"), type_after=desc.type.value,
                                             state_after=desc.state.value, members_after=live, detail=detail))
        return tuple(outcomes)


def changed(result: dict[str, Any]) -> bool:
    """The application was touched (stopped, rolled or started): a failure from there needs the way back."""
    return any(s.get("step") in CHANGING_STEPS for s in result.get("steps") or [])


__all__ = ["CHANGING_STEPS", "RESULT_KEY", "WAITS", "KafkaApplicationMigrationOperator", "changed"]

"""The fleet migration's runs as the fleet view shows them: read from Airflow's metadata DB, then summarised.

The fleet migration DAG (``kip848_fleet_migration``) records its progress in its task instances and XComs:

* ``plan`` returns ``{"plan": WavePlan.to_dict(), "markdown", "types_before", ...}``;
* wave slot ``k`` is the task group ``wave_{k}``: ``open`` (skipped when the plan has no wave ``k`` or an
  earlier wave stopped the run), ``approval`` (human in the loop; its answer in the XCom ``decision``),
  ``recheck`` (returns the applications to move, one unit each: a fresh inventory may find some already
  migrated), ``migrate`` (mapped over the recheck's units: one map index per application, each pushing its
  :class:`~airflow_provider_kip848.fleet.results.ApplicationResult` under the XCom key ``fleet_result``,
  failed or not), ``judge`` (returns the :class:`~airflow_provider_kip848.fleet.results.WaveRecord`, pushes
  the units to send back as ``rollback_units``), ``to_roll_back`` and ``rollback`` (mapped over those units,
  ``fleet_result`` of kind ``rollback``);
* ``report``.

:func:`read_runs` reads the latest runs of the DAG (one query for the runs, one for their task instances,
one for the XComs the view needs: the plan, the approvals' answers, the rechecks' units, the judges' records
and units to send back, and the ``fleet_result`` of each mapped task instance) inside the API server, with
Airflow's own models and session. :func:`runs_summary` turns those facts into what the page shows (pure, no
I/O): per run its plan's waves, each wave's status (:data:`WAVE_STATUSES`, derived from its task instances,
its approval's answer and the judge's record), and per application and group its progress.

What is not recorded stays unknown: a run without a plan XCom is "plan not recorded" (never a run of zero
waves), an XCom that does not parse is shown with its error, a task instance that does not exist is
"not created".

An application's mapped task instance is found by the ``app`` of its ``fleet_result``, else by its rendered
map index when that is the application's name, else by its position in what the task maps over: the
recheck's units (``migrate``) or the judge's units to send back (``rollback``), in order; without those,
the wave's applications in plan order, and the verdict's failed applications.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from airflow_provider_kip848.changecontrol.approvals import APPROVING_OPTIONS
from airflow_provider_kip848.fleet.names import (
    APPROVAL,
    DECISION_KEY,
    FLEET_DAG_ID,
    JUDGE,
    MIGRATE_TASK,
    OPEN,
    PLAN_TASK,
    RECHECK,
    REPORT_TASK,
    RESULT_KEY,
    RETURN_KEY,
    ROLLBACK_TASK,
    ROLLBACK_UNITS_KEY,
    WAVE_TASKS,
    WAVE_XCOMS,
    wave_group,
    wave_task,
)
from airflow_provider_kip848.fleet.results import ROLLBACK, ApplicationResult, WaveRecord
from airflow_provider_kip848.kafka.errors import InvalidArgument

#: a wave's status -> what the page says
WAVE_STATUSES = {
    "not_reached": "not reached",
    "waiting_for_approval": "waiting for approval",
    "running": "running",
    "done_ok": "done ok",
    "done_with_failures": "done with failures",
    "stopped_by_budget": "stopped by budget",
    "rejected": "rejected",
    "stopped": "stopped",
    "unknown": "unknown",
}
#: task instance states in which a task is on its way (not finished)
ACTIVE_STATES = frozenset({"scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule",
                           "restarting", "awaiting_input"})
FAILED_STATES = frozenset({"failed", "upstream_failed"})
NOT_RUN_STATES = frozenset({"skipped", "removed", "upstream_failed"})
#: what the page says for a task instance with no state, for one that does not exist, and for an application's
#: mapped task instance while its task is not expanded yet (only its map index -1 exists)
NO_STATUS, NOT_CREATED, NOT_MAPPED = "no status", "not created", "not mapped yet"
HASH_SHORT = 12


# -- the facts (what the DB holds) --------------------------------------------------------------


@dataclass(frozen=True)
class TaskFact:
    """One task instance: ``state`` None is Airflow's "no status" (created, not scheduled yet)."""

    task_id: str
    map_index: int
    state: str | None
    try_number: int = 0
    start_date: datetime | None = None
    end_date: datetime | None = None
    rendered_map_index: str | None = None


@dataclass(frozen=True)
class RunFacts:
    """One DAG run with its task instances and the XComs the view reads ((task_id, map_index, key) -> value)."""

    dag_id: str
    run_id: str
    state: str | None
    run_type: str | None = None
    run_after: datetime | None = None
    logical_date: datetime | None = None
    start_date: datetime | None = None
    end_date: datetime | None = None
    triggering_user: str | None = None
    tasks: tuple[TaskFact, ...] = ()
    xcoms: Mapping[tuple[str, int, str], Any] = field(default_factory=dict)

    def task(self, task_id: str, map_index: int = -1) -> TaskFact | None:
        return next((t for t in self.tasks if t.task_id == task_id and t.map_index == map_index), None)

    def instances(self, task_id: str) -> list[TaskFact]:
        """Every task instance of ``task_id`` (mapped: its expanded indexes, not the unexpanded -1)."""
        found = sorted((t for t in self.tasks if t.task_id == task_id), key=lambda t: t.map_index)
        mapped = [t for t in found if t.map_index >= 0]
        return mapped or found


def _state(value: Any) -> str | None:
    """A state enum or string -> its value ("running"), None stays None."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def read_runs(dag_id: str, limit: int, run_id: str | None = None) -> tuple[bool, list[RunFacts]]:
    """(whether Airflow knows the DAG, its latest ``limit`` runs newest first, or only ``run_id``) from the
    metadata DB, in the API server's process."""
    # The metadata DB's models: only the API server reads them; every Airflow process (scheduler, each task)
    # loads the plugin, so they are imported where a request is served.
    from airflow.models.dag import DagModel  # noqa: PLC0415 - see above
    from airflow.models.dagrun import DagRun  # noqa: PLC0415 - see above
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415 - see above
    from airflow.models.xcom import XComModel  # noqa: PLC0415 - see above
    from airflow.utils.session import create_session  # noqa: PLC0415 - see above
    from sqlalchemy import and_, or_, select  # noqa: PLC0415 - see above

    with create_session(scoped=False) as session:
        dag_exists = session.scalar(select(DagModel.dag_id).where(DagModel.dag_id == dag_id)) is not None
        query = select(DagRun).where(DagRun.dag_id == dag_id)
        if run_id is not None:
            query = query.where(DagRun.run_id == run_id)
        runs = list(session.scalars(query.order_by(DagRun.run_after.desc(), DagRun.id.desc()).limit(limit)))
        run_ids = [r.run_id for r in runs]
        tasks: dict[str, list[TaskFact]] = {r: [] for r in run_ids}
        xcoms: dict[str, dict[tuple[str, int, str], Any]] = {r: {} for r in run_ids}
        if run_ids:
            ti_rows = session.execute(
                select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index, TaskInstance.state,
                       TaskInstance.try_number, TaskInstance.start_date, TaskInstance.end_date,
                       TaskInstance._rendered_map_index.label("rendered_map_index"))
                .where(TaskInstance.dag_id == dag_id, TaskInstance.run_id.in_(run_ids)))
            for row in ti_rows:
                tasks[row.run_id].append(TaskFact(row.task_id, row.map_index, _state(row.state), row.try_number or 0,
                                                  row.start_date, row.end_date, row.rendered_map_index))
            wanted = or_(XComModel.key == RESULT_KEY,
                         and_(XComModel.key == RETURN_KEY, XComModel.task_id == PLAN_TASK),
                         *(and_(XComModel.key == key, XComModel.task_id.endswith(suffix, autoescape=True))
                           for key, suffix in WAVE_XCOMS))
            xcom_rows = session.execute(
                select(XComModel.run_id, XComModel.task_id, XComModel.map_index, XComModel.key, XComModel.value)
                .where(XComModel.dag_id == dag_id, XComModel.run_id.in_(run_ids), wanted))
            for row in xcom_rows:
                # stored by the Task Execution API as JSON (or as a JSON string by XComModel.set): decoded alike
                xcoms[row.run_id][(row.task_id, row.map_index, row.key)] = XComModel.deserialize_value(row)
        facts = [RunFacts(dag_id=dag_id, run_id=r.run_id, state=_state(r.state), run_type=_state(r.run_type),
                          run_after=r.run_after, logical_date=r.logical_date, start_date=r.start_date,
                          end_date=r.end_date, triggering_user=r.triggering_user_name,
                          tasks=tuple(tasks[r.run_id]), xcoms=xcoms[r.run_id]) for r in runs]
    return dag_exists, facts


# -- links into the Airflow UI ------------------------------------------------------------------


def _seg(value: object) -> str:
    return quote(str(value), safe="")


def run_url(ui_base: str, dag_id: str, run_id: str) -> str:
    return f"{ui_base}dags/{_seg(dag_id)}/runs/{_seg(run_id)}"


def task_url(ui_base: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """A task instance's page in the UI (``/dags/{dag}/runs/{run}/tasks/{task}[/mapped/{index}]``)."""
    url = f"{run_url(ui_base, dag_id, run_id)}/tasks/{_seg(task_id)}"
    return url if map_index < 0 else f"{url}/mapped/{map_index}"


def group_url(ui_base: str, dag_id: str, run_id: str, group_id: str) -> str:
    """A task group's page in the UI (``/dags/{dag}/runs/{run}/tasks/group/{group}``)."""
    return f"{run_url(ui_base, dag_id, run_id)}/tasks/group/{_seg(group_id)}"


# -- the summary (pure) -------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _epoch_iso(value: float | None) -> str | None:
    return None if value is None else datetime.fromtimestamp(value, UTC).isoformat()


def _ti(fact: TaskFact | None, url: str | None, missing: str = NOT_CREATED) -> dict[str, Any]:
    """A task instance as the page shows it (``exists`` False: not created; ``state`` None: no status)."""
    if fact is None:
        return {"exists": False, "state": None, "label": missing, "map_index": None, "try_number": None,
                "start_date": None, "end_date": None, "url": None}
    return {"exists": True, "state": fact.state, "label": fact.state or NO_STATUS, "map_index": fact.map_index,
            "try_number": fact.try_number, "start_date": _iso(fact.start_date), "end_date": _iso(fact.end_date),
            "url": url}


@dataclass(frozen=True)
class _PlanWave:
    """A wave of the recorded plan: what the view needs of ``Wave.to_dict()``."""

    number: int
    canary: bool
    oversized: bool
    wave_hash: str
    teams: tuple[str, ...]
    applications: tuple[Mapping[str, Any], ...]

    @property
    def apps(self) -> list[str]:
        return [a["app"] for a in self.applications]

    @property
    def group_count(self) -> int:
        return sum(len(_pending(a)) for a in self.applications)


def _pending(app: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The groups the application's move migrates (the plan lists its migrated and held ones too)."""
    return [g for g in app["groups"] if g.get("status", "pending") == "pending"]


def _plan_wave(w: Any) -> _PlanWave:
    number = w.get("number") if isinstance(w, Mapping) else None
    if not isinstance(number, int) or isinstance(number, bool) or not isinstance(w.get("wave_hash"), str) \
            or not isinstance(w.get("applications"), list):
        raise InvalidArgument(f"a wave of the plan lacks number, wave_hash or applications: {str(w)[:200]!r}")
    for a in w["applications"]:
        app, groups = (a.get("app"), a.get("groups")) if isinstance(a, Mapping) else (None, None)
        if not isinstance(app, str) or not isinstance(groups, list) \
                or not all(isinstance(g, Mapping) and isinstance(g.get("group_id"), str) for g in groups):
            raise InvalidArgument(f"an application of wave {number} lacks app or groups: {str(a)[:200]!r}")
    return _PlanWave(number=number, canary=bool(w.get("canary")), oversized=bool(w.get("oversized")),
                     wave_hash=w["wave_hash"], teams=tuple(w.get("teams") or ()),
                     applications=tuple(w["applications"]))


def parse_plan(value: Any) -> tuple[dict[str, Any], list[_PlanWave]]:
    """(the plan's dict, its waves) of the ``plan`` task's return value; InvalidArgument if it is not one."""
    if not isinstance(value, Mapping) or not isinstance(value.get("plan"), Mapping):
        raise InvalidArgument(f"the plan XCom has no 'plan' object: {str(value)[:200]!r}")
    plan = dict(value["plan"])
    raw = plan.get("waves")
    if not isinstance(raw, list):
        raise InvalidArgument("the plan has no list of waves")
    waves = [_plan_wave(w) for w in raw]
    return plan, sorted(waves, key=lambda w: w.number)


def _result(value: Any, kind: str) -> tuple[ApplicationResult | None, str | None]:
    """(the result, None) or (None, why it could not be read); (None, None) when there is none."""
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        return None, f"not an object: {str(value)[:200]!r}"
    try:
        result = ApplicationResult.from_dict(value)
    except (InvalidArgument, KeyError, TypeError, ValueError) as exc:
        return None, str(exc)
    if result.kind != kind:
        return None, f"a {result.kind} result where a {kind} result belongs"
    return result, None


def _match(names: Sequence[str], instances: list[TaskFact], results: Mapping[int, ApplicationResult | None],
           order: Sequence[str] | None) -> dict[str, TaskFact]:
    """Application name -> its mapped task instance: by its result's ``app``, by a rendered map index that is
    its name, else by position in ``order`` (what the DAG maps over, in order) when the counts agree."""
    by_name: dict[str, TaskFact] = {}
    for ti in instances:
        result = results.get(ti.map_index)
        if result is not None and result.app in names:
            by_name.setdefault(result.app, ti)
        elif ti.rendered_map_index in names:
            by_name.setdefault(str(ti.rendered_map_index), ti)
    if order is not None and len(instances) == len(order) and all(t.map_index >= 0 for t in instances):
        taken = {t.map_index for t in by_name.values()}
        for name, ti in zip(order, instances, strict=True):
            if name not in by_name and ti.map_index not in taken:
                by_name[name] = ti
    return by_name


def _result_dict(result: ApplicationResult) -> dict[str, Any]:
    return {"ok": result.ok, "detail": result.detail, "path": result.path, "gap_s": result.gap_s,
            "gap_from": _epoch_iso(result.gap_from), "gap_to": _epoch_iso(result.gap_to),
            "started_at": _epoch_iso(result.started_at), "ended_at": _epoch_iso(result.ended_at),
            "duration_s": result.duration_s, "steps": len(result.steps),
            "failed_steps": [s.step for s in result.steps if s.ok is False]}


@dataclass
class _WaveFacts:
    """The task instances and records of one wave slot of a run."""

    number: int
    tis: dict[str, list[TaskFact]]
    record: WaveRecord | None
    record_error: str | None
    results: dict[int, ApplicationResult | None]
    result_errors: dict[int, str]
    rollbacks: dict[int, ApplicationResult | None]
    rollback_errors: dict[int, str]
    #: the applications the recheck let through (what ``migrate`` maps over), the judge sent back (what
    #: ``rollback`` maps over), in order; None: not recorded
    moved: list[str] | None = None
    sent_back: list[str] | None = None
    #: the approval's answer: decision, by, at, refused (None: not answered)
    decision: Mapping[str, Any] | None = None

    def one(self, task: str) -> TaskFact | None:
        found = self.tis.get(task) or []
        return found[0] if found else None

    def states(self) -> list[str | None]:
        return [t.state for tis in self.tis.values() for t in tis]


def _wave_facts(run: RunFacts, number: int) -> _WaveFacts:
    prefix = wave_group(number) + "."
    tis = {task: run.instances(prefix + task) for task in WAVE_TASKS}
    record, record_error = None, None
    raw = run.xcoms.get((prefix + JUDGE, -1, RETURN_KEY))
    if raw is not None:
        try:
            if not isinstance(raw, Mapping):
                raise InvalidArgument(f"not an object: {str(raw)[:200]!r}")
            record = WaveRecord.from_dict(raw)
        except (InvalidArgument, KeyError, TypeError, ValueError) as exc:
            record_error = str(exc)
    found: dict[str, tuple[dict[int, ApplicationResult | None], dict[int, str]]] = {}
    for task, kind in ((MIGRATE_TASK, "migrate"), (ROLLBACK_TASK, ROLLBACK)):
        ok: dict[int, ApplicationResult | None] = {}
        errors: dict[int, str] = {}
        for ti in tis[task]:
            result, error = _result(run.xcoms.get((prefix + task, ti.map_index, RESULT_KEY)), kind)
            ok[ti.map_index] = result
            if error:
                errors[ti.map_index] = error
        found[task] = (ok, errors)
    decision = run.xcoms.get((prefix + APPROVAL, -1, DECISION_KEY))
    return _WaveFacts(number, tis, record, record_error, *found[MIGRATE_TASK], *found[ROLLBACK_TASK],
                      moved=_apps_of(run.xcoms.get((prefix + RECHECK, -1, RETURN_KEY))),
                      sent_back=_apps_of(run.xcoms.get((prefix + JUDGE, -1, ROLLBACK_UNITS_KEY))),
                      decision=decision if isinstance(decision, Mapping) else None)


def _apps_of(units: Any) -> list[str] | None:
    """The application names of a list of units (``[{"app": ...}, ...]``); None if it is not one."""
    if not isinstance(units, list) or not all(isinstance(u, Mapping) and isinstance(u.get("app"), str)
                                              for u in units):
        return None
    return [u["app"] for u in units]


def _verdict_status(record: WaveRecord, recheck: TaskFact | None) -> tuple[str, str]:
    verdict = record.verdict
    if verdict is None:
        return "not_reached", "the judge recorded that the wave did not run"
    if not verdict.proceed and recheck is not None and recheck.state in FAILED_STATES | NOT_RUN_STATES:
        return "stopped", verdict.reason  # the recheck refused the wave: nothing moved, no budget spent
    if not verdict.proceed:
        return "stopped_by_budget", verdict.reason
    if verdict.failed_apps or any(not r.ok for r in record.results):
        return "done_with_failures", verdict.reason
    return "done_ok", verdict.reason


def _active(wave: _WaveFacts) -> list[str]:
    return sorted({f"{task} {t.state}" for task, tis in wave.tis.items() for t in tis if t.state in ACTIVE_STATES})


def _answer(decision: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """A wave's status from its approval's answer when that stopped it (refused, or not approving)."""
    if decision is None:
        return None
    who = f" by {decision.get('by') or 'unknown'}" + (f" at {decision['at']}" if decision.get("at") else "")
    if decision.get("refused"):
        return "stopped", f"the answer{who} was refused: {decision['refused']}"
    if decision.get("decision") is not None and decision["decision"] not in APPROVING_OPTIONS:
        return "rejected", f"{decision['decision']}{who}"
    return None


def wave_status(wave: _WaveFacts, stopped_before: str | None = None) -> tuple[str, str]:
    """(status of :data:`WAVE_STATUSES`, why) of a wave, from its task instances and the judge's record.

    ``stopped_before``: why an earlier wave stopped the run (the reason of a wave that never started)."""
    states = wave.states()
    if not states:
        return "not_reached", (f"the run has no task of wave_{wave.number}: beyond its wave slots, a later run "
                               "plans what is left")
    if wave.record is not None:
        status, reason = _verdict_status(wave.record, wave.one(RECHECK))
        if any(t.state in ACTIVE_STATES for t in wave.tis[ROLLBACK_TASK]):
            reason += " (rolling back)"
        return status, reason
    if wave.record_error is not None:
        return "unknown", f"the judge's record could not be read: {wave.record_error}"
    opener = wave.one(OPEN)
    approval = wave.one(APPROVAL)
    if opener is not None and opener.state in NOT_RUN_STATES:
        return "not_reached", stopped_before or f"{wave_task(wave.number, OPEN)}: {opener.state}"
    if approval is not None and approval.state in ("awaiting_input", "deferred"):
        return "waiting_for_approval", f"{wave_task(wave.number, APPROVAL)}: {approval.state}"
    if answered := _answer(wave.decision):
        return answered
    if active := _active(wave):
        return "running", ", ".join(active)
    judge = wave.one(JUDGE)
    if judge is not None and judge.state == "success":
        return "unknown", "the judge succeeded but its record is not in XCom"
    after_approval = wave.tis[RECHECK] + wave.tis[MIGRATE_TASK]
    if approval is not None and approval.state == "success" and after_approval \
            and all(t.state == "skipped" for t in after_approval):
        return "rejected", "the approval was rejected: the wave's tasks were skipped"
    failed = sorted({f"{task} {t.state}" for task, tis in wave.tis.items() for t in tis if t.state in FAILED_STATES})
    if failed:
        return "stopped", ", ".join(failed)
    if all(s is None for s in states):
        return "not_reached", stopped_before or "not started yet"
    return "unknown", ", ".join(sorted({f"{task} {t.state or NO_STATUS}" for task, tis in wave.tis.items()
                                        for t in tis}))


def _group_rows(app: Mapping[str, Any], result: ApplicationResult | None,
                rollback: ApplicationResult | None) -> list[dict[str, Any]]:
    outcomes = {g.group_id: g for g in result.groups} if result else {}
    back = {g.group_id: g for g in rollback.groups} if rollback else {}
    rows = []
    for g in _pending(app):
        o, b = outcomes.get(g["group_id"]), back.get(g["group_id"])
        rows.append({"group_id": g["group_id"], "type_before": g.get("type"), "state_before": g.get("state"),
                     "readiness": g.get("readiness"),
                     "ok": None if o is None else o.ok, "type_after": None if o is None else o.type_after,
                     "state_after": None if o is None else o.state_after,
                     "members_after": None if o is None else o.members_after,
                     "offsets_regressed": None if o is None else o.offsets_regressed,
                     "detail": "" if o is None else o.detail,
                     "rollback_ok": None if b is None else b.ok,
                     "rollback_type_after": None if b is None else b.type_after})
    return rows


def _rollback_cell(needed: bool | None, fact: TaskFact | None, result: ApplicationResult | None, error: str | None,
                   url: str | None) -> dict[str, Any]:
    return {"needed": needed, **_ti(fact, url), "result": None if result is None else _result_dict(result),
            "result_error": error}


def _migrate_cell(run: RunFacts, ui_base: str, task_id: str, ti: TaskFact | None,
                  unexpanded: TaskFact | None) -> dict[str, Any]:
    """An application's mapped task instance; while the task is not expanded, its one instance (map index -1:
    no status until it is mapped, or skipped ...)."""
    if ti is None and unexpanded is not None:
        cell = _ti(unexpanded, task_url(ui_base, run.dag_id, run.run_id, task_id))
        return {**cell, "label": unexpanded.state or NOT_MAPPED}
    return _ti(ti, task_url(ui_base, run.dag_id, run.run_id, task_id, ti.map_index) if ti else None)


def _applications(run: RunFacts, ui_base: str, plan_wave: _PlanWave, wave: _WaveFacts) -> list[dict[str, Any]]:
    names = plan_wave.apps
    migrate_task, rollback_task = wave_task(wave.number, MIGRATE_TASK), wave_task(wave.number, ROLLBACK_TASK)
    # the moves map over what the recheck let through (the plan's applications if it is not recorded)
    migrate = _match(names, wave.tis[MIGRATE_TASK], wave.results, names if wave.moved is None else wave.moved)
    verdict = wave.record.verdict if wave.record else None
    failed_apps = list(verdict.failed_apps) if verdict else []
    # the way back maps over what the judge sent back (else its failed applications); without either, by name
    sent_back = wave.sent_back if wave.sent_back is not None else (failed_apps if verdict else None)
    rollback = _match(names, wave.tis[ROLLBACK_TASK], wave.rollbacks, sent_back)
    judged = {r.app: r for r in wave.record.results} if wave.record else {}
    judged_back = {r.app: r for r in wave.record.rollbacks} if wave.record else {}
    unexpanded = bool(wave.tis[MIGRATE_TASK]) and all(t.map_index < 0 for t in wave.tis[MIGRATE_TASK])
    out = []
    for app in plan_wave.applications:
        name = app["app"]
        ti, back_ti = migrate.get(name), rollback.get(name)
        result = wave.results.get(ti.map_index) if ti else None
        source = "task" if result is not None else None
        if result is None and name in judged:
            result, source = judged[name], "judge"
        back = (wave.rollbacks.get(back_ti.map_index) if back_ti else None) or judged_back.get(name)
        needed = (name in sent_back) if sent_back is not None else (True if back_ti else None)
        out.append({
            "app": name, "team": app.get("team"), "path": app.get("path"),
            # the recheck found it migrated since the plan: nothing to move
            "already_migrated": wave.moved is not None and name not in wave.moved,
            "migrate": _migrate_cell(run, ui_base, migrate_task, ti, wave.tis[MIGRATE_TASK][0] if unexpanded else None),
            "result": None if result is None else _result_dict(result), "result_source": source,
            "result_error": wave.result_errors.get(ti.map_index) if ti else None,
            "rollback": _rollback_cell(
                needed, back_ti, back, wave.rollback_errors.get(back_ti.map_index) if back_ti else None,
                task_url(ui_base, run.dag_id, run.run_id, rollback_task, back_ti.map_index) if back_ti else None),
            "groups": _group_rows(app, result, back),
        })
    return out


def _record_dict(record: WaveRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    verdict = record.verdict
    return {"approved_by": record.approved_by, "approved_at": record.approved_at,
            "started_at": _epoch_iso(record.started_at), "ended_at": _epoch_iso(record.ended_at),
            "duration_s": record.duration_s, "types_after": dict(record.types_after),
            "verdict": None if verdict is None else verdict.to_dict()}


def _wave(run: RunFacts, ui_base: str, plan_wave: _PlanWave, stopped_before: str | None) -> dict[str, Any]:
    k = plan_wave.number
    facts = _wave_facts(run, k)
    status, reason = wave_status(facts, stopped_before)
    tasks = {}
    for task in WAVE_TASKS:
        tis = facts.tis[task]
        if task in (MIGRATE_TASK, ROLLBACK_TASK):  # mapped: count by state
            tasks[task] = dict(sorted(Counter(t.state or NO_STATUS for t in tis).items()))
        else:
            fact = facts.one(task)
            tasks[task] = _ti(fact, task_url(ui_base, run.dag_id, run.run_id, wave_task(k, task)) if fact else None)
    return {
        "number": k, "canary": plan_wave.canary, "oversized": plan_wave.oversized, "apps": plan_wave.apps,
        "app_count": len(plan_wave.applications), "group_count": plan_wave.group_count, "teams": list(plan_wave.teams),
        "wave_hash": plan_wave.wave_hash, "wave_hash_short": plan_wave.wave_hash[:HASH_SHORT],
        "status": status, "status_label": WAVE_STATUSES[status], "status_reason": reason,
        "url": group_url(ui_base, run.dag_id, run.run_id, wave_group(k)), "tasks": tasks,
        "record": _record_dict(facts.record), "record_error": facts.record_error,
        "approval": None if facts.decision is None else {
            "decision": facts.decision.get("decision"), "by": facts.decision.get("by"),
            "at": facts.decision.get("at"), "refused": facts.decision.get("refused")},
        "applications": _applications(run, ui_base, plan_wave, facts),
    }


def _progress(waves: list[dict[str, Any]]) -> dict[str, int]:
    """Applications of the plan by where they are: ok, failed, running, not started, found already migrated."""
    counts = Counter({"applications": 0, "ok": 0, "failed": 0, "running": 0, "not_started": 0,
                      "already_migrated": 0})
    for w in waves:
        for a in w["applications"]:
            counts["applications"] += 1
            if a["already_migrated"]:
                counts["already_migrated"] += 1
            elif a["migrate"]["state"] in ACTIVE_STATES:  # a retry after a failed try too
                counts["running"] += 1
            elif a["result"] is not None:
                counts["ok" if a["result"]["ok"] else "failed"] += 1
            elif a["migrate"]["state"] in FAILED_STATES:
                counts["failed"] += 1
            else:
                counts["not_started"] += 1
    return dict(counts)


def _plan_part(run: RunFacts, ui_base: str) -> dict[str, Any]:
    """The plan and its waves of one run; ``waves`` None when the plan is not recorded or does not parse."""
    raw = run.xcoms.get((PLAN_TASK, -1, RETURN_KEY))
    if raw is None:
        return {"plan_status": "not recorded", "plan_error": None, "plan": None, "waves": None, "progress": None}
    try:
        plan, plan_waves = parse_plan(raw)
    except InvalidArgument as exc:
        return {"plan_status": "unreadable", "plan_error": str(exc), "plan": None, "waves": None, "progress": None}
    waves: list[dict[str, Any]] = []
    stopped_before: str | None = None
    for pw in plan_waves:
        wave = _wave(run, ui_base, pw, stopped_before)
        if wave["status"] == "stopped_by_budget" and stopped_before is None:
            stopped_before = f"the error budget stopped the run after wave {pw.number}"
        elif wave["status"] in ("rejected", "stopped") and stopped_before is None:
            stopped_before = f"the run stopped at wave {pw.number} ({wave['status_label']})"
        waves.append(wave)
    summary: Mapping[str, Any] = plan["summary"] if isinstance(plan.get("summary"), Mapping) else {}
    types_before = raw.get("types_before") if isinstance(raw.get("types_before"), Mapping) else None
    return {"plan_status": "recorded", "plan_error": None,
            "plan": {"migration": plan.get("migration"), "plan_hash": plan.get("plan_hash"),
                     "plan_hash_short": str(plan.get("plan_hash") or "")[:HASH_SHORT] or None,
                     "summary": dict(summary), "types_before": types_before,
                     "inventory_taken_at": plan.get("inventory_taken_at")},
            "waves": waves, "progress": _progress(waves)}


def run_summary(run: RunFacts, ui_base: str = "/") -> dict[str, Any]:
    """One run as the page shows it: its state and times, its plan's waves with their status, and per
    application (and its groups) the mapped task instance's state, its result and its rollback."""
    plan_ti, report_ti = run.task(PLAN_TASK), run.task(REPORT_TASK)
    return {
        "dag_id": run.dag_id, "run_id": run.run_id, "state": run.state, "run_type": run.run_type,
        "run_after": _iso(run.run_after), "logical_date": _iso(run.logical_date),
        "start_date": _iso(run.start_date), "end_date": _iso(run.end_date), "triggered_by": run.triggering_user,
        "url": run_url(ui_base, run.dag_id, run.run_id),
        "plan_task": _ti(plan_ti, task_url(ui_base, run.dag_id, run.run_id, PLAN_TASK) if plan_ti else None),
        "report_task": _ti(report_ti, task_url(ui_base, run.dag_id, run.run_id, REPORT_TASK) if report_ti else None),
        **_plan_part(run, ui_base),
    }


def runs_summary(dag_id: str, dag_exists: bool, runs: Iterable[RunFacts], ui_base: str = "/",
                 limit: int | None = None, run_id: str | None = None) -> dict[str, Any]:
    """What ``runs.json`` returns: the DAG, whether Airflow knows it, and its runs newest first."""
    warnings = [] if dag_exists else [f"Airflow has no DAG {dag_id!r} (not deployed, or not parsed yet)."]
    summaries = [run_summary(r, ui_base) for r in runs]
    if run_id is not None and not summaries:
        warnings.append(f"DAG {dag_id!r} has no run {run_id!r}.")
    return {"dag_id": dag_id, "dag_exists": dag_exists, "error": None, "warnings": warnings, "limit": limit,
            "run_id": run_id, "dag_url": f"{ui_base}dags/{_seg(dag_id)}", "runs": summaries}


__all__ = ["FLEET_DAG_ID", "WAVE_STATUSES", "RunFacts", "TaskFact", "group_url", "parse_plan", "read_runs",
           "run_summary", "run_url", "runs_summary", "task_url", "wave_status"]

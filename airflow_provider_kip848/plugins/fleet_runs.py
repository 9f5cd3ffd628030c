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

:func:`~.run_facts.read_runs` reads the latest runs of the DAG from Airflow's metadata DB (re-exported here);
:func:`runs_summary` turns those facts into what the page shows (pure, no I/O): per run its plan's waves, each
wave's status (:data:`WAVE_STATUSES`, derived from its task instances, its approval's answer and the judge's
record: ``validating`` while the wave's validation runs), and per application and group its progress (while a
move runs, each group's step from the ``fleet_progress`` its task records after every step).

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
from datetime import UTC, datetime
from typing import Any

from airflow_provider_kip848.changecontrol.run_artifacts import REPORTS_URL_PREFIX
from airflow_provider_kip848.fleet.names import (
    FLEET_DAG_ID,
    MIGRATE_TASK,
    PLAN_TASK,
    PROGRESS_KEY,
    REPORT_TASK,
    RETURN_KEY,
    ROLLBACK_TASK,
    WAVE_TASKS,
    wave_group,
    wave_task,
)
from airflow_provider_kip848.fleet.results import ApplicationResult, MoveProgress, WaveRecord
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.plugins.run_facts import (
    GROUP_SCAN,
    PlanWave,
    RunFacts,
    TaskFact,
    group_url,
    parse_plan,
    pending_groups,
    read_runs,
    run_url,
    task_url,
    url_segment,
)
from airflow_provider_kip848.plugins.wave_status import (
    ACTIVE_RUN_STATES,
    ACTIVE_STATES,
    FAILED_STATES,
    HASH_SHORT,
    NO_STATUS,
    NOT_CREATED,
    NOT_MAPPED,
    UNKNOWN,
    WAVE_STATUSES,
    WaveFacts,
    wave_facts,
    wave_status,
)

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

def move_step(app: str, ti: TaskFact | None, raw: Any,  # Any: an XCom value, checked by MoveProgress.from_dict
              finished: bool) -> dict[str, Any] | None:
    """Where an application's move stands while its task runs (None: it has not started, or it finished: its
    result says the rest), from the ``fleet_progress`` the task records after every step. ``step`` None with
    ``label`` unknown when it cannot be read (not recorded yet, unreadable, another application's)."""
    if ti is None or finished or (ti.state not in ACTIVE_STATES and raw is None):
        return None
    out: dict[str, Any] = {"step": None, "label": UNKNOWN, "kind": None, "waiting": None, "position": None,
                           "steps": None, "recorded_at": None, "groups": {}, "error": None}
    if raw is None:
        return {**out, "error": "the task has recorded no step yet (it records one after each step)"}
    try:
        progress = MoveProgress.from_dict(raw)
    except InvalidArgument as exc:
        return {**out, "error": f"unreadable: {exc}"}
    if progress.app != app:
        return {**out, "error": f"the record is {progress.app!r}'s, not {app!r}'s"}
    label = "done" if progress.step is None else f"{progress.step} ({progress.position + 1}/{len(progress.steps)})"
    return {**out, "step": progress.step, "label": label + (", deferred" if progress.waiting else ""),
            "kind": progress.kind, "waiting": progress.waiting, "position": progress.position,
            "steps": list(progress.steps), "recorded_at": _epoch_iso(progress.recorded_at),
            "groups": dict(progress.groups)}


def _current_step(wave: WaveFacts, run: RunFacts, name: str, ti: TaskFact | None, back_ti: TaskFact | None,
                  result: ApplicationResult | None, back: ApplicationResult | None) -> dict[str, Any] | None:
    """The step of the application's way back while it runs, else of its move."""
    prefix = wave_group(wave.number) + "."
    if back_ti is not None:
        step = move_step(name, back_ti, run.xcoms.get((prefix + ROLLBACK_TASK, back_ti.map_index, PROGRESS_KEY)),
                         back is not None)
        if step is not None:
            return step
    return move_step(name, ti, run.xcoms.get((prefix + MIGRATE_TASK, ti.map_index, PROGRESS_KEY)) if ti else None,
                     result is not None)


def _group_rows(app: Mapping[str, Any], result: ApplicationResult | None,
                rollback: ApplicationResult | None, step: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    outcomes = {g.group_id: g for g in result.groups} if result else {}
    back = {g.group_id: g for g in rollback.groups} if rollback else {}
    rows = []
    for g in pending_groups(app):
        o, b = outcomes.get(g["group_id"]), back.get(g["group_id"])
        rows.append({"group_id": g["group_id"], "type_before": g.get("type"), "state_before": g.get("state"),
                     "readiness": g.get("readiness"),
                     "ok": None if o is None else o.ok, "type_after": None if o is None else o.type_after,
                     "state_after": None if o is None else o.state_after,
                     "members_after": None if o is None else o.members_after,
                     "offsets_regressed": None if o is None else o.offsets_regressed,
                     "detail": "" if o is None else o.detail,
                     "rollback_ok": None if b is None else b.ok,
                     "rollback_type_after": None if b is None else b.type_after,
                     # while the move runs: the group's step (unknown when the move's step cannot be read)
                     "step": None if step is None else step["groups"].get(g["group_id"], UNKNOWN)})
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


def _applications(run: RunFacts, ui_base: str, plan_wave: PlanWave, wave: WaveFacts) -> list[dict[str, Any]]:
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
        step = _current_step(wave, run, name, ti, back_ti, result if source == "task" else None, back)
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
            "step": step,
            "groups": _group_rows(app, result, back, step),
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


def _wave(run: RunFacts, ui_base: str, plan_wave: PlanWave, stopped_before: str | None) -> dict[str, Any]:
    k = plan_wave.number
    facts = wave_facts(run, k)
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


def run_summary(run: RunFacts, ui_base: str = "/") -> dict[str, Any]:  # Any: the runs page's JSON
    """One run as the page shows it: its state and times, its plan's waves with their status, and per
    application (and its groups) the mapped task instance's state, its result and its rollback."""
    plan_ti, report_ti = run.task(PLAN_TASK), run.task(REPORT_TASK)
    return {
        "dag_id": run.dag_id, "run_id": run.run_id, "state": run.state, "run_type": run.run_type,
        "run_after": _iso(run.run_after), "logical_date": _iso(run.logical_date),
        "start_date": _iso(run.start_date), "end_date": _iso(run.end_date), "triggered_by": run.triggering_user,
        "url": run_url(ui_base, run.dag_id, run.run_id),
        # the run's report, rendered by the provider's reports page
        "report_url": report_url(ui_base, run.dag_id, run.run_id),
        "plan_task": _ti(plan_ti, task_url(ui_base, run.dag_id, run.run_id, PLAN_TASK) if plan_ti else None),
        "report_task": _ti(report_ti, task_url(ui_base, run.dag_id, run.run_id, REPORT_TASK) if report_ti else None),
        **_plan_part(run, ui_base),
    }


def report_url(ui_base: str, dag_id: str, run_id: str) -> str:
    """The run's report on the provider's reports page (``/kip848-reports/{dag_id}/{run_id}``, ids quoted)."""
    return f"{ui_base}{REPORTS_URL_PREFIX.lstrip('/')}/{url_segment(dag_id)}/{url_segment(run_id)}"


def runs_summary(dag_id: str, dag_exists: bool, runs: Iterable[RunFacts], ui_base: str = "/",
                 limit: int | None = None, run_id: str | None = None,
                 group_id: str | None = None) -> dict[str, Any]:  # Any: the runs page's JSON (template and /json)
    """What ``runs.json`` returns: the DAG, whether Airflow knows it, and its runs newest first (``group_id``:
    those whose plan moves that group). ``active``: some run is queued or running (the page refreshes)."""
    warnings = [] if dag_exists else [f"Airflow has no DAG {dag_id!r} (not deployed, or not parsed yet)."]
    summaries = [run_summary(r, ui_base) for r in runs]
    if run_id is not None and not summaries:
        warnings.append(f"DAG {dag_id!r} has no run {run_id!r}.")
    if group_id is not None and not summaries:
        warnings.append(f"No run of {dag_id!r} among its latest {GROUP_SCAN} planned to move group {group_id!r}"
                        + (f" with run id {run_id!r}." if run_id is not None else "."))
    return {"dag_id": dag_id, "dag_exists": dag_exists, "error": None, "warnings": warnings, "limit": limit,
            "run_id": run_id, "group_id": group_id, "dag_url": f"{ui_base}dags/{url_segment(dag_id)}",
            "active": any(r["state"] in ACTIVE_RUN_STATES for r in summaries), "runs": summaries}


__all__ = ["ACTIVE_RUN_STATES", "FLEET_DAG_ID", "WAVE_STATUSES", "RunFacts", "TaskFact", "group_url",
           "move_step", "parse_plan", "read_runs", "report_url", "run_summary", "run_url", "runs_summary", "task_url",
           "wave_status"]

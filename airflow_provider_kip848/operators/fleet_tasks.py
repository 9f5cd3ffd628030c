"""The fleet migration DAG's own tasks: plan, open a wave, recheck it, what to validate, judge, report.

``dags/kip848_fleet_migration.py`` wires these as ``@task`` callables (the DAG file is the runbook); each
takes the run's ``params`` and Airflow ``context`` and reads the tasks before it by the names of
:mod:`airflow_provider_kip848.fleet.names` (which the UI plugin reads too). The planning itself is
:mod:`airflow_provider_kip848.fleet` (no I/O), each application's move is
:class:`~airflow_provider_kip848.operators.fleet.KafkaApplicationMigrationOperator`.

Why over 500 lines: it is one DAG's steps, one function per task of the runbook (plan, open, recheck, to_validate,
judge, report), and they share the reading of the tasks before them (the plan's and the waves' XComs by the names
of fleet.names, the run's task states). Split by step, each module would import the same private readers from a
third, and a reader of the DAG would follow one runbook across seven files; the logic they call is already in
fleet/ and changecontrol/.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from typing import Any, TypedDict

from airflow.sdk import Context
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from airflow_provider_kip848.changecontrol import fleet_report as fleet_reports
from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.approvals import is_approving
from airflow_provider_kip848.changecontrol.artifacts import artifact_root, optional_run_location
from airflow_provider_kip848.changecontrol.report import LOCKED, task_states
from airflow_provider_kip848.changecontrol.runpaths import given
from airflow_provider_kip848.changecontrol.window import window_note
from airflow_provider_kip848.controllers import ControllerRefused
from airflow_provider_kip848.controllers.registry import ControllerRegistry
from airflow_provider_kip848.engine.move import ApplicationMove, MoveSettings, Unit, group_snapshot_location
from airflow_provider_kip848.engine.state import touched
from airflow_provider_kip848.fleet import (
    ErrorBudget,
    OwnershipNotApprovable,
    Selection,
    Wave,
    WaveVerdict,
    plan_waves,
    select,
)
from airflow_provider_kip848.fleet.applications import MIGRATED
from airflow_provider_kip848.fleet.names import (
    APPROVAL,
    DECISION_KEY,
    FLEET_DAG_ID,
    JUDGE,
    MIGRATE_TASK,
    OPEN,
    PLAN_TASK,
    RECHECK,
    RESULT_KEY,
    ROLLBACK_TASK,
    ROLLBACK_UNITS_KEY,
    TO_VALIDATE,
    VALIDATE,
    WAVE_VERDICTS_KEY,
    wave_task,
)
from airflow_provider_kip848.fleet.results import MIGRATE, ApplicationResult, WaveRecord, apply_validation
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.ownership import OwnershipMapMissing, read_ownership_map
from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.arguments import parse_flag
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.inert import md_text
from airflow_provider_kip848.kafka.lock import ChangeLock
from airflow_provider_kip848.operators.lock import release_change_lock, run_owner

log = logging.getLogger(__name__)

#: the migration the fleet DAG runs
MIGRATION = "classic_to_consumer"
#: wave slots of one run (read when the DAG is parsed): a plan with more waves leaves the rest to the next run
MAX_WAVES = int(os.environ.get("KIP848_FLEET_MAX_WAVES", "6"))
#: applications of one wave whose worker-side steps run at once (deferred waits hold no slot)
PARALLELISM = int(os.environ.get("KIP848_FLEET_PARALLELISM", "8"))
#: the deployment's folder for the wave validation's job and report (in cluster mode one the Spark workers share);
#: unset: the run's validation folder of the artifact location when it is a local path, else a temporary folder
VALIDATION_DIR_ENV = "KIP848_VALIDATION_DIR"


def _ownership(params: dict) -> Any:
    """The run's ownership map (its file, else its Variable), read as the fleet view reads it."""
    try:
        return read_ownership_map(variable=params.get("ownership_variable"), file=params.get("ownership_file"))
    except OwnershipMapMissing as exc:
        raise AirflowFailException(exc.what) from exc


#: the form's filters; its default for each is ``[]``, "not given"
FILTERS = ("apps", "teams", "prefixes")


class SelectionFilters(TypedDict):
    """What of the run's form chooses the applications (:func:`~airflow_provider_kip848.fleet.select`'s filters)."""

    apps: list[str] | None
    teams: list[str] | None
    prefixes: list[str] | None
    readiness: list[str] | str | None


def selection_filters(params: dict) -> SelectionFilters:
    """The run's selection, from its form, as :func:`~airflow_provider_kip848.fleet.select` takes it.

    Every application of the ownership map is chosen only by ``all_applications``, never by filters left empty:
    a form submitted with nothing filled would otherwise plan the whole fleet. Neither, or both at once, is
    refused (:class:`InvalidArgument`); an empty ``readiness`` is refused by ``select`` (it never means both)."""
    everything = parse_flag(params.get("all_applications", False), "all_applications")
    named = {k: list(params[k]) for k in FILTERS if params.get(k)}
    if everything and named:
        raise InvalidArgument(f"all_applications and {', '.join(named)} at once: the run must say either every "
                              "application or which ones",
                              remedy="Set all_applications for every application of the ownership map, or name "
                                     "apps / teams / prefixes, not both. Nothing was planned or changed.")
    if not everything and not named:
        raise InvalidArgument("the run selects no application: apps, teams and prefixes are empty, and empty "
                              "filters never mean every application",
                              remedy="Name the applications, teams or group prefixes to migrate, or set "
                                     "all_applications to plan every application of the ownership map (the plan "
                                     "and each wave's approval then say so). Nothing was planned or changed.")
    return SelectionFilters(apps=named.get("apps"), teams=named.get("teams"), prefixes=named.get("prefixes"),
                            readiness=params.get("readiness"))


def _select(params: dict, inventory: Any) -> Any:
    selection = select(inventory, _ownership(params), **selection_filters(params), migration=MIGRATION,
                       require_controller=True)
    if selection.unmatched:
        raise InvalidArgument("the run's selection matched nothing for: " + "; ".join(selection.unmatched),
                              remedy="Correct the names or prefixes (as the ownership map and the cluster spell "
                                     "them), or leave them out. Nothing was planned or changed.")
    return selection


def check_controllers(selection: Selection) -> None:
    """Every selected application's controller is an entry of the deployment's registry, with only the arguments
    it declares: checked before any wave is planned or any group locked (nothing of a controller runs here)."""

    registry = ControllerRegistry.load()
    problems = []
    for app in selection.applications:
        if not app.app_controller:
            continue  # held back by the selection (no controller), said in the plan
        try:
            registry.resolve(app.app_controller, dict(app.app_controller_args)).close()
        except Kip848Error as exc:  # what is wrong with each, nothing of the registry's file or other entries
            problems.append(f"{app.app}: {exc.what}")
    if problems:
        raise ControllerRefused("the ownership map names controllers this deployment cannot use: "
                                + "; ".join(problems))


def _types(inventory: Any, group_ids: Any) -> dict[str, int]:
    """Groups by type (``unknown`` for a group whose type could not be read)."""
    wanted = set(group_ids)
    counts: dict[str, int] = {}
    for e in inventory.entries:
        if e.group_id in wanted:
            kind = "unknown" if e.error is not None else e.type.value
            counts[kind] = counts.get(kind, 0) + 1
    gone = len(wanted - {e.group_id for e in inventory.entries})
    if gone:
        counts["gone"] = gone
    return counts


def make_plan(params: dict, context: Context) -> dict:
    """Inventory, ownership, selection and waves: what the approvers of each wave will be shown."""

    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            inventory = hook.inventory()
        selection = _select(params, inventory)
        check_controllers(selection)
        wave_plan = plan_waves(selection, canary=params["canary"], wave_size=params["wave_size"],
                               max_groups_per_wave=params["max_groups_per_wave"], parallelism=PARALLELISM)
    except Kip848Error as exc:
        raise AirflowFailException(str(exc)) from exc
    # an application whose rules match no group: the plan is shown (written and logged below), never approvable
    owned = [g.group_id for a in selection.applications for g in a.groups]
    # the window as the guard read it: every wave runs in it, and its approvers see it as read
    markdown = wave_plan.render_markdown() + f"\n\n- {md_text(window_note(params))}"  # quotes the Params
    if len(wave_plan.waves) > MAX_WAVES:
        markdown += (f"\n\n**{len(wave_plan.waves) - MAX_WAVES} wave(s) beyond this run's {MAX_WAVES} slots** run "
                     "when the DAG is triggered again (the next run plans what is left).")
    capacity = slot_capacity_note(max((len(w.applications) for w in wave_plan.waves), default=0),
                                  conf.getint("core", "parallelism"))
    if capacity:
        markdown += f"\n\n{capacity}"
        log.warning("%s", capacity)
    out = {"plan": wave_plan.to_dict(), "plan_hash": wave_plan.plan_hash, "markdown": markdown,
           "types_before": _types(inventory, owned), "owned_groups": owned, "slots": MAX_WAVES,
           "nothing_to_do": not wave_plan.waves, "started_at": time.time()}
    location = optional_run_location(params["kafka_conn_id"], FLEET_DAG_ID, context["run_id"], "plan")
    if location:
        storage.write_text(f"{location}/plan.json", _json(out))
        storage.write_text(f"{location}/plan.md", markdown + "\n")
    log.info("%s", markdown)
    try:
        wave_plan.require_approvable()
    except Kip848Error as exc:
        raise AirflowFailException(str(exc)) from exc
    return out


def slot_capacity_note(largest_wave: int, parallelism: int) -> str | None:
    """A note for the approvers when Airflow has fewer worker slots than a wave moves applications at once
    (each application's steps and its resume take a slot; its waits do not): the wave's applications queue
    for slots and the wave takes longer than its slowest application (measured in docs/performance.md).
    ``parallelism`` is Airflow's ``core.parallelism`` (the LocalExecutor's worker count; with Celery the
    workers' concurrency is the real limit, which a task cannot see)."""
    at_once = min(PARALLELISM, largest_wave)
    if at_once == 0 or parallelism >= at_once + 2:
        return None
    return (f"**Worker slots:** Airflow's `core.parallelism` is {parallelism}, and a wave moves up to {at_once} "
            f"application(s) at once (`KIP848_FLEET_PARALLELISM` {PARALLELISM}) next to the run's own tasks: "
            f"the applications queue for slots and each wave takes longer than its slowest application. "
            f"Give Airflow at least {at_once + 2} slots, or lower `KIP848_FLEET_PARALLELISM` / `wave_size`.")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _states(context: Context) -> dict[str, str]:
    return task_states({"ti": context["ti"], "dag_run": context["dag_run"]})


def open_wave_step(number: int, params: dict, context: Context) -> dict:
    """Wave ``number`` runs when the plan has it, the run is not a dry run, and the wave before it was judged
    and allowed to proceed; otherwise it is skipped, saying why."""
    ti = context["ti"]
    planned = ti.xcom_pull(task_ids=PLAN_TASK)
    if not planned:
        raise AirflowSkipException("no plan (the plan task did not succeed)")
    if params["dry_run"]:
        raise AirflowSkipException("dry run: the plan is the result")
    waves = planned["plan"]["waves"]
    if number > len(waves):
        raise AirflowSkipException(f"the plan has {len(waves)} wave(s)")
    if number > 1:
        before = ti.xcom_pull(task_ids=wave_task(number - 1, JUDGE))
        if not before or not before.get("verdict"):
            raise AirflowSkipException(f"wave {number - 1} was not judged (not approved, or it failed before "
                                       "running): the remaining waves wait for the next run")
        if not before["verdict"]["proceed"]:
            raise AirflowSkipException(f"stopped by the error budget: {before['verdict']['reason']}")
    wave = waves[number - 1]

    markdown = Wave.from_dict(wave).render_markdown()
    slots = int(planned.get("slots") or MAX_WAVES)
    if number == 1 and len(waves) > slots:  # its approvers see the whole run, not only this wave
        markdown += (f"\n\n**{len(waves) - slots} wave(s) of the plan are beyond this run's {slots} slots**: they run "
                     "when the DAG is triggered again (the next run plans what is left), and this run ends partial.")
    if planned["plan"].get("scope"):  # what the run chose, in words ("every application ..." only if it said so)
        markdown = f"Selection: {md_text(planned['plan']['scope'])}.\n\n{markdown}"
    return {"number": number, "hash": wave["wave_hash"], "wave": wave,
            "title": f"{len(wave['applications'])} application(s), {wave['group_count']} group(s)"
                     + (" (canary)" if wave["canary"] else ""),
            "markdown": markdown + f"\n\n- {md_text(window_note(params))}\n\nPlan hash: `{planned['plan_hash']}`",
            "changes": [{"kind": "protocol", "target": g["group_id"], "before": g["type"], "after": "consumer"}
                        for a in wave["applications"] for g in a["groups"] if g["status"] == "pending"]}


def recheck_step(number: int, params: dict, context: Context) -> list[dict]:
    """The approved wave against a fresh inventory, right before it runs: applications found migrated are
    dropped; any other difference (a group no longer ready, another path, a new group) fails the wave
    before anything is touched. Returns one unit per application to move (the mapped task's input)."""
    ti = context["ti"]
    opened = ti.xcom_pull(task_ids=wave_task(number, OPEN))
    decision = ti.xcom_pull(task_ids=wave_task(number, APPROVAL), key=DECISION_KEY) or {}
    if decision.get("plan_hash") != opened["hash"]:
        raise AirflowFailException(f"the approval of wave {number} is for {decision.get('plan_hash')}, not for the "
                                   f"wave's hash {opened['hash']}")
    approved = Wave.from_dict(opened["wave"])
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            fresh = hook.inventory()
        if not approved.apps:
            raise InvalidArgument(f"wave {number} names no application: nothing to recheck, nothing is moved")
        selection = select(fresh, _ownership(params), apps=list(approved.apps), readiness=params.get("readiness"),
                           migration=MIGRATION, require_controller=True)
        if selection.idle:  # the map no longer gives an approvable plan on the cluster as it is now
            raise OwnershipNotApprovable(selection.source, (), selection.idle)
    except Kip848Error as exc:
        raise AirflowFailException(str(exc)) from exc
    now = {a.app: a for a in selection.applications}
    done = [a for a in approved.apps if a in now and now[a].status == MIGRATED]
    expected = approved.without(done)
    current = Wave(number=approved.number, migration=approved.migration, canary=approved.canary,
                   oversized=approved.oversized,
                   applications=tuple(now[a] for a in expected.apps if a in now))
    if current.wave_hash != expected.wave_hash:
        differences = []
        for app in expected.applications:
            cur = now.get(app.app)
            if cur is None:
                differences.append(f"{app.app}: no longer in the inventory")
            elif cur.status != "ready":
                differences.append(f"{app.app}: now {cur.status} ({cur.reason})")
            elif cur._canonical() != app._canonical():
                differences.append(f"{app.app}: was {app._canonical()}, now {cur._canonical()}")
        raise AirflowFailException(f"wave {number} changed since it was approved, nothing was touched: "
                                   + "; ".join(differences or ["its content differs"])
                                   + ". Trigger the DAG again to plan and approve what is there now.")
    if done:
        log.info("Already migrated since the plan, skipped: %s", ", ".join(done))
    entries = {e.group_id: e for e in fresh.entries}
    return [{"app": a.app, "team": a.team, "wave": number, "path": a.path, "app_controller": a.app_controller,
             "app_controller_args": dict(a.app_controller_args), "expected_instances": a.expected_instances,
             "groups": [{"group_id": g.group_id, "type": g.type, "state": entries[g.group_id].state.value,
                         "live_members": entries[g.group_id].member_count} for g in a.pending]}
            for a in current.applications]


def _results(ti: Any, task_id: str) -> list[dict]:
    pulled = ti.xcom_pull(task_ids=task_id, key=RESULT_KEY)
    if pulled is None:
        return []
    values = [pulled] if isinstance(pulled, dict) else list(pulled)
    return [v for v in values if isinstance(v, dict)]


def to_validate_step(number: int, snapshot_dir: str, params: dict, context: Context) -> dict:
    """What the wave's validation checks: every group of every application whose move succeeded, its
    committed offsets now (a fresh snapshot, kept next to the one taken before the move) against that
    snapshot. The fleet's applications declare no output topics, so the records they wrote are not read:
    the validation proves no committed offset went back or vanished, in one Spark application for the wave."""
    ti = context["ti"]
    moved = [r for r in (ApplicationResult.from_dict(d) for d in _results(ti, wave_task(number, MIGRATE_TASK)))
             if r.ok]
    if not moved:
        raise AirflowSkipException(f"no application of wave {number} was migrated: nothing to validate")
    base = str(snapshot_dir).rstrip("/")
    groups = []
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        for result in moved:
            for g in result.groups:
                before = group_snapshot_location(base, result.app, g.group_id)
                after = group_snapshot_location(base, result.app, g.group_id, ".validated.json")
                storage.write_text(after, take_snapshot(hook.get_conn(), g.group_id).to_json())
                groups.append({"group_id": g.group_id, "app": result.app,
                               "offsets_preserved": {"before": before, "after": after, "allow_advanced": True}})
    output = given(os.environ.get(VALIDATION_DIR_ENV))  # the deployment's (in cluster mode, shared with Spark)
    if not output:
        location = optional_run_location(params["kafka_conn_id"], FLEET_DAG_ID, context["run_id"], "validation")
        output = location if location and "://" not in location else f"{tempfile.gettempdir()}/kip848-validation"
    output = f"{str(output).rstrip('/')}/wave_{number}"
    log.info("Validating %d group(s) of %d application(s) in one Spark application (%s mode), reports under %s",
             len(groups), len(moved), params["validation_mode"], output)
    return {"groups": groups, "output_dir": output}


def validated_results(number: int, results: list[ApplicationResult], ti: RuntimeTaskInstanceProtocol,
                      states: dict[str, str]) -> list[ApplicationResult]:
    """The migrate results with the wave validation applied (``fleet.results.apply_validation``): the groups
    the validation was to check fail unless their verdict is ``pass``; no verdict at all is ``unknown``. When
    the validation could not even be prepared (``to_validate`` failed), every migrated group is unknown."""
    planned = ti.xcom_pull(task_ids=wave_task(number, TO_VALIDATE)) or {}
    checked = {g["group_id"] for g in planned.get("groups") or []}
    if not checked and states.get(wave_task(number, TO_VALIDATE)) in ("failed", "upstream_failed"):
        checked = {g.group_id for r in results if r.ok for g in r.groups}
    if not checked:
        return results
    verdicts = ti.xcom_pull(task_ids=wave_task(number, VALIDATE), key=WAVE_VERDICTS_KEY)
    log.info("Wave %d validation: %s", number, f"{verdicts['verdict']} ({verdicts['summary']})" if verdicts
             else "no verdict (the validation failed or did not run): unknown")
    return apply_validation(results, checked, (verdicts or {}).get("groups"))


def recorded_results(number: int, units: list[dict] | None, results: list[ApplicationResult], snapshot_dir: str,
                     params: dict, context: Context) -> list[ApplicationResult]:
    """``results`` plus, for each application of the wave whose task left no result (a task process lost by
    the executor after its last retry), the result its move recorded (:meth:`ApplicationMove.recorded`). A
    move recorded as finished counts as it finished; one that did not finish is failed, naming its step."""
    have = {r.app for r in results}
    out = list(results)
    for raw in units or []:
        if raw.get("app") in have:
            continue
        try:
            move = ApplicationMove(Unit.from_dict(raw), MIGRATE,
                                   MoveSettings(kafka_conn_id=params["kafka_conn_id"], snapshot_dir=snapshot_dir),
                                   context=context, task_id=wave_task(number, MIGRATE_TASK), log=log)
            state = move.recorded()
        except Kip848Error as exc:
            log.warning("%s: no result and no readable move record (%s)", raw.get("app"), exc)
            continue
        if state is None:
            continue
        if state.result is not None:
            log.warning("%s: its task left no result; the move's record has one (%s).", raw["app"],
                        "ok" if state.result.get("ok") else "failed")
            out.append(ApplicationResult.from_dict(state.result))
        else:
            log.warning("%s: its task left no result; the move's record stops at step %s.", raw["app"],
                        state.next_step)
    return out


def judge_step(number: int, snapshot_dir: str, params: dict, context: Context) -> dict:
    """The error budget's verdict on the wave, the groups by type after it, and which applications go back."""
    ti = context["ti"]
    opened = ti.xcom_pull(task_ids=wave_task(number, OPEN))
    if not opened:
        raise AirflowSkipException(f"wave {number} did not open")
    decision = ti.xcom_pull(task_ids=wave_task(number, APPROVAL), key=DECISION_KEY) or {}
    if not is_approving(decision.get("decision")):
        raise AirflowSkipException(f"wave {number} was not approved ({decision.get('decision') or 'no answer'})")
    units = ti.xcom_pull(task_ids=wave_task(number, RECHECK))
    ran = Wave.from_dict(opened["wave"])
    results = recorded_results(number, units, [ApplicationResult.from_dict(r)
                                                for r in _results(ti, wave_task(number, MIGRATE_TASK))],
                               snapshot_dir, params, context)
    results = validated_results(number, results, ti, _states(context))
    if units is None:  # approved, then the recheck refused (or failed): nothing ran, nothing may follow
        verdict = WaveVerdict(wave=number, proceed=False,
                              reason=f"wave {number}: the recheck against a fresh inventory did not pass "
                                     f"({_states(context).get(wave_task(number, RECHECK))}); nothing was touched")
        units = []
    else:
        budget = ErrorBudget(max_failed_apps=params["max_failed_apps"], max_failed_ratio=params["max_failed_ratio"],
                             canary_max_failed_apps=params["canary_max_failed_apps"])
        moved = {u["app"] for u in units}
        verdict = budget.judge_wave(ran.without(set(ran.apps) - moved), [g for r in results for g in r.group_results])
    owned = (ti.xcom_pull(task_ids=PLAN_TASK) or {}).get("owned_groups") or []
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            types_after = _types(hook.inventory(owned), owned) if owned else {}
    except Exception as exc:  # noqa: BLE001 - the record says unknown, never a guessed count
        log.warning("Groups by type after wave %d: unknown (%s)", number, exc)
        types_after = {}
    by_app = {r.app: r for r in results}
    back = [u for u in units if u["app"] in verdict.failed_apps
            and (u["app"] not in by_app or touched(by_app[u["app"]].steps))]
    ti.xcom_push(key=ROLLBACK_UNITS_KEY, value=back)
    record = WaveRecord(number=number, canary=ran.canary, wave_hash=ran.wave_hash, apps=ran.apps,
                        group_ids=ran.group_ids, results=tuple(results), verdict=verdict,
                        started_at=min((r.started_at for r in results if r.started_at), default=None),
                        ended_at=max((r.ended_at for r in results if r.ended_at), default=None),
                        approved_by=decision.get("by"), approved_at=decision.get("at"), types_after=types_after)
    log.info("%s", verdict.reason)
    return record.to_dict()


def report_step(params: dict, context: Context) -> dict:
    """The run's fleet report (groups by protocol per wave, per-wave duration and failures, gaps per
    application, plots), its history line, and the change locks released."""
    ti = context["ti"]
    planned = ti.xcom_pull(task_ids=PLAN_TASK)
    waves = []
    for number in range(1, MAX_WAVES + 1):
        record = ti.xcom_pull(task_ids=wave_task(number, JUDGE))
        if record:
            rollbacks = tuple(ApplicationResult.from_dict(r) for r in _results(ti, wave_task(number, ROLLBACK_TASK)))
            waves.append(WaveRecord.from_dict({**record, "rollbacks": [r.to_dict() for r in rollbacks]}))
    touched = sorted({g.group_id for w in waves for r in w.results for g in r.groups})
    released = {}
    owned = (planned or {}).get("owned_groups") or []
    types_after: dict[str, int] = {}
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            for group_id in touched:
                released[group_id] = ChangeLock(hook.get_conn(), f"group:{group_id}").release(run_owner(context))
            types_after = _types(hook.inventory(owned), owned) if owned else {}
    except Exception as exc:  # noqa: BLE001 - a lock left behind is taken over once this run has ended
        log.warning("Could not release every group lock or read the groups after the run: %s", exc)
    fleet_lock = release_change_lock(context)
    decisions = [ti.xcom_pull(task_ids=wave_task(n, APPROVAL), key=DECISION_KEY) for n in range(1, MAX_WAVES + 1)]
    outcome = fleet_outcome(params, planned, waves, _states(context),
                            rejected=any(d and not is_approving(d.get("decision")) for d in decisions))
    if fleet_lock and fleet_lock.get("refused"):  # another run holds the migration: this one did nothing
        outcome = LOCKED
    report = fleet_reports.build_fleet_report(
        plan=(planned or {}).get("plan"), waves=waves, types_before=(planned or {}).get("types_before") or {},
        types_after=types_after, run_id=context["run_id"], dag_id=FLEET_DAG_ID, outcome=outcome,
        started_at=(planned or {}).get("started_at"), ended_at=time.time())
    report["locks"] = {"fleet": fleet_lock, "groups": released}
    root = artifact_root(params["kafka_conn_id"])
    history = None
    if root and not params["dry_run"] and planned:  # the fleet over time: one line per run that planned
        where = f"{root.rstrip('/')}/{FLEET_DAG_ID}/history.jsonl"
        fleet_reports.append_history(where, report)
        history = fleet_reports.load_history(where)
    location = optional_run_location(params["kafka_conn_id"], FLEET_DAG_ID, context["run_id"], "report")
    if location:
        report["files"] = fleet_reports.write_fleet_report(location, report, history=history)
    log.info("%s", fleet_reports.render_fleet_markdown(report))
    if outcome in ("failed", "stopped", "completed_with_failures", LOCKED):
        raise AirflowFailException(f"Fleet migration: outcome {outcome}"
                                   + (f"; report {report['files']['markdown']}" if report.get("files") else ""))
    return {"outcome": outcome, "files": report.get("files"), "summary": report.get("summary")}


def fleet_outcome(params: dict, planned: dict | None, waves: list, states: dict[str, str], *,
                  rejected: bool = False) -> str:
    """``dry_run``, ``nothing_to_do``, ``completed`` (every planned wave of the run ran, no failure),
    ``partial`` (waves left for the next run), ``rejected`` (an approver rejected a wave: it and the waves
    after it did not run), ``stopped`` (the budget stopped the remaining waves), ``completed_with_failures``
    (within budget, some applications failed and were brought back), ``failed`` (no plan, or a step of the run
    failed outside the applications' moves)."""
    if not planned:
        return "failed"
    if params["dry_run"]:
        return "dry_run"
    if planned["nothing_to_do"]:
        return "nothing_to_do"
    if any(w.verdict is not None and not w.verdict.proceed for w in waves):
        return "stopped"
    if any(w.verdict is not None and w.verdict.failed_apps for w in waves):
        return "completed_with_failures"
    if any(states.get(t) == "failed" for t in states if t.endswith((".recheck", ".open", ".judge"))):
        return "failed"
    if rejected:
        return "rejected"
    if len(waves) < len(planned["plan"]["waves"]):
        return "partial"
    return "completed"

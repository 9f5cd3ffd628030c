"""Fleet migration: every owned classic consumer group of a cluster to KIP-848 (``group.protocol=consumer``), in waves.

Runbook (the single-group runbooks, applied to a fleet by its owners' applications):

1. Take the fleet's inventory in batched requests (every group: type, state,
   members, offsets, lag, a readiness verdict) and read the platform team's
   ownership map (an Airflow Variable, or a file): group -> application, team,
   controller, instances.
2. Select the applications (by application, team, group prefix, readiness).
   An application moves whole: one blocked or unknown group holds it back, with
   the reason. A ready application goes online (a rolling restart through its
   controller) when every group allows the online upgrade, offline (stop,
   empty, start on the new protocol) otherwise.
3. Plan waves: a canary of the smallest applications, then waves of
   ``wave_size`` applications with at most ``max_groups_per_wave`` groups
   (the blast radius). The plan and each wave have a hash.
4. Per wave: a person approves exactly that wave (its applications, groups,
   readiness, path and hash). Right before it runs, the wave is checked again
   against a fresh inventory: anything that changed fails the wave before it
   touches an application.
5. Each application of the wave is one mapped task: snapshot, stop or roll,
   deferred waits (no worker slot held), start, migrated, lag, offsets compared
   with the snapshot: the single-group DAGs' steps.
6. The wave's migrated applications are validated in one Spark application
   (``validate``): every group's committed offsets now against the snapshot
   taken before its move. Mode ``local`` (a local session in the worker),
   ``client`` or ``cluster`` (the Spark connection's standalone master; in
   cluster mode the task defers while the driver runs), from the
   ``validation_mode`` param (default ``$KIP848_FLEET_VALIDATION_MODE``, else
   ``local``). A group whose verdict is not ``pass`` (``fail``, or ``unknown``:
   no report) fails its application.
7. The error budget judges the wave. A failed application (its move, or its
   validation) is brought back (stop, empty, start on classic, offsets
   compared); when the failures exceed the budget, the remaining waves do not
   run.
8. Report: groups by protocol before and after each wave, per-wave duration
   and failures, the longest processing gap per application, plots, and the
   run appended to the fleet's history.

Resuming: trigger the DAG again. The fresh inventory shows what is migrated;
those applications are skipped, and only what is left is planned (and approved)
again. A run has ``KIP848_FLEET_MAX_WAVES`` wave slots (default 6, read when the
DAG is parsed); a plan with more waves runs the first ones and the report says
how many are left for the next run.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pendulum
from airflow.sdk import Param, dag, task, task_group
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_provider_kip848.changecontrol.artifacts import MACROS
from airflow_provider_kip848.operators.approval import KafkaChangeApprovalOperator, change_control_params
from airflow_provider_kip848.operators.fleet import KafkaApplicationMigrationOperator
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.params import artifact_params, window_params
from airflow_provider_kip848.operators.wave_validation import MODES as VALIDATION_MODES
from airflow_provider_kip848.operators.wave_validation import KafkaWaveValidationOperator
from airflow_provider_kip848.operators.window import MaintenanceWindowGuardOperator

DAG_ID = "kip848_fleet_migration"
MIGRATION = "classic_to_consumer"
#: wave slots of one run (parse time): a plan with more waves leaves the rest to the next run
MAX_WAVES = int(os.environ.get("KIP848_FLEET_MAX_WAVES", "6"))
#: applications of one wave whose worker-side steps run at once (deferred waits hold no slot)
PARALLELISM = int(os.environ.get("KIP848_FLEET_PARALLELISM", "8"))
#: where the wave validation runs unless a run says otherwise (local: a Spark session in the worker)
VALIDATION_MODE = os.environ.get("KIP848_FLEET_VALIDATION_MODE", "local")
CONN = "{{ params.kafka_conn_id }}"
SNAPSHOTS = "{{ kip848_run_location(params.snapshot_dir, params.kafka_conn_id, dag, run_id, 'snapshots') }}"
STEP_ARGS = {
    "kafka_conn_id": CONN, "snapshot_dir": SNAPSHOTS, "audit_log": "{{ params.audit_log }}",
    "poll_interval": "{{ params.poll_seconds }}", "remove_members_after": "{{ params.remove_members_after }}",
    "empty_settle_seconds": "{{ params.empty_settle_seconds }}",
    "empty_timeout_minutes": "{{ params.empty_timeout_minutes }}",
    "start_timeout_minutes": "{{ params.start_timeout_minutes }}", "max_lag": "{{ params.max_lag }}",
}


@dag(
    dag_id=DAG_ID,
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "kip848", "migration", "fleet"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    user_defined_macros=MACROS,
    default_args={"retries": 0},
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "ownership_variable": Param("kip848_ownership_map", type=["null", "string"],
                                    title="Ownership map: Airflow Variable",
                                    description="The Variable holding the ownership map (YAML or JSON, see "
                                                "docs/fleet.md). Used when no file is given."),
        "ownership_file": Param(None, type=["null", "string"], title="Ownership map: file",
                                description="A path every worker reads; takes precedence over the Variable."),
        "apps": Param([], type="array", items={"type": "string"}, title="Only these applications"),
        "teams": Param([], type="array", items={"type": "string"}, title="Only these teams"),
        "prefixes": Param([], type="array", items={"type": "string"},
                          title="Only applications owning a group with one of these prefixes"),
        "readiness": Param(["ready_online", "offline_only"], type="array",
                           items={"type": "string", "enum": ["ready_online", "offline_only"]},
                           title="Readiness to select",
                           description="ready_online: a rolling restart; offline_only: the application stops. "
                                       "Leave only ready_online to move nothing with downtime."),
        "canary": Param(2, type="integer", minimum=0, title="Applications in the canary wave"),
        "wave_size": Param(10, type="integer", minimum=1, title="Applications per wave"),
        "max_groups_per_wave": Param(25, type=["null", "integer"], minimum=1, title="Groups per wave at most",
                                     description="The blast radius. Empty: no limit."),
        "max_failed_apps": Param(0, type=["null", "integer"], minimum=0,
                                 title="Error budget: failed applications per wave"),
        "max_failed_ratio": Param(None, type=["null", "number"], minimum=0, maximum=1,
                                  title="Error budget: failed share of a wave (0..1)"),
        "canary_max_failed_apps": Param(0, type="integer", minimum=0,
                                        title="Error budget of the canary wave"),
        "remove_members_after": Param(30, type=["number", "null"], minimum=0,
                                      title="Force out members left behind after (s)"),
        "empty_settle_seconds": Param(10, type="number", minimum=0, title="Empty must last (s)"),
        "empty_timeout_minutes": Param(10, type="number", minimum=0.1, title="Wait for Empty at most (min)"),
        "start_timeout_minutes": Param(10, type="number", minimum=0.1,
                                       title="Groups must be migrated within (min)",
                                       description="Past this the application fails and is brought back."),
        "poll_seconds": Param(5, type="number", minimum=0.2, title="Poll interval of the waits (s)"),
        "max_lag": Param(0, type="integer", minimum=0, title="Lag to drain to"),
        "validation_mode": Param(VALIDATION_MODE, type="string", enum=list(VALIDATION_MODES),
                                 title="Wave validation: where Spark runs",
                                 description="local: a Spark session in the worker; client: spark-submit to the "
                                             "Spark connection's master, driver in the worker; cluster: the driver "
                                             "on the standalone cluster (the task waits deferred). docs/validation.md"),
        "spark_conn_id": Param("spark_default", type="string", title="Wave validation: Spark connection",
                               description="client and cluster modes (master, deploy mode, rest-port)."),
        "validation_dir": Param(os.environ.get("KIP848_VALIDATION_DIR") or None, type=["null", "string"],
                                title="Wave validation: job and report directory",
                                description="A local path (in cluster mode one the Spark workers share). Empty: "
                                            "the run's report location when local, else a temporary directory."),
        **window_params(),
        **artifact_params(),
        "dry_run": Param(False, type="boolean", title="Dry run (inventory and plan only)"),
        **change_control_params(),
    },
)
def kip848_fleet_migration():
    guard = MaintenanceWindowGuardOperator(task_id="window_guard")
    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id=CONN, resource=f"fleet:{MIGRATION}",
                                   dry_run="{{ params.dry_run }}")

    @task
    def plan(params: dict | None = None, **context: Any) -> dict:
        return make_plan(params, context)

    planned = plan()
    guard >> lock >> planned
    previous: Any = planned
    for number in range(1, MAX_WAVES + 1):
        done = wave(number)
        previous >> done
        previous = done

    @task(trigger_rule="all_done")
    def report(params: dict | None = None, **context: Any) -> dict:
        return fleet_report(params, context)

    previous >> report()


def wave(number: int) -> Any:
    """Wave ``number``'s task group: open (or skip), approval, recheck, the mapped moves, judge, way back."""
    prefix = f"wave_{number}"

    @task_group(group_id=prefix)
    def one_wave() -> Any:
        @task(task_id="open", trigger_rule="all_done")
        def open_wave(params: dict | None = None, **context: Any) -> dict:
            return open_wave_step(number, params, context)

        opened = open_wave()
        approval = KafkaChangeApprovalOperator(
            task_id="approval",
            subject=f"Fleet wave {number}: " + "{{ ti.xcom_pull(task_ids='" + prefix + ".open')['title'] }}",
            body="{{ ti.xcom_pull(task_ids='" + prefix + ".open')['markdown'] }}",
            approvers="{{ params.approvers }}", four_eyes="{{ params.four_eyes }}", kafka_conn_id=CONN,
            plan_task_id=f"{prefix}.open", approval_max_age_minutes="{{ params.get('approval_max_age_minutes') }}",
        )

        @task(task_id="recheck")
        def recheck(params: dict | None = None, **context: Any) -> list[dict]:
            return recheck_step(number, params, context)

        units = recheck()
        moves = KafkaApplicationMigrationOperator.partial(
            task_id="migrate", max_active_tis_per_dagrun=PARALLELISM, **STEP_ARGS).expand(application=units)

        @task(task_id="judge", trigger_rule="all_done")
        def judge(params: dict | None = None, **context: Any) -> dict:
            return judge_step(number, params, context)

        @task(task_id="to_roll_back", trigger_rule="all_done")
        def to_roll_back(**context: Any) -> list[dict]:
            """The applications the judge sends back (its XCom rollback_units): the way back maps over them."""
            units = context["ti"].xcom_pull(task_ids=f"{prefix}.judge", key="rollback_units")
            if units is None:
                raise AirflowSkipException(f"wave {number} was not judged")
            return units

        @task(task_id="to_validate", trigger_rule="all_done")
        def to_validate(snapshot_dir: str, params: dict | None = None, **context: Any) -> dict:
            return to_validate_step(number, snapshot_dir, params, context)

        validation = to_validate(SNAPSHOTS)
        pulled = "{{ ti.xcom_pull(task_ids='" + prefix + ".to_validate')"
        validate = KafkaWaveValidationOperator(
            task_id="validate", kafka_conn_id=CONN, groups=pulled + "['groups'] }}",
            output_dir=pulled + "['output_dir'] }}", mode="{{ params.validation_mode }}",
            spark_conn_id="{{ params.spark_conn_id }}", title=f"Fleet wave {number}: committed offsets",
            fail_on_failure=False)
        judged = judge()
        units_back = to_roll_back()
        back = KafkaApplicationMigrationOperator.partial(
            task_id="rollback", kind="rollback", **STEP_ARGS).expand(application=units_back)
        opened >> approval >> units
        moves >> validation >> validate >> judged >> units_back >> back
        moves >> judged  # the judge reads the moves' results whatever became of the validation

    return one_wave()


# -- the steps (module functions: the DAG file stays a runbook) ---------------------------------------


def _ownership(params: dict) -> Any:
    from airflow.sdk import Variable

    from airflow_provider_kip848.fleet import OwnershipMap

    if params.get("ownership_file"):
        return OwnershipMap.from_file(params["ownership_file"])
    name = params.get("ownership_variable")
    if not name:
        raise AirflowFailException("Name the ownership map: ownership_file or ownership_variable.")
    text = Variable.get(name, default=None)
    if text is None:
        raise AirflowFailException(f"There is no Airflow Variable {name!r} holding the ownership map: create it "
                                   "(YAML or JSON, docs/fleet.md) or give ownership_file.")
    return OwnershipMap.from_text(text, source=f"Variable {name}")


def _select(params: dict, inventory: Any) -> Any:
    from airflow_provider_kip848.fleet import select

    return select(inventory, _ownership(params), apps=params["apps"] or None, teams=params["teams"] or None,
                  prefixes=params["prefixes"] or None, readiness=params["readiness"] or None, migration=MIGRATION,
                  require_controller=True)


def check_controllers(selection: Any) -> None:
    """Every selected application's controller is an entry of the deployment's registry, with only the arguments
    it declares: checked before any wave is planned or any group locked (nothing of a controller runs here)."""
    from airflow_provider_kip848.controllers import ControllerRefused
    from airflow_provider_kip848.controllers.registry import ControllerRegistry
    from airflow_provider_kip848.kafka.errors import Kip848Error

    registry = ControllerRegistry.load()
    problems = []
    for app in selection.applications:
        if not app.app_controller:
            continue  # held back by the selection (no controller), said in the plan
        try:
            registry.resolve(app.app_controller, dict(app.app_controller_args)).close()
        except Kip848Error as exc:  # the list of the deployment's controllers comes once, at the end
            problems.append(f"{app.app}: {exc.what.split(' Controllers of this deployment (')[0]}")
    if problems:
        raise ControllerRefused("the ownership map names controllers this deployment cannot use: "
                                + "; ".join(problems) + f". Controllers of this deployment ({registry.source}): "
                                + (", ".join(registry.names()) or "none"))


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


def make_plan(params: dict, context: dict) -> dict:
    """Inventory, ownership, selection and waves: what the approvers of each wave will be shown."""
    from airflow_provider_kip848.changecontrol import storage
    from airflow_provider_kip848.changecontrol.artifacts import optional_run_location
    from airflow_provider_kip848.fleet import plan_waves
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.errors import Kip848Error

    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            inventory = hook.inventory()
        selection = _select(params, inventory)
        check_controllers(selection)
        wave_plan = plan_waves(selection, canary=params["canary"], wave_size=params["wave_size"],
                               max_groups_per_wave=params["max_groups_per_wave"], parallelism=PARALLELISM)
    except Kip848Error as exc:
        raise AirflowFailException(str(exc)) from exc
    owned = [g.group_id for a in selection.applications for g in a.groups]
    markdown = wave_plan.render_markdown()
    if len(wave_plan.waves) > MAX_WAVES:
        markdown += (f"\n\n**{len(wave_plan.waves) - MAX_WAVES} wave(s) beyond this run's {MAX_WAVES} slots** run "
                     "when the DAG is triggered again (the next run plans what is left).")
    out = {"plan": wave_plan.to_dict(), "plan_hash": wave_plan.plan_hash, "markdown": markdown,
           "types_before": _types(inventory, owned), "owned_groups": owned, "slots": MAX_WAVES,
           "nothing_to_do": not wave_plan.waves, "started_at": time.time()}
    location = optional_run_location(params["report_dir"], params["kafka_conn_id"], DAG_ID, context["run_id"], "plan")
    if location:
        storage.write_text(f"{location}/plan.json", _json(out))
        storage.write_text(f"{location}/plan.md", markdown + "\n")
    print(markdown)
    return out


def _json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _states(context: dict) -> dict[str, str]:
    from airflow_provider_kip848.changecontrol.report import task_states

    return task_states(context)


def open_wave_step(number: int, params: dict, context: dict) -> dict:
    """Wave ``number`` runs when the plan has it, the run is not a dry run, and the wave before it was judged
    and allowed to proceed; otherwise it is skipped, saying why."""
    ti = context["ti"]
    planned = ti.xcom_pull(task_ids="plan")
    if not planned:
        raise AirflowSkipException("no plan (the plan task did not succeed)")
    if params["dry_run"]:
        raise AirflowSkipException("dry run: the plan is the result")
    waves = planned["plan"]["waves"]
    if number > len(waves):
        raise AirflowSkipException(f"the plan has {len(waves)} wave(s)")
    if number > 1:
        before = ti.xcom_pull(task_ids=f"wave_{number - 1}.judge")
        if not before or not before.get("verdict"):
            raise AirflowSkipException(f"wave {number - 1} was not judged (not approved, or it failed before "
                                       "running): the remaining waves wait for the next run")
        if not before["verdict"]["proceed"]:
            raise AirflowSkipException(f"stopped by the error budget: {before['verdict']['reason']}")
    wave = waves[number - 1]
    from airflow_provider_kip848.fleet import Wave

    markdown = Wave.from_dict(wave).render_markdown()
    return {"number": number, "hash": wave["wave_hash"], "wave": wave,
            "title": f"{len(wave['applications'])} application(s), {wave['group_count']} group(s)"
                     + (" (canary)" if wave["canary"] else ""),
            "markdown": markdown + f"\n\nPlan hash: `{planned['plan_hash']}`",
            "changes": [{"kind": "protocol", "target": g["group_id"], "before": g["type"], "after": "consumer"}
                        for a in wave["applications"] for g in a["groups"] if g["status"] == "pending"]}


def recheck_step(number: int, params: dict, context: dict) -> list[dict]:
    """The approved wave against a fresh inventory, right before it runs: applications found migrated are
    dropped; any other difference (a group no longer ready, another path, a new group) fails the wave
    before anything is touched. Returns one unit per application to move (the mapped task's input)."""
    from airflow_provider_kip848.fleet import Wave
    from airflow_provider_kip848.fleet.waves import MIGRATED
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.errors import Kip848Error

    ti = context["ti"]
    opened = ti.xcom_pull(task_ids=f"wave_{number}.open")
    decision = ti.xcom_pull(task_ids=f"wave_{number}.approval", key="decision") or {}
    if decision.get("plan_hash") != opened["hash"]:
        raise AirflowFailException(f"the approval of wave {number} is for {decision.get('plan_hash')}, not for the "
                                   f"wave's hash {opened['hash']}")
    approved = Wave.from_dict(opened["wave"])
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            fresh = hook.inventory()
        selection = _select({**params, "apps": list(approved.apps), "teams": [], "prefixes": []}, fresh)
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
        print(f"Already migrated since the plan, skipped: {', '.join(done)}")
    entries = {e.group_id: e for e in fresh.entries}
    return [{"app": a.app, "team": a.team, "wave": number, "path": a.path, "app_controller": a.app_controller,
             "app_controller_args": dict(a.app_controller_args), "expected_instances": a.expected_instances,
             "groups": [{"group_id": g.group_id, "type": g.type, "state": entries[g.group_id].state.value,
                         "live_members": entries[g.group_id].member_count} for g in a.pending]}
            for a in current.applications]


def _results(ti: Any, task_id: str) -> list[dict]:
    pulled = ti.xcom_pull(task_ids=task_id, key="fleet_result")
    if pulled is None:
        return []
    values = [pulled] if isinstance(pulled, dict) else list(pulled)
    return [v for v in values if isinstance(v, dict)]


def to_validate_step(number: int, snapshot_dir: str, params: dict, context: dict) -> dict:
    """What the wave's validation checks: every group of every application whose move succeeded, its
    committed offsets now (a fresh snapshot, kept next to the one taken before the move) against that
    snapshot. The fleet's applications declare no output topics, so the records they wrote are not read:
    the validation proves no committed offset went back or vanished, in one Spark application for the wave."""
    import tempfile

    from airflow_provider_kip848.changecontrol import storage
    from airflow_provider_kip848.changecontrol.artifacts import optional_run_location
    from airflow_provider_kip848.fleet.results import ApplicationResult
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.api import take_snapshot

    ti = context["ti"]
    moved = [r for r in (ApplicationResult.from_dict(d) for d in _results(ti, f"wave_{number}.migrate")) if r.ok]
    if not moved:
        raise AirflowSkipException(f"no application of wave {number} was migrated: nothing to validate")
    base = str(snapshot_dir).rstrip("/")
    groups = []
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        for result in moved:
            for g in result.groups:
                before = f"{base}/{result.app}/{g.group_id}.json"
                after = f"{base}/{result.app}/{g.group_id}.validated.json"
                storage.write_text(after, take_snapshot(hook.get_conn(), g.group_id).to_json())
                groups.append({"group_id": g.group_id, "app": result.app,
                               "offsets_preserved": {"before": before, "after": after, "allow_advanced": True}})
    output = params.get("validation_dir")
    if not output:
        location = optional_run_location(params["report_dir"], params["kafka_conn_id"], DAG_ID, context["run_id"],
                                         "validation")
        output = location if location and "://" not in location else f"{tempfile.gettempdir()}/kip848-validation"
    output = f"{str(output).rstrip('/')}/wave_{number}"
    print(f"Validating {len(groups)} group(s) of {len(moved)} application(s) in one Spark application "
          f"({params['validation_mode']} mode), reports under {output}")
    return {"groups": groups, "output_dir": output}


def validated_results(number: int, results: list, ti: Any, states: dict[str, str]) -> list:
    """The migrate results with the wave validation applied (``fleet.results.apply_validation``): the groups
    the validation was to check fail unless their verdict is ``pass``; no verdict at all is ``unknown``. When
    the validation could not even be prepared (``to_validate`` failed), every migrated group is unknown."""
    from airflow_provider_kip848.fleet.results import apply_validation

    planned = ti.xcom_pull(task_ids=f"wave_{number}.to_validate") or {}
    checked = {g["group_id"] for g in planned.get("groups") or []}
    if not checked and states.get(f"wave_{number}.to_validate") in ("failed", "upstream_failed"):
        checked = {g.group_id for r in results if r.ok for g in r.groups}
    if not checked:
        return results
    verdicts = ti.xcom_pull(task_ids=f"wave_{number}.validate", key="wave_verdicts")
    print(f"Wave {number} validation: " + (f"{verdicts['verdict']} ({verdicts['summary']})" if verdicts
                                          else "no verdict (the validation failed or did not run): unknown"))
    return apply_validation(results, checked, (verdicts or {}).get("groups"))


def judge_step(number: int, params: dict, context: dict) -> dict:
    """The error budget's verdict on the wave, the groups by type after it, and which applications go back."""
    from airflow_provider_kip848.changecontrol.approvals import is_approving
    from airflow_provider_kip848.fleet import ErrorBudget, Wave, WaveVerdict
    from airflow_provider_kip848.fleet.results import ApplicationResult, WaveRecord
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.operators.fleet import changed

    ti = context["ti"]
    opened = ti.xcom_pull(task_ids=f"wave_{number}.open")
    if not opened:
        raise AirflowSkipException(f"wave {number} did not open")
    decision = ti.xcom_pull(task_ids=f"wave_{number}.approval", key="decision") or {}
    if not is_approving(decision.get("decision")):
        raise AirflowSkipException(f"wave {number} was not approved ({decision.get('decision') or 'no answer'})")
    units = ti.xcom_pull(task_ids=f"wave_{number}.recheck")
    ran = Wave.from_dict(opened["wave"])
    results = validated_results(number, [ApplicationResult.from_dict(r)
                                         for r in _results(ti, f"wave_{number}.migrate")], ti, _states(context))
    if units is None:  # approved, then the recheck refused (or failed): nothing ran, nothing may follow
        verdict = WaveVerdict(wave=number, proceed=False,
                              reason=f"wave {number}: the recheck against a fresh inventory did not pass "
                                     f"({_states(context).get(f'wave_{number}.recheck')}); nothing was touched")
        units = []
    else:
        budget = ErrorBudget(max_failed_apps=params["max_failed_apps"], max_failed_ratio=params["max_failed_ratio"],
                             canary_max_failed_apps=params["canary_max_failed_apps"])
        moved = {u["app"] for u in units}
        verdict = budget.judge_wave(ran.without(set(ran.apps) - moved), [g for r in results for g in r.group_results])
    owned = (ti.xcom_pull(task_ids="plan") or {}).get("owned_groups") or []
    try:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            types_after = _types(hook.inventory(owned), owned)
    except Exception as exc:  # noqa: BLE001 - the record says unknown, never a guessed count
        print(f"Groups by type after wave {number}: unknown ({exc})")
        types_after = {}
    by_app = {r.app: r for r in results}
    back = [u for u in units if u["app"] in verdict.failed_apps
            and (u["app"] not in by_app or changed(by_app[u["app"]].to_dict()))]
    ti.xcom_push(key="rollback_units", value=back)
    record = WaveRecord(number=number, canary=ran.canary, wave_hash=ran.wave_hash, apps=ran.apps,
                        group_ids=ran.group_ids, results=tuple(results), verdict=verdict,
                        started_at=min((r.started_at for r in results if r.started_at), default=None),
                        ended_at=max((r.ended_at for r in results if r.ended_at), default=None),
                        approved_by=decision.get("by"), approved_at=decision.get("at"), types_after=types_after)
    print(verdict.reason)
    return record.to_dict()


def fleet_report(params: dict, context: dict) -> dict:
    """The run's fleet report (groups by protocol per wave, per-wave duration and failures, gaps per
    application, plots), its history line, and the change locks released."""
    from airflow_provider_kip848.changecontrol import fleet_report as F
    from airflow_provider_kip848.changecontrol.approvals import is_approving
    from airflow_provider_kip848.changecontrol.artifacts import artifact_root, optional_run_location
    from airflow_provider_kip848.fleet.results import ApplicationResult, WaveRecord
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.lock import ChangeLock
    from airflow_provider_kip848.operators.lock import release_change_lock, run_owner

    ti = context["ti"]
    planned = ti.xcom_pull(task_ids="plan")
    waves = []
    for number in range(1, MAX_WAVES + 1):
        record = ti.xcom_pull(task_ids=f"wave_{number}.judge")
        if record:
            rollbacks = tuple(ApplicationResult.from_dict(r) for r in _results(ti, f"wave_{number}.rollback"))
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
        print(f"Could not release every group lock or read the groups after the run: {exc}")
    fleet_lock = release_change_lock(context)
    decisions = [ti.xcom_pull(task_ids=f"wave_{n}.approval", key="decision") for n in range(1, MAX_WAVES + 1)]
    outcome = fleet_outcome(params, planned, waves, _states(context),
                            rejected=any(d and not is_approving(d.get("decision")) for d in decisions))
    report = F.build_fleet_report(
        plan=(planned or {}).get("plan"), waves=waves, types_before=(planned or {}).get("types_before") or {},
        types_after=types_after, run_id=context["run_id"], dag_id=DAG_ID, outcome=outcome,
        started_at=(planned or {}).get("started_at"), ended_at=time.time())
    report["locks"] = {"fleet": fleet_lock, "groups": released}
    root = artifact_root(params["report_dir"], params["kafka_conn_id"])
    history = None
    if root and not params["dry_run"] and planned:  # the fleet over time: one line per run that planned
        where = f"{root.rstrip('/')}/{DAG_ID}/history.jsonl"
        F.append_history(where, report)
        history = F.load_history(where)
    location = optional_run_location(params["report_dir"], params["kafka_conn_id"], DAG_ID, context["run_id"],
                                     "report")
    if location:
        report["files"] = F.write_fleet_report(location, report, history=history)
    print(F.render_fleet_markdown(report))
    if outcome in ("failed", "stopped", "completed_with_failures"):
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


dag_object = kip848_fleet_migration()

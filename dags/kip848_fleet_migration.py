"""Fleet migration: every owned classic consumer group of a cluster to KIP-848 (``group.protocol=consumer``), in waves.

Runbook (the single-group runbooks, applied to a fleet by its owners' applications):

1. Take the fleet's inventory in batched requests (every group: type, state,
   members, offsets, lag, a readiness verdict) and read the platform team's
   ownership map (an Airflow Variable, or a file): group -> application, team,
   controller, instances.
2. Select the applications (by application, team, group prefix, readiness;
   the whole fleet only with ``all_applications``: empty filters select
   nothing and are refused). The map must give each group of the inventory
   one application and each application at least one group: a group claimed
   by two applications fails the plan naming both rules, an application whose
   rules match no group is shown in the plan, which is then not approvable.
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
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, TaskGroup, dag, task, task_group
from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_kip848.changecontrol.artifacts import MACROS
from airflow_provider_kip848.changecontrol.runpaths import NAME_FORM_PATTERN
from airflow_provider_kip848.fleet.names import (
    APPROVAL,
    FLEET_DAG_ID,
    JUDGE,
    LOCK_TASK,
    MIGRATE_TASK,
    OPEN,
    PLAN_TASK,
    RECHECK,
    REPORT_TASK,
    ROLLBACK_TASK,
    ROLLBACK_UNITS_KEY,
    TO_ROLL_BACK,
    TO_VALIDATE,
    VALIDATE,
    WINDOW_GUARD_TASK,
    wave_group,
    wave_task,
)
from airflow_provider_kip848.kafka.arguments import MAX_MEMBERS, MAX_MINUTES, MAX_POLL_SECONDS, MAX_SECONDS
from airflow_provider_kip848.operators import fleet_tasks as steps
from airflow_provider_kip848.operators.approval import KafkaChangeApprovalOperator, change_control_params
from airflow_provider_kip848.operators.fleet import KafkaApplicationMigrationOperator
from airflow_provider_kip848.operators.fleet_tasks import MAX_WAVES, MIGRATION, PARALLELISM
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.params import lag_params, lag_wait_args, window_params
from airflow_provider_kip848.operators.report_link import with_report_link
from airflow_provider_kip848.operators.schedule import deployment_schedule
from airflow_provider_kip848.operators.wave_validation import MODES as VALIDATION_MODES
from airflow_provider_kip848.operators.wave_validation import KafkaWaveValidationOperator
from airflow_provider_kip848.operators.window import KafkaMaintenanceWindowGuardOperator

DAG_ID = FLEET_DAG_ID
#: where the wave validation runs unless a run says otherwise (local: a Spark session in the worker)
VALIDATION_MODE = os.environ.get("KIP848_FLEET_VALIDATION_MODE", "local")
#: a move's task process lost by the executor or a worker is retried, and the retry takes the move up at its
#: recorded step (a failed move fails for good: AirflowFailException is never retried)
MOVE_RETRIES = {"retries": 2, "retry_delay": timedelta(seconds=2)}
CONN = "{{ params.kafka_conn_id }}"
SNAPSHOTS = "{{ kip848_run_location(params.kafka_conn_id, dag, run_id, 'snapshots') }}"
STEP_ARGS = {
    "kafka_conn_id": CONN, "snapshot_dir": SNAPSHOTS,
    "poll_interval": "{{ params.poll_seconds }}", "remove_members_after": "{{ params.remove_members_after }}",
    "empty_settle_seconds": "{{ params.empty_settle_seconds }}",
    "empty_timeout_minutes": "{{ params.empty_timeout_minutes }}",
    "start_timeout_minutes": "{{ params.start_timeout_minutes }}", **lag_wait_args(),
    "first_instance_timeout_minutes": "{{ params.first_instance_timeout_minutes }}",
}


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
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
        "ownership_file": Param(None, type=["null", "string"], pattern=NAME_FORM_PATTERN,
                                title="Ownership map: a file of the deployment's ownership folder",
                                description="The file's name alone (fleet.yaml), never a path: the folder is the "
                                            "deployment's ([kip848] ownership_dir). Takes precedence over the "
                                            "Variable."),
        "apps": Param([], type="array", items={"type": "string", "minLength": 1}, title="Only these applications"),
        "teams": Param([], type="array", items={"type": "string", "minLength": 1}, title="Only these teams"),
        "prefixes": Param([], type="array", items={"type": "string", "minLength": 1},
                          title="Only applications owning a group with one of these prefixes"),
        "all_applications": Param(False, type="boolean", title="Every application of the ownership map",
                                  description="Plan the whole fleet. Empty filters never mean every application: "
                                              "without this, name applications, teams or prefixes (not both)."),
        "readiness": Param(["ready_online", "offline_only"], type="array", minItems=1,
                           items={"type": "string", "enum": ["ready_online", "offline_only"]},
                           title="Readiness to select",
                           description="ready_online: a rolling restart; offline_only: the application stops. "
                                       "Leave only ready_online to move nothing with downtime."),
        "canary": Param(2, type="integer", minimum=0, maximum=MAX_MEMBERS, title="Applications in the canary wave"),
        "wave_size": Param(10, type="integer", minimum=1, maximum=MAX_MEMBERS, title="Applications per wave"),
        "max_groups_per_wave": Param(25, type=["null", "integer"], minimum=1, maximum=MAX_MEMBERS,
                                     title="Groups per wave at most",
                                     description="The blast radius. Empty: no limit."),
        "max_failed_apps": Param(0, type=["null", "integer"], minimum=0, maximum=MAX_MEMBERS,
                                 title="Error budget: failed applications per wave"),
        "max_failed_ratio": Param(None, type=["null", "number"], minimum=0, maximum=1,
                                  title="Error budget: failed share of a wave (0..1)"),
        "canary_max_failed_apps": Param(0, type="integer", minimum=0, maximum=MAX_MEMBERS,
                                        title="Error budget of the canary wave"),
        "remove_members_after": Param(30, type=["number", "null"], minimum=0, maximum=MAX_SECONDS,
                                      title="Force out members left behind after (s)"),
        "empty_settle_seconds": Param(10, type="number", minimum=0, maximum=MAX_SECONDS, title="Empty must last (s)"),
        "empty_timeout_minutes": Param(10, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                       title="Wait for Empty at most (min)"),
        "start_timeout_minutes": Param(10, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                       title="Groups must be migrated within (min)",
                                       description="Past this the application fails and is brought back."),
        "first_instance_timeout_minutes": Param(5, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                                title="First-instance gate of the online path (min)",
                                                description="With a controller that can restart one instance: "
                                                            "the first one must come in on the new protocol "
                                                            "within this, before any other restarts."),
        "poll_seconds": Param(5, type="number", minimum=0.2, maximum=MAX_POLL_SECONDS,
                              title="Poll interval of the waits (s)"),
        **lag_params("of each group after its move (the baseline: the move's own snapshot)"),
        "validation_mode": Param(VALIDATION_MODE, type="string", enum=list(VALIDATION_MODES),
                                 title="Wave validation: where Spark runs",
                                 description="local: a Spark session in the worker; client: spark-submit to the "
                                             "Spark connection's master, driver in the worker; cluster: the driver "
                                             "on the standalone cluster (the task waits deferred). docs/validation.md"),
        "spark_conn_id": Param("spark_default", type="string", title="Wave validation: Spark connection",
                               description="client and cluster modes (master, deploy mode, rest-port)."),
        **window_params(),
        "dry_run": Param(False, type="boolean", title="Dry run (inventory and plan only)"),
        **change_control_params(),
    },
)
def kip848_fleet_migration():
    guard = KafkaMaintenanceWindowGuardOperator(task_id=WINDOW_GUARD_TASK)
    lock = KafkaChangeLockOperator(task_id=LOCK_TASK, kafka_conn_id=CONN, resource=f"fleet:{MIGRATION}",
                                   dry_run="{{ params.dry_run }}")

    @task(task_id=PLAN_TASK)
    def plan(params: dict | None = None, **context: Any) -> dict:
        return steps.make_plan(params, context)

    planned = plan()
    guard >> lock >> planned
    previous: Any = planned
    for number in range(1, MAX_WAVES + 1):
        done = wave(number)
        previous >> done
        previous = done

    @task(task_id=REPORT_TASK, trigger_rule="all_done")
    def report(params: dict | None = None, **context: Any) -> dict:
        return steps.report_step(params, context)

    previous >> with_report_link(report())


def wave(number: int) -> TaskGroup:
    """Wave ``number``'s task group: open (or skip), approval, recheck, the mapped moves, judge, way back."""

    def pulled(task: str, key: str) -> str:
        return "{{ ti.xcom_pull(task_ids='" + wave_task(number, task) + "')['" + key + "'] }}"

    @task_group(group_id=wave_group(number))
    def one_wave() -> Any:
        @task(task_id=OPEN, trigger_rule="all_done")
        def open_wave(params: dict | None = None, **context: Any) -> dict:
            return steps.open_wave_step(number, params, context)

        opened = open_wave()
        approval = KafkaChangeApprovalOperator(
            task_id=APPROVAL, subject=f"Fleet wave {number}: " + pulled(OPEN, "title"), body=pulled(OPEN, "markdown"),
            approvers="{{ params.approvers }}", four_eyes="{{ params.four_eyes }}", kafka_conn_id=CONN,
            plan_task_id=wave_task(number, OPEN),
            approval_max_age_minutes="{{ params.get('approval_max_age_minutes') }}",
        )

        @task(task_id=RECHECK)
        def recheck(params: dict | None = None, **context: Any) -> list[dict]:
            return steps.recheck_step(number, params, context)

        units = recheck()
        moves = KafkaApplicationMigrationOperator.partial(
            task_id=MIGRATE_TASK, max_active_tis_per_dagrun=PARALLELISM, **MOVE_RETRIES, **STEP_ARGS,
        ).expand(application=units)

        @task(task_id=JUDGE, trigger_rule="all_done")
        def judge(snapshot_dir: str, params: dict | None = None, **context: Any) -> dict:
            return steps.judge_step(number, snapshot_dir, params, context)

        @task(task_id=TO_ROLL_BACK, trigger_rule="all_done")
        def to_roll_back(**context: Any) -> list[dict]:
            """The applications the judge sends back: the way back maps over them."""
            units = context["ti"].xcom_pull(task_ids=wave_task(number, JUDGE), key=ROLLBACK_UNITS_KEY)
            if units is None:
                raise AirflowSkipException(f"wave {number} was not judged")
            return units

        @task(task_id=TO_VALIDATE, trigger_rule="all_done")
        def to_validate(snapshot_dir: str, params: dict | None = None, **context: Any) -> dict:
            return steps.to_validate_step(number, snapshot_dir, params, context)

        validation = to_validate(SNAPSHOTS)
        validate = KafkaWaveValidationOperator(
            task_id=VALIDATE, kafka_conn_id=CONN, groups=pulled(TO_VALIDATE, "groups"),
            output_dir=pulled(TO_VALIDATE, "output_dir"), mode="{{ params.validation_mode }}",
            spark_conn_id="{{ params.spark_conn_id }}", title=f"Fleet wave {number}: committed offsets",
            fail_on_failure=False)
        judged = judge(SNAPSHOTS)
        units_back = to_roll_back()
        back = KafkaApplicationMigrationOperator.partial(
            task_id=ROLLBACK_TASK, kind="rollback", **MOVE_RETRIES, **STEP_ARGS).expand(application=units_back)
        opened >> approval >> units
        moves >> validation >> validate >> judged >> units_back >> back
        moves >> judged  # the judge reads the moves' results whatever became of the validation

    return one_wave()


dag_object = kip848_fleet_migration()

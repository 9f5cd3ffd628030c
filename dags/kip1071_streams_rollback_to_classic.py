"""The way back: a Kafka Streams application's streams group (KIP-1071) to the classic protocol, offline.

For when a migrated application has to go back after the migration run ended
(a regression found days later, a client that must be downgraded): the
automatic fallback of ``kip1071_streams_offline_migration`` covers only an
application that does not come up. The broker supports the way back: an
*empty* streams group converts to a classic group on the first classic join,
and its committed offsets carry over. Only committed offsets survive.

Runbook (Kafka docs, "Streams Rebalance Protocol", downgrade):

1. Only inside the maintenance window (a trigger outside it fails at once).
2. Preflight (mode ``streams_to_classic``): brokers, the classic protocol
   enabled, the group a streams group; declared source topics exist.
3. Check the application's controller (a name from the deployment's registry,
   never code: an unknown name or argument is refused before the change lock).
   Lint the client config the application will run with on classic, as the
   controller reads it from the platform (the form's keys on top, shown as
   such), and compare the assignment
   settings the streams group uses now (its ``streams.*`` group configs, else
   the brokers' defaults) with what the classic application will use (its own
   ``num.standby.replicas``, ``session.timeout.ms``, ``heartbeat.interval.ms``):
   each difference is shown in the approval as before -> after (standbys that
   were only a group config are lost unless the application config has them).
4. Snapshot the committed offsets.
5. One approval for the whole downtime (not by whoever triggered the run);
   right before the downtime the plan is computed again and an expired or
   changed approval is not reused.
6. Stop every instance through the controller, until the platform shows none.
7. Wait until the group is Empty (a streams group refuses LeaveGroup: a member
   that is gone leaves when ``streams.session.timeout.ms`` runs out); a member
   seen after the group was empty fails the run, named.
8. Put back any committed offset a step lost (nothing, normally).
9. Check once more that the group is Empty and the source topics exist, then
   start the application with ``group.protocol=classic``; wait for a classic
   group with every expected member on it, each proven alive (progress, or
   listed through its session timeout) and every instance running on the
   platform, none restarted since the start.
10. If that does not happen in time, the DAG goes back to where it started:
    stop, Empty, start on streams, wait for it, compare the offsets with the
    snapshot, and report "rolled back". The application is never left down.
11. Otherwise: wait until the group has caught up (its lag back at the level of
    the snapshot before the stop plus a margin, or not growing while it commits;
    ``max_lag`` an absolute override), compare offsets with the snapshot,
    snapshot again and validate with PySpark; report.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.changecontrol.artifacts import MACROS
from airflow_provider_kip848.changecontrol.window import window_note
from airflow_provider_kip848.kafka.arguments import GROUP_ID_PATTERN, MAX_MEMBERS, MAX_MINUTES, MAX_POLL_SECONDS
from airflow_provider_kip848.operators.application import (
    KafkaApplicationControllerOperator,
    KafkaApplicationStartOperator,
    KafkaApplicationStopOperator,
    approved_fingerprint,
    instances_gone,
    start_baseline,
)
from airflow_provider_kip848.operators.approval import (
    APPROVAL_ARGS,
    RECHECK_ARGS,
    KafkaApprovalRecheckOperator,
    KafkaChangeApprovalOperator,
    change_control_params,
)
from airflow_provider_kip848.operators.lint import KafkaClientConfigLintOperator
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.metrics import KafkaGroupMetricsOperator
from airflow_provider_kip848.operators.offsets import (
    KafkaCompareGroupOffsetsOperator,
    KafkaRestoreGroupOffsetsOperator,
    KafkaSnapshotGroupOffsetsOperator,
)
from airflow_provider_kip848.operators.params import (
    downtime_params,
    lag_params,
    lag_wait_args,
    validation_params,
    window_params,
)
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from airflow_provider_kip848.operators.report import PREFLIGHT, RunReport, downtime_rule, report_task
from airflow_provider_kip848.operators.schedule import deployment_schedule
from airflow_provider_kip848.operators.validation import KafkaValidationOperator
from airflow_provider_kip848.operators.window import KafkaMaintenanceWindowGuardOperator
from airflow_provider_kip848.sensors.group import (
    KafkaGroupEmptySensor,
    KafkaGroupLagSensor,
    KafkaGroupMigratedSensor,
    group_seen_by,
    stop_result_of,
)

DAG_ID = "kip1071_streams_rollback_to_classic"
CONN = "{{ params.kafka_conn_id }}"
GROUP = "{{ params.application_id }}"
#: the snapshot before the stop described the group: gone after that, it was deleted (empty)
SEEN = group_seen_by("snapshot_before")
SNAPSHOTS = "{{ kip848_run_location(params.kafka_conn_id, dag, run_id, 'snapshots') }}"
EXPECTED = "{{ ti.xcom_pull(task_ids='make_plan')['facts']['expected_instances'] }}"
BEFORE = "{{ ti.xcom_pull(task_ids='snapshot_before')['path'] }}"
AFTER = "{{ ti.xcom_pull(task_ids='snapshot_after')['path'] }}"
POLL = "{{ params.poll_seconds }}"
CONTROLLER = {"controller": "{{ params.app_controller }}", "controller_args": "{{ params.app_controller_args }}"}
#: the actions (stop, start, roll) also carry the controller's fingerprint the approval showed: a registry entry
#: edited since is refused
ACTION = {**CONTROLLER, "approved_fingerprint": approved_fingerprint()}
#: the instances the application runs (the platform's count when the plan is made; else the expected members)
INSTANCES = "{{ ti.xcom_pull(task_ids='make_plan')['facts']['instances'] }}"


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "kip1071", "streams", "rollback", "downtime"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    user_defined_macros=MACROS,
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "application_id": Param("", type="string", minLength=1, pattern=GROUP_ID_PATTERN,
                                title="Streams application.id (the group)"),
        "application_properties": Param({}, type="object", title="Client properties over the controller's",
                                        description="The controller reads the config the application will run "
                                                    "with on classic; keys typed here override it (shown as such). "
                                                    "Linted for the classic protocol; its num.standby.replicas, "
                                                    "session.timeout.ms and heartbeat.interval.ms are compared with "
                                                    "the streams group's settings (shown in the approval)."),
        "client_version": Param(None, type=["null", "string"], pattern=r"^\d+\.\d+(\.\d+)?$",
                                title="Kafka Streams release of the application (e.g. 4.2.1)"),
        "source_topics": Param(None, type=["null", "string"], title="Source topics (comma-separated)",
                               description="Checked to exist before the restart. Empty: not checked."),
        "expected_instances": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_MEMBERS,
                                    title="Instances the application runs",
                                    description="Done when this many live members run the classic protocol. Empty: "
                                                "the number of live members when the plan is made."),
        **downtime_params(),
        "start_timeout_minutes": Param(10, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                       title="The restarted application must be in within (min)",
                                       description="Past this the DAG goes back to the streams protocol."),
        "poll_seconds": Param(5, type="number", minimum=0.2, maximum=MAX_POLL_SECONDS,
                              title="Poll interval of the waits (s)"),
        **lag_params(),
        **window_params(),
        **validation_params(),
        "dry_run": Param(False, type="boolean", title="Dry run (checks and plan only)"),
        **change_control_params(),
    },
)
def kip1071_streams_rollback_to_classic():
    guard = KafkaMaintenanceWindowGuardOperator(task_id="window_guard")
    controller = KafkaApplicationControllerOperator(task_id="controller", group_protocol="classic",
                                                    way_back_protocol="streams", **CONTROLLER)

    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id=CONN, resource=f"group:{GROUP}",
                                   dry_run="{{ params.dry_run }}")
    preflight = KafkaMigrationPreflightOperator(task_id="preflight", kafka_conn_id=CONN, mode="streams_to_classic",
                                           group_id=GROUP, expect_empty=False,
                                           source_topics="{{ params.source_topics }}")

    # the config the application will run with on classic, as its controller reads it (the form's on top)
    lint = KafkaClientConfigLintOperator(task_id="lint_client_config", target="classic", client="java",
                                    properties="{{ params.application_properties }}",
                                    client_version="{{ params.client_version }}",
                                    controller_result="{{ ti.xcom_pull(task_ids='controller') }}",
                                    use_controller=True)

    @task
    def settings_on_classic(params: dict | None = None, **context) -> dict:
        return returned_settings(params, context["ti"].xcom_pull(task_ids="controller"))

    snapshot_before = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_before", kafka_conn_id=CONN, group_id=GROUP,
                                                   path=f"{SNAPSHOTS}/before.json")

    @task
    def make_plan(lint_result: dict, preflight_report: dict, settings: dict, snapshot: dict, controller_result: dict,
                  params: dict | None = None) -> dict:
        return build_plan(params, lint_result, preflight_report["checks"], settings, snapshot, controller_result)

    @task.branch
    def route(plan: dict, params: dict | None = None) -> str:
        return "report" if plan["nothing_to_do"] or params["dry_run"] else "approval"

    approval = KafkaChangeApprovalOperator(
        task_id="approval", subject="Downtime: streams application {{ params.application_id }} back to classic",
        body="{{ ti.xcom_pull(task_ids='make_plan')['markdown'] }}", **APPROVAL_ARGS)
    recheck = KafkaApprovalRecheckOperator(task_id="recheck_approval", replan=replan, **RECHECK_ARGS)
    stop = KafkaApplicationStopOperator(task_id="stop_application", **ACTION)
    wait_empty = KafkaGroupEmptySensor(task_id="wait_empty", kafka_conn_id=CONN, group_id=GROUP,
                                       poll_interval=POLL, remove_members_after="{{ params.remove_members_after }}",
                                       settle_seconds="{{ params.empty_settle_seconds }}",
                                       instances_gone=instances_gone("stop_application"),
                                       stop_result=stop_result_of("stop_application"),
                                       timeout_minutes="{{ params.empty_timeout_minutes }}", allow_absent=SEEN,
        **CONTROLLER)
    restore = KafkaRestoreGroupOffsetsOperator(task_id="restore_lost_offsets", kafka_conn_id=CONN, group_id=GROUP,
                                          snapshot_path=BEFORE)
    start = KafkaApplicationStartOperator(task_id="start_application", kafka_conn_id=CONN, group_id=GROUP,
                                          group_protocol="classic", source_topics="{{ params.source_topics }}",
                                          expected_instances=INSTANCES, **ACTION)
    wait_classic = KafkaGroupMigratedSensor(
        task_id="wait_classic", kafka_conn_id=CONN, group_id=GROUP, group_type="classic", expected_members=EXPECTED,
        poll_interval=POLL, timeout_minutes="{{ params.start_timeout_minutes }}",
        expected_instances=INSTANCES, baseline=start_baseline("start_application"), **CONTROLLER)
    # caught up at the lag before the stop (its snapshot) plus the margin, or a lag that stops growing: never lag 0
    wait_lag = KafkaGroupLagSensor(task_id="wait_lag_drained", kafka_conn_id=CONN, group_id=GROUP,
                                   baseline_snapshot=BEFORE, **lag_wait_args(), poll_interval=POLL,
                                   timeout_minutes="{{ params.start_timeout_minutes }}",
                                   baseline=start_baseline("start_application"), **CONTROLLER)
    compare = KafkaCompareGroupOffsetsOperator(task_id="compare_offsets", kafka_conn_id=CONN, group_id=GROUP,
                                          snapshot_path=BEFORE)
    snapshot_after = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_after", kafka_conn_id=CONN, group_id=GROUP,
                                                  path=f"{SNAPSHOTS}/after.json")

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def spark_enabled(params: dict | None = None) -> bool:
        return bool(params["validate_with_spark"])

    validate = KafkaValidationOperator(
        task_id="validate", kafka_conn_id=CONN, output_dir=f"{SNAPSHOTS}/validation", reader="{{ params.reader }}",
        title="{{ params.application_id }} back to classic",
        checks={"offsets_preserved": {"before": BEFORE, "after": AFTER, "allow_advanced": True},
                "lag": {"before": BEFORE, "after": AFTER, "max_total_lag": "{{ params.max_lag }}",
                        "margin_fraction": "{{ params.lag_margin_fraction }}",
                        "margin_records": "{{ params.lag_margin_records }}"}},
    )

    # -- back to where the run started: only when the classic application did not come in within its deadline
    rollback_stop = KafkaApplicationStopOperator(task_id="rollback_stop", when_failed=["wait_classic"],
                                                 trigger_rule="all_done", **ACTION)
    rollback_wait_empty = KafkaGroupEmptySensor(
        task_id="rollback_wait_empty", kafka_conn_id=CONN, group_id=GROUP, poll_interval=POLL,
        remove_members_after="{{ params.remove_members_after }}", settle_seconds="{{ params.empty_settle_seconds }}",
        instances_gone=instances_gone("rollback_stop"),
        stop_result=stop_result_of("rollback_stop"),
        timeout_minutes="{{ params.empty_timeout_minutes }}", allow_absent=SEEN,
        **CONTROLLER)
    rollback_start = KafkaApplicationStartOperator(task_id="rollback_start", kafka_conn_id=CONN, group_id=GROUP,
                                                   group_protocol="streams", expected_instances=INSTANCES,
                                                   **ACTION)
    rollback_wait = KafkaGroupMigratedSensor(
        task_id="rollback_wait_streams", kafka_conn_id=CONN, group_id=GROUP, group_type="streams",
        expected_members=INSTANCES, poll_interval=POLL,
        timeout_minutes="{{ params.start_timeout_minutes }}", baseline=start_baseline("rollback_start"),
        **CONTROLLER)
    rollback_compare = KafkaCompareGroupOffsetsOperator(task_id="rollback_compare_offsets", kafka_conn_id=CONN,
                                                   group_id=GROUP, snapshot_path=BEFORE)

    report = RunReport(
        title=lambda p: f"{p['application_id']} back to the classic protocol",
        outcome=downtime_rule(done="back_on_classic", way_back_task="rollback_compare_offsets",
                              deadline_tasks=("wait_classic",)),
        group_param="application_id", target=lambda p: "classic", validation_task=None,
        results={"window": "window_guard", "controller": "controller", "preflight": PREFLIGHT,
                 "lint": "lint_client_config", "settings_on_classic": "settings_on_classic",
                 "stopped": "stop_application", "emptied": "wait_empty", "restored": "restore_lost_offsets",
                 "started": "start_application", "back": "wait_classic", "offsets_vs_snapshot": "compare_offsets",
                 "lag": "wait_lag_drained", "validation": "validate",
                 "rollback": {"stopped": "rollback_stop", "restarted": "rollback_start",
                              "back": "rollback_wait_streams", "offsets_vs_snapshot": "rollback_compare_offsets"}},
        change_tasks=("wait_empty", "restore_lost_offsets", "rollback_wait_empty"),
        fail_outcomes=lambda p: ("failed", "refused", "rolled_back"),
    )

    settings = settings_on_classic()
    plan = make_plan(lint.output, preflight.output, settings, snapshot_before.output, controller.output)
    guard >> controller >> lock >> [preflight, lint, settings]
    [preflight, lint, settings] >> snapshot_before >> plan
    decision = route(plan)
    final = report_task(report, task_id="report")
    (decision >> approval >> recheck >> stop >> wait_empty >> restore >> start >> wait_classic >> wait_lag
     >> compare >> snapshot_after)
    # the brokers' group metrics before, during and after the change (side branches: they never gate it)
    snapshot_before >> KafkaGroupMetricsOperator(task_id="metrics_before", kafka_conn_id=CONN, point="before") >> final
    start >> KafkaGroupMetricsOperator(task_id="metrics_during", kafka_conn_id=CONN, point="during") >> final
    snapshot_after >> KafkaGroupMetricsOperator(task_id="metrics_after", kafka_conn_id=CONN, point="after") >> final
    snapshot_after >> spark_enabled() >> validate >> final
    wait_classic >> rollback_stop >> rollback_wait_empty >> rollback_start >> rollback_wait >> rollback_compare
    rollback_compare >> final
    decision >> final


def returned_settings(params: dict, controller_result: dict | None = None) -> dict:
    """The streams group's assignment settings against the classic application's (kafka.rules.carried_settings):
    its config as the controller reads it for classic, the form's keys on top."""
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.rules.carried_settings import carry_back

    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        dynamic = hook.describe_group_config(params["application_id"]).dynamic
        broker = hook.group_coordinator_config().values
    config = (controller_result or {}).get("config") or {}
    properties = {**(config.get("properties") or {}), **(params["application_properties"] or {})}
    settings = carry_back(properties, dynamic, broker)
    return {"settings": [s.to_dict() for s in settings]}


def build_plan(params: dict, lint_result: dict | None = None, checks: list | None = None,
               settings: dict | None = None, snapshot: dict | None = None,
               controller_result: dict | None = None) -> dict:
    """The downtime plan to approve (computed again right before the downtime starts)."""
    from airflow_provider_kip848.changecontrol.plan import Change, Plan
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.model import GroupType
    from airflow_provider_kip848.kafka.rules.conditions import is_live
    from airflow_provider_kip848.operators.application import plan_lines
    from airflow_provider_kip848.operators.lint import lint_lines

    group = params["application_id"]
    settings = settings or returned_settings(params, controller_result)
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        desc = hook.describe_group(group)
    live = [m for m in desc.members if is_live(m)]
    expected = params["expected_instances"] or len(live)
    nothing = desc.type is GroupType.CLASSIC and all(m.protocol.value == "classic" for m in live)
    changes = [] if nothing else [
        Change("application", group, f"running ({len(live)} instance(s))", "stopped", "downtime starts"),
        Change("protocol", group, desc.type.value, "classic", "restart with group.protocol=classic"),
    ]
    notes = [window_note(params), "one approval covers the whole downtime",
             f"done when {expected} live member(s) run the classic protocol; otherwise the DAG restarts the "
             "application on streams (where it started) and reports 'rolled back'"]
    for raw in settings["settings"]:
        if raw["changes"] and not nothing:
            changes.append(Change("setting", f"{group}:{raw['config']}", raw["current"] or "(unknown)", raw["value"],
                                  f"the classic protocol reads the application's config: {raw['source']}"))
            notes.append(f"{raw['config']}: the streams group uses {raw['current']}, the classic application will "
                         f"use {raw['value']} ({raw['source']}); to keep {raw['current']}, set "
                         f"{raw['config']}={raw['current']} in the application config before approving")
    if snapshot:
        notes.insert(0, f"snapshot: {snapshot['path']} ({snapshot['committed_partitions']} committed partitions, "
                        f"lag {snapshot['total_lag']})")
    notes += plan_lines(controller_result) + lint_lines(lint_result)
    status = (controller_result or {}).get("status") or {}
    running = [i for i in status.get("instances") or [] if i.get("running")]
    instances = len(running) if status.get("known") and running else expected
    plan = Plan(
        title=f"{group} back to the classic protocol",
        steps=("stop every instance (through the controller, until the platform shows none)",
               "wait for Empty (a streams group refuses LeaveGroup: members left behind leave when "
               "streams.session.timeout.ms runs out)",
               "restore any lost committed offset from the snapshot", "start with group.protocol=classic",
               f"wait for a classic group with {expected} member(s) on it, each proven alive, and every instance "
               "running on the platform, none restarted since the start",
               "wait until caught up (lag at its level before the stop, or not growing)",
               "compare offsets, validate with PySpark"),
        changes=tuple(changes), checks=tuple(checks or ()), notes=tuple(notes),
        facts={"group": {"type": desc.type.value, "state": desc.state.value}, "members": len(desc.members),
               "live_members": len(live), "expected_instances": expected, "instances": instances,
               "controller": (controller_result or {}).get("controller", {}).get("name")},
    )
    return {**plan.to_dict(), "nothing_to_do": nothing, "markdown": plan.render_markdown(dry_run=params["dry_run"])}


def replan(context) -> dict:
    ti = context["ti"]
    return build_plan(context["params"], ti.xcom_pull(task_ids="lint_client_config"),
                      (ti.xcom_pull(task_ids="preflight") or {}).get("checks"),
                      ti.xcom_pull(task_ids="settings_on_classic"), ti.xcom_pull(task_ids="snapshot_before"),
                      ti.xcom_pull(task_ids="controller"))


kip1071_streams_rollback_to_classic()

"""Offline migration of a consumer group between the classic and consumer (KIP-848) protocols, with its way back.

For the groups the online rolling upgrade cannot move: the broker refuses the
online upgrade of a group whose assignments carry ``userData`` (a custom client
assignor, and librdkafka's ``cooperative-sticky``), and every online move when
``group.consumer.migration.policy`` forbids it. An *empty* group converts in
both directions under every policy, so the way is: stop every instance, wait
for Empty, restart on the other protocol. Only committed offsets carry over.

Runbook (Kafka docs, "Consumer Rebalance Protocol", upgrade and downgrade, offline):

1. Only inside the maintenance window (a trigger outside it fails at once).
   The application's controller is the deployment's (a name from its registry,
   never code): an unknown name or argument is refused before the change lock.
2. Lint the client config the application will run with, as its controller
   reads it from the platform (forms may override keys, shown as such), for the
   target protocol (keys the client rejects, the assignor that replaces the
   classic one, the client release) and run the preflight (brokers 4.0+,
   protocol enabled, ``group.version`` finalized, group type, assignor mapping).
3. Carry the application's ``session.timeout.ms`` / ``heartbeat.interval.ms``
   over to the group's ``consumer.session.timeout.ms`` /
   ``consumer.heartbeat.interval.ms`` (the consumer protocol ignores the
   client's own; clamped into the brokers' bounds; a group value is kept, a
   Param wins), validated against the brokers now. Snapshot the committed
   offsets.
4. One approval for the whole downtime (not by whoever triggered the run);
   right before the downtime the plan is computed again and an expired or
   changed approval is not reused. The carried settings show before -> after.
5. Set the carried group configs. Stop every instance through the controller,
   until the platform shows none.
6. Wait until the group is Empty. Members the instances left behind are forced
   out only once the platform confirmed that no instance exists (at once then,
   no settle time); without that confirmation they leave when their session
   times out and the group must stay Empty for ``empty_settle_seconds``. A
   member seen after the group was empty fails the run, named.
7. Put back any committed offset a step lost (nothing, normally).
8. Check once more that the group is Empty, then start the application with
   ``group.protocol=<target>``; wait until the group is of the target type with
   every expected instance on the target protocol, each member proven alive
   (progress, or listed through its session timeout) and every instance
   running on the platform, none restarted since the start.
9. If that does not happen in time (the new application fails to start, or
   does not join), the DAG goes back by the same road: stop, Empty, start on
   the source protocol, wait for it, compare the offsets with the snapshot, and
   report "rolled back". The application is never left down by the DAG.
10. Otherwise: wait until the group has caught up (its lag back at the level of
    the snapshot before the stop plus a margin, or not growing while it commits;
    ``max_lag`` an absolute override), snapshot again, validate with PySpark
    (offsets preserved, lag, and the output's continuity when there is an
    output topic); report.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.changecontrol.artifacts import MACROS
from airflow_provider_kip848.changecontrol.window import window_note
from airflow_provider_kip848.kafka.arguments import (
    GROUP_ID_PATTERN,
    MAX_MEMBERS,
    MAX_MINUTES,
    MAX_POLL_SECONDS,
    MAX_RECORDS,
)
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
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.group_load import KafkaGroupLoadsOperator
from airflow_provider_kip848.operators.lint import KafkaClientConfigLintOperator
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.metrics import KafkaGroupMetricsOperator
from airflow_provider_kip848.operators.offsets import (
    KafkaCompareGroupOffsetsOperator,
    KafkaRestoreGroupOffsetsOperator,
    KafkaSnapshotGroupOffsetsOperator,
)
from airflow_provider_kip848.operators.params import (
    carried_consumer_params,
    downtime_params,
    lag_params,
    lag_plan_line,
    lag_wait_args,
    validation_params,
    window_params,
)
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from airflow_provider_kip848.operators.report import PREFLIGHT, RunReport, downtime_rule, report_task
from airflow_provider_kip848.operators.runbook_steps import (
    capture_output,
    carried_notes,
    carried_settings,
    consumer_validation,
    group_config_changes,
)
from airflow_provider_kip848.operators.schedule import deployment_schedule
from airflow_provider_kip848.operators.window import KafkaMaintenanceWindowGuardOperator
from airflow_provider_kip848.sensors.group import (
    KafkaGroupEmptySensor,
    KafkaGroupLagSensor,
    KafkaGroupMigratedSensor,
    group_seen_by,
    stop_result_of,
)

DAG_ID = "kip848_consumer_offline_migration"
CONN = "{{ params.kafka_conn_id }}"
GROUP = "{{ params.group_id }}"
#: the snapshot before the stop described the group: gone after that, it was deleted (empty)
SEEN = group_seen_by("snapshot_before")
TARGET = "{{ params.target_protocol }}"
SOURCE = "{{ 'classic' if params.target_protocol == 'consumer' else 'consumer' }}"
MODE = "{{ 'classic_to_consumer_offline' if params.target_protocol == 'consumer' else 'consumer_to_classic_offline' }}"
SNAPSHOTS = "{{ kip848_run_location(params.kafka_conn_id, dag, run_id, 'snapshots') }}"
EXPECTED = "{{ ti.xcom_pull(task_ids='make_plan')['facts']['expected_instances'] }}"
POLL = "{{ params.poll_seconds }}"
BEFORE = "{{ ti.xcom_pull(task_ids='snapshot_before')['path'] }}"
CONTROLLER = {"controller": "{{ params.app_controller }}", "controller_args": "{{ params.app_controller_args }}"}
#: the group configs this run sets: the application's session timeout and heartbeat interval carried over (to consumer)
GROUP_CONFIGS = "{{ ti.xcom_pull(task_ids='carry_over_settings')['set'] }}"
#: the carried consumer.* settings are set on the classic group for the consumer group it becomes (shown with them)
FOR_GROUP_TYPE = "consumer"
#: the actions (stop, start, roll) also carry the controller's fingerprint the approval showed: a registry entry
#: edited since is refused
ACTION = {**CONTROLLER, "approved_fingerprint": approved_fingerprint()}


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "kip848", "migration", "downtime"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    user_defined_macros=MACROS,
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "group_id": Param("", type="string", minLength=1, pattern=GROUP_ID_PATTERN, title="Consumer group"),
        "target_protocol": Param("consumer", type="string", enum=["consumer", "classic"],
                                 title="Protocol to move the group to",
                                 description="consumer: classic -> KIP-848; classic: the way back."),
        "client_properties": Param({}, type="object", title="Client properties to lint over the controller's",
                                   description="The controller reads the config the application runs with; keys "
                                               "typed here override it (shown as such in the approval). Without a "
                                               "config from the controller, only these are linted, and the lint "
                                               "says so."),
        "client": Param("librdkafka", type="string", enum=["java", "librdkafka"], title="Client library",
                        description="Used when the controller does not say."),
        "client_version": Param(None, type=["null", "string"], pattern=r"^\d+\.\d+(\.\d+)?$",
                                title="Client library release (e.g. 2.12.1 or 4.1.0)",
                                description="Checked against the first production-ready release of the consumer "
                                            "protocol. Empty: not checked (the lint says so)."),
        "expected_instances": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_MEMBERS,
                                    title="Instances the application runs",
                                    description="Done when this many live members run the target protocol. Empty: "
                                                "the number of live members when the plan is made (shown in the "
                                                "approval)."),
        **carried_consumer_params(),
        **downtime_params(),
        "start_timeout_minutes": Param(10, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                       title="The restarted application must be in within (min)",
                                       description="Past this the DAG goes back to the source protocol."),
        "poll_seconds": Param(5, type="number", minimum=0.2, maximum=MAX_POLL_SECONDS,
                              title="Poll interval of the waits (s)"),
        **lag_params(),
        "output_topic": Param(None, type=["null", "string"], title="Output topic to check for gaps",
                              description="Empty: skip the gap check."),
        "id_source": Param("key", type="string", title="Record id in the output: key, value or json:<field>"),
        "allowed_duplicates": Param(1000, type="integer", minimum=0, maximum=MAX_RECORDS,
                                    title="Duplicates allowed in the output (at-least-once redelivery)"),
        **window_params(),
        **validation_params(),
        "dry_run": Param(False, type="boolean", title="Dry run (checks and plan only)"),
        **change_control_params(),
    },
)
def kip848_consumer_offline_migration():
    guard = KafkaMaintenanceWindowGuardOperator(task_id="window_guard")
    controller = KafkaApplicationControllerOperator(task_id="controller", group_protocol=TARGET,
                                                    way_back_protocol=SOURCE, **CONTROLLER)

    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id=CONN, resource=f"group:{GROUP}",
                                   dry_run="{{ params.dry_run }}")
    lint = KafkaClientConfigLintOperator(
        task_id="lint_client_config", properties="{{ params.client_properties }}", target=TARGET,
        client="{{ params.client }}", client_version="{{ params.client_version }}", kafka_conn_id=CONN,
        group_id=GROUP, controller_result="{{ ti.xcom_pull(task_ids='controller') }}", use_controller=True,
    )
    # client_release: the client release each instance printed at start (the controller task read their logs),
    # else the controller's declared one, else the Params' (docs/operators.md#preflight-checks)
    preflight = KafkaMigrationPreflightOperator(task_id="preflight", kafka_conn_id=CONN, mode=MODE, group_id=GROUP,
                                           expect_empty=False,
                                           controller_result="{{ ti.xcom_pull(task_ids='controller') }}",
                                           client_release=True, client="{{ params.client }}",
                                           client_version="{{ params.client_version }}")
    # on the consumer protocol the client's session.timeout.ms / heartbeat.interval.ms are ignored: the group's
    # configs decide, so the application's values are carried over (set before the restart, shown in the approval)
    @task
    def carry_over_settings(params: dict | None = None, **context) -> dict:
        return carried_settings(params, context["ti"].xcom_pull(task_ids="controller"),
                                group_type=params["target_protocol"])

    validate_configs = KafkaGroupConfigOperator(task_id="validate_group_configs", kafka_conn_id=CONN,
                                                group_id=GROUP, set_configs=GROUP_CONFIGS, dry_run=True,
                                                for_group_type=FOR_GROUP_TYPE)
    group_configs = KafkaGroupConfigOperator(task_id="set_group_configs", kafka_conn_id=CONN, group_id=GROUP,
                                             set_configs=GROUP_CONFIGS, for_group_type=FOR_GROUP_TYPE)
    snapshot_before = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_before", kafka_conn_id=CONN, group_id=GROUP,
                                                   path=f"{SNAPSHOTS}/before.json")

    @task
    def capture_output_before(params: dict | None = None) -> dict:
        return capture_output(params)

    @task
    def make_plan(lint_result: dict, preflight_report: dict, snapshot: dict, controller_result: dict, carried: dict,
                  configs: dict, params: dict | None = None) -> dict:
        return build_plan(params, lint_result, preflight_report["checks"], snapshot, controller_result, carried,
                          configs)

    @task.branch
    def route(plan: dict, params: dict | None = None) -> str:
        return "report" if plan["nothing_to_do"] or params["dry_run"] else "approval"

    approval = KafkaChangeApprovalOperator(
        task_id="approval",
        subject="Downtime: offline move of consumer group {{ params.group_id }} to the {{ params.target_protocol }} "
                "protocol",
        body="{{ ti.xcom_pull(task_ids='make_plan')['markdown'] }}",
        **APPROVAL_ARGS,
    )
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

    started = KafkaApplicationStartOperator(task_id="start_application", kafka_conn_id=CONN, group_id=GROUP,
                                            group_protocol=TARGET, expected_instances=EXPECTED, **ACTION)
    wait_migrated = KafkaGroupMigratedSensor(
        task_id="wait_migrated", kafka_conn_id=CONN, group_id=GROUP, group_type=TARGET, expected_members=EXPECTED,
        poll_interval=POLL, timeout_minutes="{{ params.start_timeout_minutes }}",
        baseline=start_baseline("start_application"), **CONTROLLER)
    # caught up at the lag before the stop (its snapshot) plus the margin, or a lag that stops growing: never lag 0
    wait_lag = KafkaGroupLagSensor(task_id="wait_lag_drained", kafka_conn_id=CONN, group_id=GROUP,
                                   baseline_snapshot=BEFORE, **lag_wait_args(), poll_interval=POLL,
                                   timeout_minutes="{{ params.start_timeout_minutes }}",
                                   baseline=start_baseline("start_application"), **CONTROLLER)
    compare = KafkaCompareGroupOffsetsOperator(task_id="compare_offsets", kafka_conn_id=CONN, group_id=GROUP,
                                          snapshot_path=BEFORE)
    snapshot_after = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_after", kafka_conn_id=CONN, group_id=GROUP,
                                                  path=f"{SNAPSHOTS}/after.json")

    @task
    def capture_output_after(params: dict | None = None) -> dict:
        return capture_output(params)


    # -- the way back: only when the restarted application did not come in on the target protocol in time, or its
    # start failed (a platform whose start waits for its instances, e.g. a Kubernetes rollout that stalls: the
    # application is stopped and must not be left down)
    rollback_stop = KafkaApplicationStopOperator(task_id="rollback_stop",
                                                 when_failed=["start_application", "wait_migrated"],
                                                 trigger_rule="all_done", **ACTION)
    rollback_wait_empty = KafkaGroupEmptySensor(
        task_id="rollback_wait_empty", kafka_conn_id=CONN, group_id=GROUP, poll_interval=POLL,
        remove_members_after="{{ params.remove_members_after }}", settle_seconds="{{ params.empty_settle_seconds }}",
        instances_gone=instances_gone("rollback_stop"),
        stop_result=stop_result_of("rollback_stop"),
        timeout_minutes="{{ params.empty_timeout_minutes }}", allow_absent=SEEN,
        **CONTROLLER)

    rollback_start = KafkaApplicationStartOperator(task_id="rollback_start", kafka_conn_id=CONN, group_id=GROUP,
                                                   group_protocol=SOURCE, expected_instances=EXPECTED, **ACTION)
    rollback_wait = KafkaGroupMigratedSensor(
        task_id="rollback_wait_back", kafka_conn_id=CONN, group_id=GROUP, group_type=SOURCE,
        expected_members=EXPECTED, poll_interval=POLL,
        timeout_minutes="{{ params.start_timeout_minutes }}", baseline=start_baseline("rollback_start"),
        **CONTROLLER)
    rollback_compare = KafkaCompareGroupOffsetsOperator(task_id="rollback_compare_offsets", kafka_conn_id=CONN,
                                                   group_id=GROUP, snapshot_path=BEFORE)
    # back on classic: the group still loads. The offline way back leaves the same records as the online one
    # (the consumer group's, then the classic group's), so apache/kafka#23514 concerns it as well
    rollback_loads = KafkaGroupLoadsOperator(task_id="prove_group_loads_back", kafka_conn_id=CONN, group_id=GROUP,
                                             group_type=SOURCE)

    report = RunReport(
        title=lambda p: f"Offline move of {p['group_id']} to the {p['target_protocol']} protocol",
        outcome=downtime_rule(done="migrated", way_back_task="rollback_compare_offsets",
                              deadline_tasks=("start_application", "wait_migrated")),
        target=lambda p: p["target_protocol"],
        results={"window": "window_guard", "controller": "controller", "preflight": PREFLIGHT,
                 "lint": "lint_client_config", "group_settings": "carry_over_settings",
                 "group_configs": "set_group_configs", "stopped": "stop_application", "emptied": "wait_empty",
                 "restored": "restore_lost_offsets", "started": "start_application", "migration": "wait_migrated",
                 "offsets_vs_snapshot": "compare_offsets", "lag": "wait_lag_drained", "validation": "validate",
                 "rollback": {"stopped": "rollback_stop", "restarted": "rollback_start", "back": "rollback_wait_back",
                              "offsets_vs_snapshot": "rollback_compare_offsets",
                              "group_load": "prove_group_loads_back"}},
        change_tasks=("set_group_configs", "wait_empty", "restore_lost_offsets", "rollback_wait_empty"),
        fail_outcomes=lambda p: ("failed", "refused", "rolled_back"),
    )

    out_before = capture_output_before()
    carried = carry_over_settings()
    plan = make_plan(lint.output, preflight.output, snapshot_before.output, controller.output, carried,
                     validate_configs.output)
    guard >> controller >> lock >> [lint, preflight] >> carried >> validate_configs
    validate_configs >> snapshot_before >> out_before >> plan
    decision = route(plan)
    final = report_task(report, task_id="report")
    out_after = capture_output_after()
    (decision >> approval >> recheck >> group_configs >> stop >> wait_empty >> restore >> started
     >> wait_migrated >> wait_lag >> compare >> snapshot_after >> out_after)
    # the brokers' group metrics before, during and after the change (side branches: they never gate it)
    snapshot_before >> KafkaGroupMetricsOperator(task_id="metrics_before", kafka_conn_id=CONN, point="before") >> final
    started >> KafkaGroupMetricsOperator(task_id="metrics_during", kafka_conn_id=CONN, point="during") >> final
    out_after >> KafkaGroupMetricsOperator(task_id="metrics_after", kafka_conn_id=CONN, point="after") >> final
    spec, validate = consumer_validation(snapshot_before.output, snapshot_after.output, out_before, out_after,
                                         task_id="validate", kafka_conn_id=CONN,
                                         output_dir=f"{SNAPSHOTS}/validation",
                                         title="Offline move of {{ params.group_id }} to {{ params.target_protocol }}")
    out_after >> spec
    validate >> final
    wait_migrated >> rollback_stop >> rollback_wait_empty >> rollback_start >> rollback_wait
    rollback_wait >> [rollback_compare, rollback_loads] >> final
    decision >> final


def build_plan(params: dict, lint_result: dict | None = None, checks: list | None = None,
               snapshot: dict | None = None, controller_result: dict | None = None, carried: dict | None = None,
               configs: dict | None = None) -> dict:
    """The downtime plan to approve (computed again right before the downtime starts)."""
    from airflow_provider_kip848.changecontrol.plan import Change, Plan
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.model import GroupType
    from airflow_provider_kip848.kafka.rules.conditions import is_live
    from airflow_provider_kip848.operators.application import plan_lines
    from airflow_provider_kip848.operators.lint import lint_lines

    group, target = params["group_id"], params["target_protocol"]
    carried = carried or carried_settings(params, controller_result, group_type=target)
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        desc = hook.describe_group(group)
        if configs is None:
            configs = hook.alter_group_config(group, carried["set"], [], dry_run=True,
                                              for_group_type="consumer").to_dict()
    live = [m for m in desc.members if is_live(m)]
    expected = params["expected_instances"] or len(live)
    nothing = desc.type is GroupType(target) and all(m.protocol.value == target for m in live)
    changes = [] if nothing else [
        Change("application", group, f"running ({len(live)} instance(s))", "stopped", "downtime starts"),
        Change("protocol", group, desc.type.value, target, f"restart with group.protocol={target}"),
    ]
    before = configs.get("before") or {}
    if not nothing:
        changes += group_config_changes(group, configs,
                                        lambda _key: "set before the restart (the consumer protocol ignores the "
                                                     "client's own)")
    notes = [window_note(params), "one approval covers the whole downtime",
             f"done when {expected} live member(s) run the {target} protocol; otherwise the DAG restarts the "
             f"application on {desc.type.value} (the way back) and reports 'rolled back'", *carried_notes(carried)]
    if snapshot:
        notes.insert(0, f"snapshot: {snapshot['path']} ({snapshot['committed_partitions']} committed partitions, "
                        f"lag {snapshot['total_lag']})")
    notes += plan_lines(controller_result) + lint_lines(lint_result)
    plan = Plan(
        title=f"Offline move of {group} to the {target} protocol",
        steps=(*(["set the group configs carried over"] if carried["set"] else []),
               "stop every instance (through the controller, until the platform shows none)",
               ("wait for Empty (a member left behind is forced out only when it is paired with an instance the "
                "platform shows stopped or gone, once its session ran out; a member no instance accounts for "
                "never: it leaves when its session times out, or the wait fails naming it)")
               if params.get("remove_members_after") is not None
               else "wait for Empty (members left behind leave when their session times out)",
               "restore any lost committed offset from the snapshot", f"start with group.protocol={target}",
               f"wait for a {target} group with {expected} member(s) on it, each proven alive, and every "
               "instance running on the platform, none restarted since the start",
               lag_plan_line(params), "compare offsets, validate with PySpark"),
        changes=tuple(changes), checks=tuple(checks or ()), notes=tuple(notes),
        facts={"group": {"type": desc.type.value, "state": desc.state.value}, "members": len(desc.members),
               "group_configs": before,
               "live_members": len(live), "expected_instances": expected, "assignor": getattr(desc, "assignor", None),
               "controller": (controller_result or {}).get("controller", {}).get("name")},
    )
    return {**plan.to_dict(), "nothing_to_do": nothing, "markdown": plan.render_markdown(dry_run=params["dry_run"])}


def replan(context) -> dict:
    ti = context["ti"]
    return build_plan(context["params"], ti.xcom_pull(task_ids="lint_client_config"),
                      (ti.xcom_pull(task_ids="preflight") or {}).get("checks"),
                      ti.xcom_pull(task_ids="snapshot_before"), ti.xcom_pull(task_ids="controller"))  # configs afresh


kip848_consumer_offline_migration()

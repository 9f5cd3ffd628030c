"""Offline migration of a Kafka Streams application from the classic protocol to KIP-1071 streams groups.

Runbook (Kafka docs, "Streams Rebalance Protocol", migration section):

1. Only inside the maintenance window (a trigger outside it fails at once).
   No schedule unless the deployment gives one (``[kip848]
   kip1071_streams_offline_migration_schedule``); a scheduled run needs
   ``app_controller``'s default to name a controller of the registry and
   ``application_id``'s default to be your application, not the example's.
2. Preflight: brokers 4.2.1+ (never 4.2.0: KAFKA-20254), ``streams.version``
   finalized, ``streams`` enabled, the group classic; static members (a
   ``group.instance.id`` in the application's config, as its controller reads
   it with the form's on top, or in the group) only on 4.4 brokers: older ones
   answer them with a fatal ``INVALID_REQUEST`` (KAFKA-20169).
3. Check the application's controller (a name from the deployment's registry,
   never code: an unknown name or argument is refused before the change lock).
   Check the topics against the application's topology (its
   ``Topology#describe()``, from the run's ``topology_description`` Param, else
   from the controller): the source topics exist, the internal repartition
   topics exist and changelogs have one partition per task, joined topics are
   co-partitioned. The broker would find these only after the stop (the
   streams group stays NOT_READY); here a refusal costs nothing. No topology:
   a warning in the approval says it was not checked.
   Lint the client config the application runs with, as the controller reads
   it from the platform (the form's ``application_properties`` override keys,
   shown as such), for the streams protocol (settings it ignores or does not
   support, the client release) and carry its assignment settings over:
   ``streams.num.standby.replicas``, session and heartbeat come
   from the run's Params when given, else stay as the group has them, else
   from the application's own ``num.standby.replicas`` / ``session.timeout.ms``
   / ``heartbeat.interval.ms`` (an application with standbys keeps them); each
   change is shown as before -> after, and validated against the brokers' bounds.
4. Snapshot the committed offsets (only committed offsets survive the switch).
5. One approval for the whole downtime plan (by one of ``approvers``, not
   by whoever triggered the run): nobody waits for a human while the
   application is down. Right before the downtime the plan is computed again;
   an expired approval or a changed plan is not reused (a new one is asked).
6. Set the group configs (audited), then stop every instance through the
   controller, until the platform shows none.
7. Wait until the group is Empty. Members a stopped Streams app left behind (it
   does not leave its group on close) are forced out at once when the platform
   confirmed that no instance exists; without that confirmation never (they
   leave when their session times out, and the group must stay Empty for
   ``empty_settle_seconds``). A member seen after the group was empty fails
   the run, named.
8. Put back any committed offset a step lost (nothing, normally).
9. Check once more that the group is Empty and that the declared source
   topics exist, then start the application with ``group.protocol=streams``;
   wait for a streams group with every instance in it, each member proven
   alive (listed through its session timeout) and every instance running on
   the platform, none restarted since the start; then Stable.
10. If the streams application is not Stable within its deadline (it failed
    to start, or stays NOT_READY: the report names the missing topics), the
    DAG goes back: stop it, wait for Empty, start it on classic, wait for it,
    compare the offsets with the snapshot, and report "rolled back". The
    application is never left down by the DAG.
11. Otherwise compare offsets with the snapshot, wait until the group has caught
    up (its lag back at the level of the snapshot before the stop plus a margin,
    or not growing while it commits; ``max_lag`` an absolute override),
    snapshot again and validate with PySpark; report.

Why over 500 lines: the file is the runbook. The steps above are a tenth of it, and the DAG wires every one of
them as its own task (about 40 tasks, with the way back), each with the Params it reads; the logic is in the
provider's operators, none here. Split, a reader would follow one runbook across files.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.changecontrol.artifacts import MACROS
from airflow_provider_kip848.changecontrol.window import window_note
from airflow_provider_kip848.kafka.arguments import GROUP_ID_PATTERN, MAX_INT32, MAX_MINUTES, MAX_POLL_SECONDS
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
from airflow_provider_kip848.operators.report import (
    PREFLIGHT,
    RunReport,
    downtime_rule,
    output_written,
    report_task,
)
from airflow_provider_kip848.operators.runbook_steps import (
    RESTART_DELAY,
    capture_output,
    carried_notes,
    carried_settings,
    diagnose_streams,
    group_config_changes,
)
from airflow_provider_kip848.operators.schedule import deployment_schedule
from airflow_provider_kip848.operators.topology import KafkaStreamsTopologyCheckOperator
from airflow_provider_kip848.operators.validation import KafkaValidationOperator
from airflow_provider_kip848.operators.window import KafkaMaintenanceWindowGuardOperator
from airflow_provider_kip848.sensors.group import (
    KafkaGroupEmptySensor,
    KafkaGroupLagSensor,
    KafkaGroupMigratedSensor,
    KafkaGroupStateSensor,
    group_seen_by,
    stop_result_of,
)

DAG_ID = "kip1071_streams_offline_migration"
#: the example's application (the demo's word count): the form's default, which a run nobody triggered by hand (the
#: deployment's schedule) refuses to act on; a copy of this DAG for your application changes the default
EXAMPLE_APPLICATION = "streams-wordcount"
CONN = "{{ params.kafka_conn_id }}"
GROUP = "{{ params.application_id }}"
#: the snapshot before the stop described the group: gone after that, it was deleted (empty)
SEEN = group_seen_by("snapshot_before")
#: this run's own folder under the deployment's artifact location (every worker reaches it; see
#: changecontrol.artifacts): a snapshot written by one worker is compared by another
SNAPSHOTS = "{{ kip848_run_location(params.kafka_conn_id, dag, run_id, 'snapshots') }}"
#: the group configs this run sets: the application's settings carried over (see carry_over_settings)
GROUP_CONFIGS = "{{ ti.xcom_pull(task_ids='carry_over_settings')['set'] }}"
BEFORE = "{{ ti.xcom_pull(task_ids='snapshot_before')['path'] }}"
POLL = "{{ params.poll_seconds }}"
CONTROLLER = {"controller": "{{ params.app_controller }}", "controller_args": "{{ params.app_controller_args }}"}
#: the actions (stop, start, roll) also carry the controller's fingerprint the approval showed: a registry entry
#: edited since is refused
ACTION = {**CONTROLLER, "approved_fingerprint": approved_fingerprint()}
#: the instances the application runs: the platform's count before the stop (else its classic members)
EXPECTED = "{{ ti.xcom_pull(task_ids='make_plan')['facts']['expected_instances'] }}"
#: the group config a run may lower for the restart (restart_rebalance_delay_ms), put back afterwards


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "kip1071", "streams", "migration", "downtime"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    user_defined_macros=MACROS,
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "application_id": Param(EXAMPLE_APPLICATION, type="string", minLength=1, pattern=GROUP_ID_PATTERN,
                                title="Streams application.id (the group)"),
        "declared_broker_version": Param(None, type=["null", "string"],
                                         title="Broker release (needed on 4.2: e.g. 4.2.1)"),
        "application_properties": Param({}, type="object", title="Client properties over the controller's",
                                        description="The controller reads the config the application runs with; "
                                                    "keys typed here override it (shown as such). Linted for the "
                                                    "streams protocol; its num.standby.replicas, session.timeout.ms "
                                                    "and heartbeat.interval.ms (ignored by the streams protocol) "
                                                    "are carried over as group configs."),
        "client_version": Param(None, type=["null", "string"], pattern=r"^\d+\.\d+(\.\d+)?$",
                                title="Kafka Streams release of the application (e.g. 4.2.1)",
                                description="Checked against 4.2 (KIP-1071 GA). Empty: not checked (the lint "
                                            "says so)."),
        "source_topics": Param(None, type=["null", "string"], title="Source topics (comma-separated)",
                               description="Checked to exist before the restart (a missing one leaves the streams "
                                           "group NOT_READY) and against the topics the group committed on. "
                                           "Empty: not checked."),
        "topology_description": Param(
            None, type=["null", "string"], title="The application's topology (Topology#describe())",
            description="The text Kafka Streams prints for topology.describe(). Checked before the stop: source "
                        "topics exist, internal repartition topics exist, changelogs have one partition per task, "
                        "joined topics are co-partitioned. Empty: the controller's, if it reports one; else the "
                        "approval says the topology was not checked."),
        "standby_replicas": Param(None, type=["null", "integer"], minimum=0, maximum=MAX_INT32,
                                  title="streams.num.standby.replicas",
                                  description="Empty: carry over (the group's value, else the application's "
                                              "num.standby.replicas, else the brokers' default)."),
        "session_timeout_ms": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_INT32,
                                    title="streams.session.timeout.ms",
                                    description="Empty: carry over, as above."),
        "heartbeat_interval_ms": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_INT32,
                                       title="streams.heartbeat.interval.ms",
                                       description="Empty: carry over, as above."),
        "restart_rebalance_delay_ms": Param(
            None, type=["null", "integer"], minimum=0, maximum=MAX_INT32,
            title="streams.initial.rebalance.delay.ms for the restart",
            description="Empty: the group's own (else the brokers' group.streams.initial.rebalance.delay.ms, 3000 "
                        "by default). The first assignment of the restarted application waits this long, and then "
                        "for the member's next heartbeat (streams.heartbeat.interval.ms, 5000 by default): 0 "
                        "shortens the downtime of an application that starts as one instance; with several, the "
                        "delay is what lets them all join before the first assignment. Set before the stop, "
                        "shown in the approval, put back once the group is Stable (or the way back ran), "
                        "audited. Kafka 4.3+."),
        "fallback_to_classic": Param(True, type="boolean", title="Go back to classic if the streams app fails",
                                     description="When the streams application is not Stable within the deadline: "
                                                 "stop it, wait for Empty, restart it on classic (never left down)."),
        **downtime_params(),
        "stable_timeout_minutes": Param(10, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                        title="Wait for Stable at most (min)"),
        "poll_seconds": Param(5, type="number", minimum=0.2, maximum=MAX_POLL_SECONDS,
                              title="Poll interval of the waits (s)"),
        **lag_params(),
        "output_topic": Param(None, type=["null", "string"], title="Output topic (captured before/after)",
                              description="Empty: no output capture."),
        **window_params(),
        **validation_params(),
        "dry_run": Param(False, type="boolean", title="Dry run (checks and plan only)"),
        **change_control_params(),
    },
)
def kip1071_streams_offline_migration():
    guard = KafkaMaintenanceWindowGuardOperator(task_id="window_guard",
                                           example_params={"application_id": EXAMPLE_APPLICATION})

    preflight = KafkaMigrationPreflightOperator(
        task_id="preflight", kafka_conn_id=CONN, mode="classic_to_streams", group_id=GROUP, expect_empty=False,
        declared_broker_version="{{ params.declared_broker_version }}", source_topics="{{ params.source_topics }}",
        # the config the application will run with on streams (its group.instance.id: brokers before 4.4 refuse
        # static streams members fatally, KAFKA-20169), as its controller reads it, the form's on top
        application_properties="{{ params.application_properties }}",
        controller_result="{{ ti.xcom_pull(task_ids='controller') }}",
        # the Kafka Streams release each instance printed at start, else the controller's, else the Params'
        client_release=True, client="java", client_version="{{ params.client_version }}",
    )

    controller = KafkaApplicationControllerOperator(
        task_id="controller", group_protocol="streams",
        way_back_protocol="{{ 'classic' if params.fallback_to_classic else None }}", **CONTROLLER)
    # the config the application will run with on streams, as its controller reads it (the form's on top)
    lint = KafkaClientConfigLintOperator(task_id="lint_client_config", target="streams", client="java",
                                    properties="{{ params.application_properties }}",
                                    client_version="{{ params.client_version }}",
                                    controller_result="{{ ti.xcom_pull(task_ids='controller') }}",
                                    use_controller=True)

    # the topics against the application's topology, while it still runs: the broker would find them only after
    # the stop (the streams group NOT_READY), when the downtime and the way back are already paid
    topology = KafkaStreamsTopologyCheckOperator(task_id="check_topology", kafka_conn_id=CONN, application_id=GROUP,
                                            topology="{{ params.topology_description }}",
                                            controller_result="{{ ti.xcom_pull(task_ids='controller') }}")

    @task
    def carry_over_settings(params: dict | None = None, **context) -> dict:
        return carried_settings(params, context["ti"].xcom_pull(task_ids="controller"))

    validate_configs = KafkaGroupConfigOperator(task_id="validate_group_configs", kafka_conn_id=CONN,
                                                group_id=GROUP, set_configs=GROUP_CONFIGS, dry_run=True,
                                                for_group_type="streams")
    group_configs = KafkaGroupConfigOperator(task_id="set_group_configs", kafka_conn_id=CONN, group_id=GROUP,
                                             set_configs=GROUP_CONFIGS, for_group_type="streams")
    snapshot_before = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_before", kafka_conn_id=CONN, group_id=GROUP,
                                                   path=f"{SNAPSHOTS}/before.json")

    @task
    def capture_output_before(params: dict | None = None) -> dict:
        return capture_output(params)

    @task
    def make_plan(preflight_report: dict, topology_report: dict, configs: dict, snapshot: dict, carried: dict,
                  lint_result: dict, controller_result: dict, params: dict | None = None) -> dict:
        return build_plan(params, preflight_report["checks"] + topology_report["checks"], configs, snapshot,
                          carried, lint_result, controller_result)

    @task.branch
    def route(plan: dict, params: dict | None = None) -> str:
        nothing = plan["facts"]["group"]["type"] == "streams"
        return "report" if nothing or params["dry_run"] else "approval"

    approval = KafkaChangeApprovalOperator(
        task_id="approval",
        subject="Downtime: KIP-1071 offline migration of {{ params.application_id }}",
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
                                          snapshot_path="{{ ti.xcom_pull(task_ids='snapshot_before')['path'] }}")

    # one last look before the downtime ends: still Empty (an instance of the old application still running
    # would be refused as a streams member), and the source topics exist (else the group sits in NOT_READY)
    started = KafkaApplicationStartOperator(task_id="start_application", kafka_conn_id=CONN, group_id=GROUP,
                                            group_protocol="streams", source_topics="{{ params.source_topics }}",
                                            expected_instances=EXPECTED, **ACTION)
    # a streams group with every instance in it, each member proven alive, every instance running on the platform
    wait_streams = KafkaGroupMigratedSensor(task_id="wait_streams_group", kafka_conn_id=CONN, group_id=GROUP,
                                            group_type="streams", expected_members=EXPECTED,
                                            poll_interval=POLL, timeout_minutes="{{ params.stable_timeout_minutes }}",
                                            baseline=start_baseline("start_application"), **CONTROLLER)
    wait_stable = KafkaGroupStateSensor(task_id="wait_stable", kafka_conn_id=CONN, group_id=GROUP, states=["Stable"],
                                        poll_interval=POLL,
                                        timeout_minutes="{{ params.stable_timeout_minutes }}")
    compare = KafkaCompareGroupOffsetsOperator(task_id="compare_offsets", kafka_conn_id=CONN, group_id=GROUP,
                                          snapshot_path=BEFORE)

    # the restart's streams.initial.rebalance.delay.ms (restart_rebalance_delay_ms) goes back to what it was once
    # the streams group is Stable (its first assignment is made), or the way back ran
    @task.short_circuit(trigger_rule="all_done", ignore_downstream_trigger_rules=False)
    def delay_was_lowered(**context) -> bool:
        from airflow_provider_kip848.changecontrol.report import task_states

        carried = context["ti"].xcom_pull(task_ids="carry_over_settings") or {}
        return bool(carried.get("restart_delay")) and task_states(context).get("set_group_configs") == "success"

    restore_delay = KafkaGroupConfigOperator(
        task_id="restore_rebalance_delay", kafka_conn_id=CONN, group_id=GROUP,
        for_group_type="streams",  # put back on the streams group, or on the classic one after the way back
        set_configs="{{ ti.xcom_pull(task_ids='carry_over_settings')['restart_delay']['restore_set'] }}",
        delete_configs="{{ ti.xcom_pull(task_ids='carry_over_settings')['restart_delay']['restore_delete'] }}")

    # -- the way back: only when the streams application did not become Stable in time
    @task(trigger_rule="all_done")
    def fallback_stop(params: dict | None = None, **context) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from airflow_provider_kip848.changecontrol.report import task_states
        from airflow_provider_kip848.hooks.instances import task_error
        from airflow_provider_kip848.operators.application import resolve

        states = task_states(context)
        if "failed" not in (states.get("wait_streams_group"), states.get("wait_stable")):
            raise AirflowSkipException("the streams application came up: no fallback")
        if not params["fallback_to_classic"]:
            raise AirflowSkipException("fallback_to_classic is off: the application is left as it is")
        diagnosis = diagnose_streams(params)  # before the stop: what the failed streams application looked like
        try:
            with resolve(params["app_controller"], params["app_controller_args"]) as controller:
                approved = (context["ti"].xcom_pull(task_ids="controller") or {}).get("controller") or {}
                controller.require_fingerprint(approved.get("fingerprint"))
                stopped = controller.stop()
        except Exception as exc:
            from airflow_provider_kip848.controllers import ControllerError

            if isinstance(exc, ControllerError):
                raise task_error(exc) from exc
            raise
        return {**stopped, "diagnosis": diagnosis}

    # a streams group refuses LeaveGroup: its members leave when streams.session.timeout.ms runs out
    fallback_wait_empty = KafkaGroupEmptySensor(
        task_id="fallback_wait_empty", kafka_conn_id=CONN, group_id=GROUP, poll_interval=POLL,
        remove_members_after="{{ params.remove_members_after }}", settle_seconds="{{ params.empty_settle_seconds }}",
        instances_gone=instances_gone("fallback_stop"),
        stop_result=stop_result_of("fallback_stop"),
        timeout_minutes="{{ params.empty_timeout_minutes }}", allow_absent=SEEN,
        **CONTROLLER)

    fallback_start = KafkaApplicationStartOperator(task_id="fallback_start", kafka_conn_id=CONN, group_id=GROUP,
                                                   group_protocol="classic", expected_instances=EXPECTED,
                                                   **ACTION)
    fallback_wait_classic = KafkaGroupMigratedSensor(
        task_id="fallback_wait_classic", kafka_conn_id=CONN, group_id=GROUP, group_type="classic",
        expected_members="{{ ti.xcom_pull(task_ids='make_plan')['facts']['live_members'] or 1 }}",
        poll_interval=POLL, timeout_minutes="{{ params.stable_timeout_minutes }}", expected_instances=EXPECTED,
        baseline=start_baseline("fallback_start"), **CONTROLLER)
    fallback_compare = KafkaCompareGroupOffsetsOperator(task_id="fallback_compare_offsets", kafka_conn_id=CONN,
                                                   group_id=GROUP, snapshot_path=BEFORE)
    # caught up at the lag before the stop (its snapshot) plus the margin, or a lag that stops growing: never lag 0
    wait_lag = KafkaGroupLagSensor(task_id="wait_lag_drained", kafka_conn_id=CONN, group_id=GROUP,
                                   baseline_snapshot=BEFORE, **lag_wait_args(), poll_interval=POLL,
                                   timeout_minutes="{{ params.stable_timeout_minutes }}",
                                   baseline=start_baseline("start_application"), **CONTROLLER)
    snapshot_after = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_after", kafka_conn_id=CONN, group_id=GROUP,
                                                  path=f"{SNAPSHOTS}/after.json")

    @task
    def capture_output_after(params: dict | None = None) -> dict:
        return capture_output(params)

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def spark_enabled(params: dict | None = None) -> bool:
        return bool(params["validate_with_spark"])

    validate = KafkaValidationOperator(
        task_id="validate", kafka_conn_id=CONN, output_dir=f"{SNAPSHOTS}/validation", reader="{{ params.reader }}",
        title="KIP-1071 migration of {{ params.application_id }}",
        checks={"offsets_preserved": {"before": "{{ ti.xcom_pull(task_ids='snapshot_before')['path'] }}",
                                      "after": "{{ ti.xcom_pull(task_ids='snapshot_after')['path'] }}",
                                      "allow_advanced": True},
                "lag": {"before": "{{ ti.xcom_pull(task_ids='snapshot_before')['path'] }}",
                        "after": "{{ ti.xcom_pull(task_ids='snapshot_after')['path'] }}",
                        "max_total_lag": "{{ params.max_lag }}",
                        "margin_fraction": "{{ params.lag_margin_fraction }}",
                        "margin_records": "{{ params.lag_margin_records }}"},
                # the processing gap, from the output records' timestamps (the report's downtime section)
                "output_timing": {"between": ["{{ ti.xcom_pull(task_ids='capture_output_before') }}",
                                              "{{ ti.xcom_pull(task_ids='capture_output_after') }}"]}},
    )

    report = RunReport(
        title=lambda p: f"KIP-1071 offline migration of {p['application_id']}",
        outcome=downtime_rule(done="migrated", way_back_task="fallback_compare_offsets",
                              deadline_tasks=("wait_streams_group", "wait_stable"),
                              nothing_to_do=lambda plan: plan["facts"]["group"]["type"] == "streams"),
        group_param="application_id", target=lambda p: "streams", after_members=False,
        results={"window": "window_guard", "controller": "controller", "preflight": PREFLIGHT,
                 "topology": ("check_topology", "report"),
                 "lint": "lint_client_config", "group_settings": "carry_over_settings",
                 "stopped": "stop_application", "emptied": "wait_empty", "restored": "restore_lost_offsets",
                 "started": "start_application", "offsets_vs_snapshot": "compare_offsets",
                 "restart_rebalance_delay_restored": "restore_rebalance_delay", "lag": "wait_lag_drained",
                 "validation": "validate",
                 "fallback": {"stopped": "fallback_stop", "restarted": "fallback_start",
                              "back": "fallback_wait_classic", "offsets_vs_snapshot": "fallback_compare_offsets"}},
        extra=lambda p, context: {"output_records_written_during_run": output_written(context)},
        change_tasks=("set_group_configs", "wait_empty", "restore_lost_offsets", "fallback_wait_empty",
                      "restore_rebalance_delay"),
        fail_outcomes=lambda p: ("failed", "refused", "rolled_back"),
    )

    out_before = capture_output_before()
    carried = carry_over_settings()
    plan = make_plan(preflight.output, topology.output, validate_configs.output, snapshot_before.output, carried,
                     lint.output, controller.output)
    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id=CONN, resource=f"group:{GROUP}",
                                   dry_run="{{ params.dry_run }}")
    guard >> controller >> lock >> [preflight, lint, topology] >> carried
    carried >> validate_configs >> snapshot_before >> out_before >> plan
    decision = route(plan)
    final = report_task(report, task_id="report")
    (decision >> approval >> recheck >> group_configs >> stop >> wait_empty >> restore
     >> started >> wait_streams >> wait_stable >> compare >> wait_lag >> snapshot_after)
    # the brokers' group metrics before, during and after the change (side branches: they never gate it)
    snapshot_before >> KafkaGroupMetricsOperator(task_id="metrics_before", kafka_conn_id=CONN, point="before") >> final
    started >> KafkaGroupMetricsOperator(task_id="metrics_during", kafka_conn_id=CONN, point="during") >> final
    snapshot_after >> KafkaGroupMetricsOperator(task_id="metrics_after", kafka_conn_id=CONN, point="after") >> final
    snapshot_after >> capture_output_after() >> spark_enabled() >> validate >> final
    [wait_streams, wait_stable] >> (back := fallback_stop())
    back >> fallback_wait_empty >> fallback_start >> fallback_wait_classic >> fallback_compare >> final
    [wait_stable, fallback_compare] >> delay_was_lowered() >> restore_delay >> final
    decision >> final


def build_plan(params: dict, checks: list | None = None, configs: dict | None = None,
               snapshot: dict | None = None, carried: dict | None = None, lint_result: dict | None = None,
               controller_result: dict | None = None) -> dict:
    """The downtime plan to approve (computed again right before the downtime starts)."""
    from airflow_provider_kip848.changecontrol.plan import Change, Plan
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.rules.conditions import is_live
    from airflow_provider_kip848.operators.application import plan_lines
    from airflow_provider_kip848.operators.lint import lint_lines

    group = params["application_id"]
    carried = carried or carried_settings(params, controller_result)
    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        described = hook.describe_group(group)
        desc = described.to_dict()
        if configs is None:
            configs = hook.alter_group_config(group, carried["set"], [], dry_run=True,
                                              for_group_type="streams").to_dict()
    changes = []
    if desc["type"] != "streams":
        changes.append(Change("application", group, "running", "stopped", "downtime starts"))
        changes.append(Change("protocol", group, desc["type"], "streams", "restart with group.protocol=streams"))
    before = configs.get("before") or {}
    changes += group_config_changes(group, configs, lambda key: (
        "for the restart only: put back once the streams group is Stable" if key == RESTART_DELAY
        else "set before the restart"))
    notes = [window_note(params), "one approval covers the whole downtime", *carried_notes(carried)]
    if params.get("fallback_to_classic"):
        notes.append("if the streams application is not Stable in time, the DAG restarts it on classic")
    notes += plan_lines(controller_result) + lint_lines(lint_result)
    if snapshot:
        notes.insert(0, f"snapshot: {snapshot['path']} ({snapshot['committed_partitions']} committed partitions, "
                        f"lag {snapshot['total_lag']})")
    live = sum(is_live(m) for m in described.members)
    status = (controller_result or {}).get("status") or {}
    running = [i for i in status.get("instances") or [] if i.get("running")]
    expected = len(running) if status.get("known") and running else max(live, 1)
    notes.append(f"done when {expected} instance(s) are in the streams group"
                 + (" (the platform's count)" if status.get("known") and running else " (the classic members)"))
    plan = Plan(
        title=f"KIP-1071 offline migration of {group}",
        steps=("set the group configs", "stop every instance",
               ("wait for Empty (a member left behind is forced out only when it is paired with an instance the "
                "platform shows stopped or gone, once its session ran out; a member no instance accounts for "
                "never: it leaves when its session times out, or the wait fails naming it)")
               if params.get("remove_members_after") is not None
               else "wait for Empty (members left behind leave when their session times out)",
               "restore any lost committed offset from the snapshot", "start with group.protocol=streams",
               "wait for a streams group, Stable",
               "compare offsets, wait until caught up (lag at its level before the stop, or not growing)",
               "validate with PySpark"),
        changes=tuple(changes), checks=tuple(checks or ()), notes=tuple(notes),
        facts={"group": {k: desc[k] for k in ("type", "state")}, "members": len(desc["members"]),
               "live_members": live, "expected_instances": expected, "group_configs": before,
               "controller": (controller_result or {}).get("controller", {}).get("name")},
    )
    return {**plan.to_dict(), "markdown": plan.render_markdown(dry_run=params["dry_run"])}


def replan(context) -> dict:
    ti = context["ti"]
    checks = [*((ti.xcom_pull(task_ids="preflight") or {}).get("checks") or ()),
              *((ti.xcom_pull(task_ids="check_topology") or {}).get("checks") or ())]
    return build_plan(context["params"], checks, None,
                      ti.xcom_pull(task_ids="snapshot_before"), None, ti.xcom_pull(task_ids="lint_client_config"),
                      ti.xcom_pull(task_ids="controller"))


kip1071_streams_offline_migration()

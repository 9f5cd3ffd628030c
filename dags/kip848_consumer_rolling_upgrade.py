"""Online upgrade of a consumer group from the classic protocol to KIP-848 (``group.protocol=consumer``),
and its online way back (``target_protocol=classic``).

Runbook (Kafka docs, "Consumer Rebalance Protocol"; confluent-kafka's KIP-848 guide):

1. Lint the application's client config: the keys the clients reject under
   ``group.protocol=consumer`` (assignment strategy, session/heartbeat), the
   server-side assignor that replaces the client one, static membership,
   regex subscriptions.
2. Preflight: brokers 4.0+, ``group.version`` finalized, ``consumer`` enabled,
   ``group.consumer.migration.policy`` allows the upgrade (and the rollback
   this DAG offers), no custom assignor with userData, group size, static
   members.
3. A person approves (or rejects) the plan.
4. Snapshot the committed offsets (and the output topic's end offsets). Set
   the group's ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms``
   carried over from the application's classic config (the consumer protocol
   ignores the client's own; clamped into the brokers' bounds; a group value is
   kept, a Param wins), shown before -> after in the approval.
5. Static members whose instance the controller confirms gone (crashed or
   killed: they hold their ``group.instance.id`` until their session expires
   and would fence their successor) are removed, audited. The application is
   rolled one instance at a time with ``group.protocol=consumer``: by its
   controller (``app_controller``, a name from the deployment's registry), or
   by the team when no controller is named. A controller that can stop and
   start one instance is rolled by the DAG itself: the **first instance is a
   gate** (it must come in on the new protocol within
   ``first_instance_timeout_minutes`` before any other instance restarts), and
   each instance's static member must have left (epoch -2, or gone; one whose
   instance is gone is removed) before its successor starts. Otherwise the
   platform's own rolling restart runs. The DAG waits (deferred, no worker slot).
   The group converts to ``consumer`` with the first new member and is
   migrated when every one of the ``expected_instances`` is a member on the
   new protocol, each proven alive (its partitions' commits advance, or it
   stays listed through the group's session timeout: a crashed member stays
   listed until then), and, with a controller, every instance runs on the
   platform with no restart since the roll (a crash after the restart fails
   the wait, named). Without a controller the instances are not checked, and
   the approval and the result say so.
6. Wait until the lag drains, snapshot again, and prove with PySpark that no
   committed offset regressed, the lag is within bounds and the output has no
   gap (and no more duplicates than allowed).
7. Report.

A Reject, or a rollout that does not finish within ``rollout_timeout_minutes``
(or stops at the first-instance gate), takes the rollback branch: the controller
(or the team) restarts the instances with ``group.protocol=classic`` and the DAG
verifies the group is classic again (the broker downgrades it when the last
consumer-protocol member leaves, under policy ``bidirectional`` or ``downgrade``).

``target_protocol=classic`` runs the same runbook backwards, online: the way
back of a migrated group after the run that migrated it (the Kafka docs'
"Downgrade": the reverse rolling process). The preflight's
``consumer_to_classic`` mode refuses it unless the brokers'
``group.consumer.migration.policy`` allows the downgrade (``bidirectional`` or
``downgrade``; otherwise the offline DAG is the way), no settings are carried
(classic members bring their own), and its rollback rolls forward to consumer.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.changecontrol.artifacts import MACROS
from airflow_provider_kip848.kafka.arguments import (
    GROUP_ID_PATTERN,
    MAX_MEMBERS,
    MAX_MINUTES,
    MAX_POLL_SECONDS,
    MAX_RECORDS,
)
from airflow_provider_kip848.operators.application import (
    KafkaApplicationControllerOperator,
    KafkaApplicationRollOperator,
    approved_fingerprint,
    start_baseline,
)
from airflow_provider_kip848.operators.approval import APPROVAL_ARGS, KafkaChangeBranchOperator, change_control_params
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.group_load import KafkaGroupLoadsOperator
from airflow_provider_kip848.operators.lint import KafkaClientConfigLintOperator
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.members import KafkaRemoveGroupMembersOperator
from airflow_provider_kip848.operators.metrics import KafkaGroupMetricsOperator
from airflow_provider_kip848.operators.offsets import KafkaSnapshotGroupOffsetsOperator
from airflow_provider_kip848.operators.params import (
    carried_consumer_params,
    controller_params,
    lag_params,
    lag_plan_line,
    lag_wait_args,
    validation_params,
)
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from airflow_provider_kip848.operators.report import PREFLIGHT, RunReport, report_task, rollout_rule
from airflow_provider_kip848.operators.runbook_steps import (
    capture_output,
    carried_notes,
    carried_settings,
    consumer_validation,
    group_config_changes,
)
from airflow_provider_kip848.operators.schedule import deployment_schedule
from airflow_provider_kip848.sensors.group import (
    KafkaGroupLagSensor,
    KafkaGroupMigratedSensor,
    KafkaGroupTypeSensor,
)

DAG_ID = "kip848_consumer_rolling_upgrade"
CONN = "{{ params.kafka_conn_id }}"
GROUP = "{{ params.group_id }}"
#: this run's own folder under the deployment's artifact location (every worker reaches it; see
#: changecontrol.artifacts): a snapshot written by one worker is compared by another
SNAPSHOTS = "{{ kip848_run_location(params.kafka_conn_id, dag, run_id, 'snapshots') }}"
CONTROLLER = {"controller": "{{ params.app_controller }}", "controller_args": "{{ params.app_controller_args }}"}
#: the actions (stop, start, roll) also carry the controller's fingerprint the approval showed: a registry entry
#: edited since is refused
ACTION = {**CONTROLLER, "approved_fingerprint": approved_fingerprint()}
#: the group configs this run sets: the application's session timeout and heartbeat interval carried over
GROUP_CONFIGS = "{{ ti.xcom_pull(task_ids='carry_over_settings')['set'] }}"
#: the carried consumer.* settings are set on the classic group for the consumer group it becomes (shown with them)
FOR_GROUP_TYPE = "consumer"
#: the protocol the run rolls to, the one it comes from (its way back) and the preflight's mode for it
TARGET = "{{ params.target_protocol }}"
SOURCE = "{{ 'classic' if params.target_protocol == 'consumer' else 'consumer' }}"
MODE = "{{ 'classic_to_consumer' if params.target_protocol == 'consumer' else 'consumer_to_classic' }}"


def _source(target: str) -> str:
    return "classic" if target == "consumer" else "consumer"


def _title(params: dict) -> str:
    if params["target_protocol"] == "classic":
        return f"KIP-848 online way back to classic of {params['group_id']}"
    return f"KIP-848 rolling upgrade of {params['group_id']}"


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka", "kip848", "migration"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    user_defined_macros=MACROS,
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "group_id": Param("", type="string", minLength=1, pattern=GROUP_ID_PATTERN, title="Consumer group"),
        "target_protocol": Param("consumer", type="string", enum=["consumer", "classic"], title="Roll to",
                                 description="consumer: the KIP-848 upgrade. classic: the online way back of a "
                                             "migrated group (the brokers' group.consumer.migration.policy must "
                                             "allow the downgrade: bidirectional or downgrade)."),
        "client_properties": Param({}, type="object", title="Client properties to lint over the controller's",
                                   description="The controller reads the config the application will run with; "
                                               "keys typed here override it (shown as such). Without a controller, "
                                               "only these are linted, and the lint says so."),
        **controller_params("The name of the application's controller in the deployment's registry: it rolls the "
                            "application and its status judges the instances. Empty: the team rolls it; the DAG "
                            "waits and judges from the broker alone (said in the approval)."),
        "client": Param("librdkafka", type="string", enum=["java", "librdkafka"], title="Client library"),
        "client_version": Param(None, type=["null", "string"], pattern=r"^\d+\.\d+(\.\d+)?$",
                                title="Client library release (e.g. 2.12.1 or 4.1.0)",
                                description="Checked against the first production-ready release of the consumer "
                                            "protocol (librdkafka 2.12, Java 4.0). Empty: not checked (the lint "
                                            "says so)."),
        "subscription_pattern": Param(None, type=["null", "string"], title="Regex subscription (only if the "
                                      "consumers subscribe by pattern)",
                                      description="Leave empty for consumers that subscribe to topic names."),
        "output_topic": Param(None, type=["null", "string"], title="Output topic to check for gaps",
                              description="Empty: skip the gap check."),
        "id_source": Param("key", type="string", title="Record id in the output: key, value or json:<field>"),
        "allowed_duplicates": Param(1000, type="integer", minimum=0, maximum=MAX_RECORDS,
                                    title="Duplicates allowed in the output (at-least-once redelivery)"),
        "expected_instances": Param(None, type=["null", "integer"], minimum=1, maximum=MAX_MEMBERS,
                                    title="Instances the application runs",
                                    description="The rollout is done when this many live members run the new "
                                                "protocol. Empty: the number of live members when the plan is made "
                                                "(shown in the approval)."),
        "rollback_check": Param("fail", type="string", enum=["fail", "warn"],
                                title="When the broker cannot take the rollback branch",
                                description="group.consumer.migration.policy=upgrade or disabled refuses the online "
                                            "rollback to classic this DAG offers: fail the preflight, or only "
                                            "warn in the plan."),
        **carried_consumer_params(),
        **lag_params(),
        "first_instance_timeout_minutes": Param(5, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                                title="First-instance gate (minutes)",
                                                description="With a controller that can restart one instance: the "
                                                            "first one must come in on the new protocol within "
                                                            "this, before any other restarts."),
        "rollout_timeout_minutes": Param(60, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                         title="Rollout deadline (minutes)"),
        "rollback_timeout_minutes": Param(30, type="number", minimum=0.1, maximum=MAX_MINUTES,
                                          title="Rollback deadline (minutes)"),
        "poll_seconds": Param(5, type="number", minimum=0.2, maximum=MAX_POLL_SECONDS,
                              title="Poll interval of the waits"),
        **validation_params(),
        "fail_on_rollback": Param(True, type="boolean", title="Mark the run failed when the rollout was rolled back"),
        "dry_run": Param(False, type="boolean", title="Dry run (checks and plan only)"),
        # the one cluster change of this DAG is the carried group configs (audited; the deployment rolls the
        # consumers), right after the approval and the snapshot: no recheck
        **{k: v for k, v in change_control_params().items() if k in ("approvers", "four_eyes")},
    },
)
def kip848_consumer_rolling_upgrade():
    controller = KafkaApplicationControllerOperator(task_id="controller", group_protocol=TARGET,
                                                    way_back_protocol=SOURCE, required=False, **CONTROLLER)
    lint = KafkaClientConfigLintOperator(
        task_id="lint_client_config", properties="{{ params.client_properties }}", target=TARGET,
        client="{{ params.client }}", client_version="{{ params.client_version }}",
        subscription_pattern="{{ params.subscription_pattern }}",
        # the brokers' group.consumer.assignors and the group's own assignor decide what replaces it
        kafka_conn_id=CONN, group_id=GROUP, controller_result="{{ ti.xcom_pull(task_ids='controller') }}",
        use_controller=True,
    )
    # client_release: the client release each instance printed at start (the controller task read their logs),
    # else the controller's declared one, else the Params' (docs/operators.md#preflight-checks)
    preflight = KafkaMigrationPreflightOperator(task_id="preflight", kafka_conn_id=CONN, mode=MODE,
                                           group_id=GROUP, rollback="{{ params.rollback_check }}",
                                           controller_result="{{ ti.xcom_pull(task_ids='controller') }}",
                                           client_release=True, client="{{ params.client }}",
                                           client_version="{{ params.client_version }}")

    # on the consumer protocol the client's session.timeout.ms / heartbeat.interval.ms are ignored: the group's
    # configs decide, so the values the application runs with on classic are carried over, set before the roll
    # (the way back to classic carries none: classic members bring their own)
    @task
    def carry_over_settings(params: dict | None = None, **context) -> dict:
        group_type = "consumer" if params["target_protocol"] == "consumer" else "classic"
        return carried_settings(params, context["ti"].xcom_pull(task_ids="controller"), group_type=group_type)

    validate_configs = KafkaGroupConfigOperator(task_id="validate_group_configs", kafka_conn_id=CONN,
                                                group_id=GROUP, set_configs=GROUP_CONFIGS, dry_run=True,
                                                for_group_type=FOR_GROUP_TYPE)
    group_configs = KafkaGroupConfigOperator(task_id="set_group_configs", kafka_conn_id=CONN, group_id=GROUP,
                                             set_configs=GROUP_CONFIGS, for_group_type=FOR_GROUP_TYPE)

    @task
    def make_plan(lint_result: dict, preflight_report: dict, carried: dict, configs: dict,
                  params: dict | None = None, **context) -> dict:
        from airflow_provider_kip848.changecontrol.plan import Change, Plan
        from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
        from airflow_provider_kip848.operators.application import plan_lines
        from airflow_provider_kip848.operators.lint import lint_lines

        controller_result = context["ti"].xcom_pull(task_ids="controller")
        target, source = params["target_protocol"], _source(params["target_protocol"])
        by_instance = bool(controller_result and controller_result["controller"].get("can_roll_instances"))
        rolled_by = (f"through controller {controller_result['controller']['name']}" if controller_result
                     else "by the application team")
        if by_instance:
            rolled_by += (f" instance by instance: the first one must run {target} within "
                          f"{params['first_instance_timeout_minutes']:g} min before any other restarts (the "
                          "gate), each static member must have left before its successor starts")
            # how the platform moves each instance (a Kubernetes workload: pod by pod, its partition or held rollout)
            each = controller_result["controller"].get("actions", {}).get("roll_instance")
            if each:
                rolled_by += f"; each instance: {each}"
        elif controller_result:
            rolled_by += " (the platform's own rolling restart: no first-instance gate, it cannot restart one "
            rolled_by += "instance)"

        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            desc = hook.describe_group(params["group_id"]).to_dict()
        live = [m for m in desc["members"] if m["member_epoch"] is None or m["member_epoch"] >= 0]
        behind = [m["client_id"] for m in live if m["protocol"] != target]
        expected = params["expected_instances"] or len(live)
        done = desc["type"] == target and not behind and len(live) >= expected
        changes = [] if done else [
            Change("protocol", params["group_id"], f"{desc['type']} ({len(behind)} {source} member(s))",
                   "consumer (KIP-848)" if target == "consumer" else "classic",
                   f"the instances are restarted one by one {rolled_by}"),
        ]
        before = configs.get("before") or {}
        if not done:
            changes += group_config_changes(params["group_id"], configs,
                                            lambda _key: "set before the roll (the consumer protocol ignores the "
                                                         "client's)")
        checked = ("each proven alive, every instance running on the platform with no restart since the roll"
                   if controller_result else "each proven alive (instances NOT checked: no controller named)")
        plan = Plan(
            title=_title(params),
            steps=("snapshot committed offsets", *(["set the group configs carried over"] if carried["set"] else []),
                   *(["remove the static members whose instance the controller shows gone"] if controller_result
                     else []),
                   f"roll instances with group.protocol={target} {rolled_by}",
                   f"wait until {expected} member(s) run the {target} protocol and none the {source} one, {checked}",
                   *(["prove the group still loads: described from its coordinator, its records in "
                      "__consumer_offsets replayed as a loading coordinator replays them (apache/kafka#23514)"]
                     if target == "classic" else []),
                   lag_plan_line(params),
                   "snapshot again and validate with PySpark", "report"),
            changes=tuple(changes),
            checks=tuple(preflight_report["checks"]),
            notes=(f"expected instances: {expected}"
                   + ("" if params["expected_instances"] else " (the live members now; set expected_instances if "
                      "the application runs more or fewer)"),
                   *carried_notes(carried), *plan_lines(controller_result), *lint_lines(lint_result),
                   *(f"preflight {c['name']} ({c['status']}): {c['evidence']}. {c['remedy']}"
                     for c in preflight_report["checks"] if c["status"] == "warn")),
            facts={"group": {k: desc[k] for k in ("type", "state", "assignor")}, "group_configs": before,
                   "target_protocol": target, "by_instance": by_instance,
                   "members": [(m["client_id"], m["protocol"]) for m in desc["members"]],
                   "expected_instances": expected,
                   "controller": controller_result["controller"]["name"] if controller_result else None},
        )
        return {**plan.to_dict(), "markdown": plan.render_markdown(dry_run=params["dry_run"])}

    @task.branch
    def route(plan: dict, params: dict | None = None) -> str:
        return "report" if plan["nothing_to_do"] or params["dry_run"] else "approval"

    approval = KafkaChangeBranchOperator(
        task_id="approval",
        subject="KIP-848 {{ 'rolling upgrade' if params.target_protocol == 'consumer' else 'online way back to "
                "classic' }} of consumer group {{ params.group_id }}",
        body="{{ ti.xcom_pull(task_ids='make_plan')['markdown'] }}",
        options=["Approve", "Reject"],
        options_mapping={"Approve": "capture_output_before", "Reject": "rollback_requested"},
        **APPROVAL_ARGS,
    )

    @task
    def capture_output_before(params: dict | None = None) -> dict:
        return capture_output(params)

    snapshot_before = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_before", kafka_conn_id=CONN, group_id=GROUP,
                                                   path=f"{SNAPSHOTS}/before.json")
    # a crashed static member holds its group.instance.id until its session expires: its successor would be fenced
    departed = KafkaRemoveGroupMembersOperator(task_id="remove_departed_static_members", kafka_conn_id=CONN,
                                          group_id=GROUP, departed_of="{{ params.app_controller }}",
                                          controller_args="{{ params.app_controller_args }}")
    roll = KafkaApplicationRollOperator(task_id="roll_application", group_protocol=TARGET, required=False,
                                        kafka_conn_id=CONN, group_ids=GROUP,
                                        first_instance_timeout_minutes="{{ params.first_instance_timeout_minutes }}",
                                        instance_timeout_minutes="{{ params.rollout_timeout_minutes }}",
                                        poll_interval="{{ params.poll_seconds }}", **ACTION)
    wait_migrated = KafkaGroupMigratedSensor(
        task_id="wait_migrated", kafka_conn_id=CONN, group_id=GROUP, group_type=TARGET,
        expected_members="{{ ti.xcom_pull(task_ids='make_plan')['facts']['expected_instances'] }}",
        poll_interval="{{ params.poll_seconds }}", timeout_minutes="{{ params.rollout_timeout_minutes }}",
        baseline=start_baseline("roll_application"), **CONTROLLER,
    )
    # back on classic (the way back run): the group still loads (apache/kafka#23514); the upgrade run: nothing to prove
    loads = KafkaGroupLoadsOperator(task_id="prove_group_loads", kafka_conn_id=CONN, group_id=GROUP, group_type=TARGET)
    # caught up at the lag before the roll (its snapshot) plus the margin, or a lag that stops growing: never lag 0
    wait_lag = KafkaGroupLagSensor(task_id="wait_lag_drained", kafka_conn_id=CONN, group_id=GROUP,
                                   baseline_snapshot=f"{SNAPSHOTS}/before.json", **lag_wait_args(),
                                   poll_interval="{{ params.poll_seconds }}",
                                   timeout_minutes="{{ params.rollout_timeout_minutes }}",
                                   baseline=start_baseline("roll_application"), **CONTROLLER)
    snapshot_after = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_after", kafka_conn_id=CONN, group_id=GROUP,
                                                  path=f"{SNAPSHOTS}/after.json")

    @task
    def capture_output_after(params: dict | None = None) -> dict:
        return capture_output(params)


    @task
    def rollback_requested(params: dict | None = None) -> str:
        return (f"rejected: the instances stay on (or go back to) group.protocol="
                f"{_source(params['target_protocol'])}")

    @task(trigger_rule="all_done")
    def rollback_on_timeout(params: dict | None = None, **context) -> dict | str:
        import logging

        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        from airflow_provider_kip848.changecontrol.report import task_states
        from airflow_provider_kip848.controllers import ControllerError
        from airflow_provider_kip848.engine.instance_roll import RollLimits
        from airflow_provider_kip848.engine.way_back import WayBackFailed, roll_back
        from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
        from airflow_provider_kip848.hooks.instances import task_error
        from airflow_provider_kip848.operators.application import controller_is_named, resolve

        # only a rollout that started and failed leads here (its deadline, a crash the platform saw, a roll that
        # failed half-way): a refused preflight or a rejected plan never started one (upstream_failed / skipped)
        states = task_states(context)
        if "failed" not in (states.get("wait_migrated"), states.get("roll_application")):
            raise AirflowSkipException("the rollout did not fail: no rollback")
        back = _source(params["target_protocol"])
        if not controller_is_named(params["app_controller"]):
            return f"rollout not finished in time: the team rolls the instances back to group.protocol={back}"
        deadline = 60 * float(params["rollback_timeout_minutes"])
        try:  # the way back by the same road (instance by instance, or the platform's rolling restart)
            with resolve(params["app_controller"], params["app_controller_args"]) as controller:
                approved = (context["ti"].xcom_pull(task_ids="controller") or {}).get("controller") or {}
                controller.require_fingerprint(approved.get("fingerprint"))
                with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
                    # every instance tried whatever its state; where it left them is the report's "split"
                    result = roll_back(controller, hook, [params["group_id"]], back,
                                       RollLimits(first_instance_s=deadline, instance_s=deadline,
                                                  poll_s=float(params["poll_seconds"])),
                                       context=context, task_id="rollback_on_timeout",
                                       audit_log=None, log=logging.getLogger("airflow.task"))
        except ControllerError as exc:
            raise task_error(exc) from exc
        except WayBackFailed as exc:
            context["ti"].xcom_push(key="split", value=exc.split)
            context["ti"].xcom_push(key="rolled", value=exc.rolled)
            raise AirflowFailException(f"The way back to {back} stopped: {exc.what}") from exc
        context["ti"].xcom_push(key="split", value=result["split"])
        return result

    # the rollback of an upgrade brings the group back to classic: the same proof
    loads_back = KafkaGroupLoadsOperator(task_id="prove_group_loads_back", kafka_conn_id=CONN, group_id=GROUP,
                                         group_type=SOURCE)
    wait_back = KafkaGroupTypeSensor(task_id="wait_previous_protocol", kafka_conn_id=CONN, group_id=GROUP,
                                        group_type=SOURCE,
                                        poll_interval="{{ params.poll_seconds }}",
                                        timeout_minutes="{{ params.rollback_timeout_minutes }}",
                                        trigger_rule="one_success")

    report = RunReport(
        title=_title,
        # the way back answers a rollout that did not complete: its deadline, or a roll the platform could not finish
        outcome=rollout_rule(done="migrated", way_back_task="rollback_on_timeout", back_task="wait_previous_protocol",
                             deadline_tasks=("wait_migrated", "roll_application")),
        # the rollout's worst per-partition gap (commits, or the output records) and the rebalances it caused
        target=lambda p: p["target_protocol"],
        results={"preflight": PREFLIGHT, "controller": "controller", "lint": "lint_client_config",
                 "group_settings": "carry_over_settings", "group_configs": "set_group_configs",
                 "rolled": "roll_application", "migration": "wait_migrated",
                 "rolled_back": ("rollback_on_timeout", "rolled"),
                 "departed": "remove_departed_static_members",
                 "lag": "wait_lag_drained", "validation": "validate", "rollback": "wait_previous_protocol",
                 "group_load": "prove_group_loads", "group_load_back": "prove_group_loads_back"},
        approval_task_ids=("approval",),
        # where the way back left the group: its members by protocol (the coordinator), its instances (the
        # platform), those not back; the report says "mixed" when it is
        split=("rollback_on_timeout", "split"),
        fail_outcomes=lambda p: ("failed", "refused", "timed_out_rolled_back") if p["fail_on_rollback"]
        else ("failed", "refused"),
    )

    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id=CONN, resource=f"group:{GROUP}",
                                   dry_run="{{ params.dry_run }}")
    carried = carry_over_settings()
    controller >> lock >> [lint, preflight] >> carried >> validate_configs
    plan = make_plan(lint.output, preflight.output, carried, validate_configs.output)
    decision = route(plan)
    final = report_task(report, task_id="report")
    out_before = capture_output_before()
    out_after = capture_output_after()
    decision >> approval >> [out_before, rollback := rollback_requested()]
    out_before >> snapshot_before >> group_configs >> departed >> roll >> wait_migrated >> loads >> wait_lag
    wait_lag >> snapshot_after >> out_after
    # the brokers' group metrics before, during and after the rollout (side branches: they never gate it)
    plan >> KafkaGroupMetricsOperator(task_id="metrics_before", kafka_conn_id=CONN, point="before") >> final
    snapshot_before >> KafkaGroupMetricsOperator(task_id="metrics_during", kafka_conn_id=CONN, point="during") >> final
    out_after >> KafkaGroupMetricsOperator(task_id="metrics_after", kafka_conn_id=CONN, point="after") >> final
    spec, validate = consumer_validation(snapshot_before.output, snapshot_after.output, out_before, out_after,
                                         task_id="validate", kafka_conn_id=CONN,
                                         output_dir=f"{SNAPSHOTS}/validation",
                                         title="KIP-848 {{ 'rolling upgrade' if params.target_protocol == "
                                               "'consumer' else 'online way back to classic' }} of "
                                               "{{ params.group_id }}")
    out_after >> spec
    validate >> final
    wait_migrated >> (timeout_branch := rollback_on_timeout())
    [rollback, timeout_branch] >> wait_back >> loads_back >> final
    decision >> final


kip848_consumer_rolling_upgrade()

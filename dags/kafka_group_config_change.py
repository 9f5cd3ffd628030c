"""Change one group-level config, reviewed: validate, show before/after, approve, apply, read back.

Runbook (``kafka-configs --entity-type groups``):

1. Validate the new value against the broker's bounds (``group.*.min/max``,
   session above heartbeat) without changing anything.
2. A person approves the exact change, shown with the current value (one of
   ``approvers``; not the user who triggered the run: four eyes).
3. Right before applying, the plan is computed again from the cluster: an
   approval that expired, or a plan that changed (someone altered the config
   meanwhile), is not reused; a new approval showing the difference is asked.
4. Apply it (``kafka-configs --alter --entity-type groups --entity-name G
   --add-config k=v`` or ``--delete-config k``); one audit record per key.
5. Read it back.

Trigger it from the UI form: group, key (a list of the group configs of
Kafka 4.3), value, set or delete.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.kafka.arguments import GROUP_ID_PATTERN
from airflow_provider_kip848.operators.approval import (
    APPROVAL_ARGS,
    RECHECK_ARGS,
    KafkaApprovalRecheckOperator,
    KafkaChangeApprovalOperator,
    change_control_params,
)
from airflow_provider_kip848.operators.group_config import KafkaGroupConfigOperator
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.report import RunReport, change_rule, report_task
from airflow_provider_kip848.operators.schedule import deployment_schedule

DAG_ID = "kafka_group_config_change"
GROUP_CONFIG_KEYS = [
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
    "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms",
    "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
    "share.auto.offset.reset", "share.isolation.level", "share.delivery.count.limit",
    "share.partition.max.record.locks", "share.renew.acknowledge.enable", "share.assignment.interval.ms",
]

SET = "{{ {params.key: params.value} if params.action == 'set' else {} }}"
DELETE = "{{ [params.key] if params.action == 'delete' else [] }}"


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka", "group-config"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "group_id": Param("", type="string", minLength=1, pattern=GROUP_ID_PATTERN, title="Group id"),
        "key": Param("consumer.session.timeout.ms", type="string", enum=GROUP_CONFIG_KEYS, title="Config"),
        "value": Param("45000", type="string", maxLength=200, title="New value (ignored for delete)"),
        "action": Param("set", type="string", enum=["set", "delete"], title="Set or delete the override"),
        "dry_run": Param(False, type="boolean", title="Dry run (validate and plan only)"),
        "allow_absent_group": Param(False, type="boolean", title="Configure a group that does not exist yet",
                                    description="Kafka accepts configs for any group id: without this, a group "
                                                "the cluster does not list is refused (a mistyped id), naming "
                                                "similar ids."),
        "for_group_type": Param(None, type=["null", "string"], enum=[None, "consumer", "streams", "share"],
                                title="Set for a group of this type",
                                description="Empty: the group's own type, and a config of another type (streams.* "
                                            "on a consumer group, any on a classic group) is refused: it would "
                                            "never apply. Name the type the group is becoming, or will have when "
                                            "it does not exist yet (allow_absent_group); the approval shows it."),
        **change_control_params(),
    },
)
def kafka_group_config_change():
    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id="{{ params.kafka_conn_id }}",
                                   resource="group:{{ params.group_id }}", dry_run="{{ params.dry_run }}")
    validate = KafkaGroupConfigOperator(
        task_id="validate", kafka_conn_id="{{ params.kafka_conn_id }}", group_id="{{ params.group_id }}",
        set_configs=SET, delete_configs=DELETE, dry_run=True, allow_absent_group="{{ params.allow_absent_group }}",
        for_group_type="{{ params.for_group_type }}",
    )

    @task
    def make_plan(validation: dict, params: dict | None = None) -> dict:
        return build_plan(params, validation)

    @task.branch
    def route(plan: dict, params: dict | None = None) -> str:
        return "report" if plan["nothing_to_do"] or params["dry_run"] else "approval"

    approval = KafkaChangeApprovalOperator(
        task_id="approval",
        subject="Kafka group {{ params.group_id }}: {{ params.action }} {{ params.key }}",
        body="{{ ti.xcom_pull(task_ids='make_plan')['markdown'] }}",
        **APPROVAL_ARGS,
    )
    recheck = KafkaApprovalRecheckOperator(task_id="recheck_approval", replan=replan, **RECHECK_ARGS)

    apply = KafkaGroupConfigOperator(
        task_id="apply", kafka_conn_id="{{ params.kafka_conn_id }}", group_id="{{ params.group_id }}",
        set_configs=SET, delete_configs=DELETE,
        allow_absent_group="{{ params.allow_absent_group }}", for_group_type="{{ params.for_group_type }}",
    )

    @task
    def verify(change: dict, params: dict | None = None) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook

        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            now = hook.describe_group_config(params["group_id"]).dynamic
        expected = change["requested_set"].get(params["key"]) if params["action"] == "set" else None
        if now.get(params["key"]) != expected:
            raise AirflowFailException(f"{params['key']} reads back as {now.get(params['key'])!r}, not {expected!r}.")
        return {"dynamic": now}

    report = RunReport(
        title=lambda p: f"Group config change on {p['group_id']}",
        outcome=change_rule(apply_task="apply"),
        results={"change": "apply"}, change_tasks=("apply",), metrics=False,
        before=lambda p, context, plan: (plan or {}).get("facts", {}).get("before"),
        after=lambda p, context, plan: (context["ti"].xcom_pull(task_ids="verify") or {}).get("dynamic"),
    )

    lock >> validate
    plan = make_plan(validate.output)
    decision = route(plan)
    final = report_task(report, task_id="report")
    decision >> approval >> recheck >> apply
    verify(apply.output) >> final
    decision >> final


def build_plan(params: dict, validation: dict | None = None) -> dict:
    """The change to approve, from the broker's validation of it (run again right before applying)."""
    from airflow_provider_kip848.changecontrol.plan import Change, Plan
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook

    key = params["key"]
    if validation is None:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            validation = hook.alter_group_config(
                params["group_id"], {key: params["value"]} if params["action"] == "set" else {},
                [key] if params["action"] == "delete" else [], dry_run=True,
                allow_absent_group=bool(params.get("allow_absent_group")),
                for_group_type=params.get("for_group_type")).to_dict()
    before = validation["before"].get(key)
    after = validation["requested_set"].get(key) if params["action"] == "set" else None
    changes = () if before == after else (
        Change("group_config", f"{params['group_id']}:{key}", before if before is not None else "(broker default)",
               after if after is not None else "(broker default)", "validated against the broker's bounds"),)
    becoming, now = validation.get("for_group_type"), validation.get("group_type")
    notes = (f"for_group_type={becoming}: set for a {becoming} group; the group is {now or 'not existing yet'} "
             "now, and the config applies only once it is a " + becoming + " group",) if becoming and becoming != now \
        else ()
    plan = Plan(title=f"Group {params['group_id']}: {params['action']} {key}",
                steps=("kafka-configs --alter --entity-type groups", "read the group's configs back"),
                changes=changes, notes=notes,
                facts={"before": validation["before"], "group_type": now, "for_group_type": becoming})
    return {**plan.to_dict(), "markdown": plan.render_markdown(dry_run=params["dry_run"])}


def replan(context) -> dict:
    return build_plan(context["params"])


kafka_group_config_change()

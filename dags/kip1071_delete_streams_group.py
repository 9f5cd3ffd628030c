"""Delete an empty streams group (KIP-1071), its committed offsets snapshotted first.

Runbook (``kafka-streams-groups --delete --group <id>``):

1. Check the group: it exists, is a streams group and has no member (a group
   with members is refused: stop every instance of the application first and
   wait for Empty; streams groups reject LeaveGroup).
2. Look at what goes with it: the committed offsets (deleted with the group)
   and the topology's internal topics (repartition and changelog topics: NOT
   deleted by deleting the group; listed in the plan, to delete separately once
   no application needs them).
3. Snapshot the committed offsets to the run's artifacts (a restore can commit
   them again for a group of the same id).
4. A person approves the exact delete (four eyes, per the change-control Params).
5. Right before the delete: the group is checked again (still a streams group,
   still empty); a changed plan asks again.
6. Delete it, audited, and read it back: the cluster no longer lists it.

A group that does not exist is nothing to do (a rerun after the delete says
so); a dry run ends after the plan, nothing written or changed.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.changecontrol.artifacts import MACROS
from airflow_provider_kip848.kafka.arguments import GROUP_ID_PATTERN
from airflow_provider_kip848.kafka.inert import md_name
from airflow_provider_kip848.operators.approval import (
    APPROVAL_ARGS,
    RECHECK_ARGS,
    KafkaApprovalRecheckOperator,
    KafkaChangeApprovalOperator,
    change_control_params,
)
from airflow_provider_kip848.operators.groups import KafkaDeleteGroupOperator
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.offsets import KafkaSnapshotGroupOffsetsOperator
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from airflow_provider_kip848.operators.report import PREFLIGHT, RunReport, change_rule, report_task
from airflow_provider_kip848.operators.schedule import deployment_schedule

DAG_ID = "kip1071_delete_streams_group"
CONN = "{{ params.kafka_conn_id }}"
GROUP = "{{ params.group_id }}"
SNAPSHOTS = "{{ kip848_run_location(params.kafka_conn_id, dag, run_id, 'snapshots') }}"
SNAPSHOT_LINE = ("**Committed offsets snapshot** (taken before this approval; the delete deletes them): "
                 "{{ kip848_md_name(ti.xcom_pull(task_ids='snapshot_offsets')['path']) }}, "
                 "{{ ti.xcom_pull(task_ids='snapshot_offsets')['committed_partitions'] }} committed partition(s), "
                 "lag {{ ti.xcom_pull(task_ids='snapshot_offsets')['total_lag'] }}")


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka", "kip1071", "streams", "destructive"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    user_defined_macros={**MACROS, "kip848_md_name": md_name},  # the snapshot's path in the approval: a name
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "group_id": Param("", type="string", minLength=1, pattern=GROUP_ID_PATTERN,
                          title="Streams group (the application.id)"),
        "dry_run": Param(False, type="boolean", title="Dry run (checks and plan only)"),
        **change_control_params(),
    },
)
def kip1071_delete_streams_group():
    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id=CONN, resource=f"group:{GROUP}",
                                   dry_run="{{ params.dry_run }}")
    preflight = KafkaMigrationPreflightOperator(task_id="preflight", kafka_conn_id=CONN, mode="delete_streams_group",
                                           group_id=GROUP)

    @task
    def inspect_group(params: dict | None = None) -> dict:
        return read_group(params)

    @task
    def make_plan(preflight_report: dict, group: dict, params: dict | None = None) -> dict:
        return build_plan(params, preflight_report["checks"], group)

    @task.branch
    def route(plan: dict, params: dict | None = None) -> str:
        if plan["nothing_to_do"] or params["dry_run"]:
            return "report"
        return "snapshot_offsets"

    # deleting the group deletes its committed offsets: they are kept in the run's artifacts first
    snapshot = KafkaSnapshotGroupOffsetsOperator(task_id="snapshot_offsets", kafka_conn_id=CONN, group_id=GROUP,
                                            path=f"{SNAPSHOTS}/offsets-before-delete.json")
    approval = KafkaChangeApprovalOperator(
        task_id="approval",
        subject="Kafka: delete streams group {{ params.group_id }} ({{ params.kafka_conn_id }})",
        body="{{ ti.xcom_pull(task_ids='make_plan')['markdown'] }}\n\n" + SNAPSHOT_LINE,
        **APPROVAL_ARGS,
    )
    recheck = KafkaApprovalRecheckOperator(task_id="recheck_approval", replan=replan, **RECHECK_ARGS)
    delete = KafkaDeleteGroupOperator(task_id="delete_group", kafka_conn_id=CONN, group_id=GROUP,
                                      group_type="streams")

    @task
    def verify(params: dict | None = None, **context) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
        from airflow_provider_kip848.kafka.errors import GroupNotFound

        topics = context["ti"].xcom_pull(task_ids="inspect_group")["internal_topics"]
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            try:
                listing = hook.group_listing(params["group_id"])
            except GroupNotFound:
                listing = None
            left = hook.get_conn().topic_partition_counts(topics) if topics else {}
        if listing is not None:
            raise AirflowFailException(f"Group {params['group_id']!r} is still listed ({listing.type.value}, "
                                       f"{listing.state}).")
        return {"group_id": params["group_id"], "listed": False,
                "internal_topics_left": sorted(t for t, n in left.items() if n is not None)}

    report = RunReport(
        title=lambda p: f"Delete streams group {p['group_id']}",
        outcome=change_rule(apply_task="delete_group"),
        metrics=False,
        results={"preflight": PREFLIGHT, "group": "inspect_group", "snapshot": "snapshot_offsets",
                 "delete": "delete_group"},
        change_tasks=("delete_group",),
        after=lambda p, context, plan: context["ti"].xcom_pull(task_ids="verify"),
    )

    group = inspect_group()
    plan = make_plan(preflight.output, group)
    lock >> preflight >> group
    decision = route(plan)
    final = report_task(report, task_id="report")
    decision >> snapshot >> approval >> recheck >> delete >> verify() >> final
    decision >> final


def read_group(params: dict) -> dict:
    """The group as the cluster shows it now: type, state, members, the topology's internal topics."""
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.errors import GroupNotFound

    with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
        try:
            listing = hook.group_listing(params["group_id"])
        except GroupNotFound:
            return {"exists": False, "internal_topics": []}
        desc = hook.describe_streams_group(params["group_id"])
        topics = hook.get_conn().streams_group_internal_topics(params["group_id"])
    return {"exists": True, "type": listing.type.value, "state": desc.state.value, "members": len(desc.members),
            "internal_topics": list(topics)}


def build_plan(params: dict, checks: list | None = None, group: dict | None = None) -> dict:
    """The delete to approve (computed again right before deleting: a group that is no longer an empty streams
    group then fails the run, a changed plan asks again)."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_kip848.changecontrol.plan import Change, Plan
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.api import read_preflight_facts
    from airflow_provider_kip848.kafka.rules.preflight import run_preflight

    group_id = params["group_id"]
    if checks is None or group is None:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            report = run_preflight(read_preflight_facts(hook.get_conn(), group_id), "delete_streams_group",
                                   group_id=group_id)
        if report.failures:  # e.g. an instance started since the approval
            raise AirflowFailException("Refused now: " + "; ".join(
                f"{c.name}: {c.evidence}. {c.remedy}" for c in report.failures))
        checks = report.to_dict()["checks"]
        group = read_group(params)
    topics = group["internal_topics"]
    changes = () if not group["exists"] else (
        Change("group", group_id, {"type": group["type"], "state": group["state"], "members": group["members"]},
               "deleted", "its committed offsets are deleted with it (snapshotted first)"),)
    plan = Plan(
        title=f"Delete streams group {group_id}",
        steps=("snapshot the committed offsets to the run's artifacts (before the approval)",
               f"check again: {group_id} is a streams group without members",
               f"kafka-streams-groups --delete --group {group_id}",
               f"read back: {group_id} is no longer listed"),
        changes=changes,
        checks=tuple(checks),
        notes=(("Internal topics of its topology, NOT deleted with the group (delete them separately once no "
                "application needs them): " + ", ".join(f"`{t}`" for t in topics)) if topics else
               "No internal topic is known for it (the coordinator holds no topology).",
               "The way back: KafkaRestoreGroupOffsetsOperator commits the snapshot's offsets for the id (it accepts "
               "a group that no longer exists) before the application is started again.") if group["exists"] else (),
        facts={"group": group},
    )
    return {**plan.to_dict(), "markdown": plan.render_markdown(dry_run=params["dry_run"])}


def replan(context) -> dict:
    return build_plan(context["params"])


kip1071_delete_streams_group()

"""Enable the Streams rebalance protocol (KIP-1071) on a Kafka cluster.

Runbook (Kafka docs, "Streams Rebalance Protocol"):

1. Check the brokers: Kafka 4.2.1+ (4.2.0 can lose migrated groups, KAFKA-20254),
   ``streams`` in ``group.coordinator.rebalance.protocols`` (a ``metadata.version``
   below 4.2-IV1, where the feature is on by default, is noted: it is no
   dependency, and the controller validates the change in step 3).
2. Look at the finalized features (``kafka-features describe``).
3. Validate the change with the controller (``kafka-features upgrade --feature
   streams.version=1 --dry-run``).
4. A person approves the exact change.
5. Apply it (``kafka-features upgrade --feature streams.version=1``).
6. Read it back: ``streams.version`` finalized at 1.

Nothing to do (already at the level) ends after step 3 and says so; a dry run
ends there too, with the plan rendered. The same DAG finalizes
``group.version`` (KIP-848) when the Param says so.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kip848.operators.approval import (
    APPROVAL_ARGS,
    RECHECK_ARGS,
    KafkaApprovalRecheckOperator,
    KafkaChangeApprovalOperator,
    change_control_params,
)
from airflow_provider_kip848.operators.features import KafkaFeatureOperator
from airflow_provider_kip848.operators.lock import KafkaChangeLockOperator
from airflow_provider_kip848.operators.preflight import KafkaMigrationPreflightOperator
from airflow_provider_kip848.operators.report import RunReport, change_rule, report_task
from airflow_provider_kip848.operators.runbook_steps import feature_readback
from airflow_provider_kip848.operators.schedule import deployment_schedule

DAG_ID = "kafka_enable_streams_protocol"


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka", "kip1071", "feature"],
    doc_md=__doc__,
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "feature": Param("streams.version", type="string", enum=["streams.version", "group.version", "share.version"],
                         title="Feature"),
        "level": Param(1, type="integer", minimum=0, maximum=10, title="Target level"),
        "declared_broker_version": Param(None, type=["null", "string"], title="Broker release (e.g. 4.2.1)",
                                         description="Needed on 4.2 brokers: 4.2.0 and 4.2.1 look the same on "
                                                     "the wire."),
        "dry_run": Param(False, type="boolean", title="Dry run (validate and plan only)"),
        **change_control_params(),
    },
    render_template_as_native_obj=True,
)
def kafka_enable_streams_protocol():
    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id="{{ params.kafka_conn_id }}",
                                   resource="feature:{{ params.feature }}", dry_run="{{ params.dry_run }}")
    preflight = KafkaMigrationPreflightOperator(
        task_id="preflight",
        kafka_conn_id="{{ params.kafka_conn_id }}",
        mode="enable_feature",
        feature="{{ params.feature }}",
        feature_level="{{ params.level }}",
        declared_broker_version="{{ params.declared_broker_version }}",
    )

    @task
    def describe_features(params: dict | None = None) -> dict:
        from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook

        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            return hook.describe_features().to_dict()

    validate = KafkaFeatureOperator(
        task_id="validate_change",
        kafka_conn_id="{{ params.kafka_conn_id }}",
        feature="{{ params.feature }}",
        level="{{ params.level }}",
        dry_run=True,
    )

    @task
    def make_plan(preflight_report: dict, features: dict, validation: dict, params: dict | None = None) -> dict:
        return build_plan(params, preflight_report["checks"], features, validation)

    @task.branch
    def route(plan: dict, params: dict | None = None) -> str:
        if plan["nothing_to_do"] or params["dry_run"]:
            return "report"
        return "approval"

    approval = KafkaChangeApprovalOperator(
        task_id="approval",
        subject="Kafka: finalize {{ params.feature }}={{ params.level }} ({{ params.kafka_conn_id }})",
        body="{{ ti.xcom_pull(task_ids='make_plan')['markdown'] }}",
        **APPROVAL_ARGS,
    )
    recheck = KafkaApprovalRecheckOperator(task_id="recheck_approval", replan=replan, **RECHECK_ARGS)

    apply = KafkaFeatureOperator(
        task_id="apply_change",
        kafka_conn_id="{{ params.kafka_conn_id }}",
        feature="{{ params.feature }}",
        level="{{ params.level }}",
    )

    @task
    def verify(params: dict | None = None) -> dict:
        return feature_readback(params)

    report = RunReport(
        title=lambda p: f"Enable {p['feature']}={p['level']}",
        outcome=change_rule(apply_task="apply_change"),
        group_param=None, metrics=False,
        results={"preflight": "preflight", "change": "apply_change"}, change_tasks=("apply_change",),
        after=lambda p, context, plan: context["ti"].xcom_pull(task_ids="verify"),
    )

    features = describe_features()
    plan = make_plan(preflight.output, features, validate.output)
    lock >> preflight >> features >> validate
    decision = route(plan)
    final = report_task(report, task_id="report")
    decision >> approval >> recheck >> apply >> verify() >> final
    decision >> final


def build_plan(params: dict, checks: list | None = None, features: dict | None = None,
               validation: dict | None = None) -> dict:
    """The feature change to approve, validated by the controller (computed again right before applying)."""
    from airflow_provider_kip848.changecontrol.plan import Change, Plan
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook

    feature, level = params["feature"], int(params["level"])
    if features is None or validation is None:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            features = hook.describe_features().to_dict()
            validation = {**hook.update_feature(feature, level, action="upgrade", dry_run=True).to_dict()}
            validation["validation"] = validation["message"]
    current = features.get(feature, {}).get("finalized_level", 0)
    changes = () if validation["noop"] else (Change("feature", feature, current, level, validation["validation"]),)
    plan = Plan(
        title=f"Finalize {feature}={level}",
        steps=(f"kafka-features upgrade --feature {feature}={level}", f"read back {feature} (expect {level})"),
        changes=changes,
        checks=tuple(checks or ()),
        facts={"features": {n: f["finalized_level"] for n, f in features.items()}},
    )
    return {**plan.to_dict(), "markdown": plan.render_markdown(dry_run=params["dry_run"])}


def replan(context) -> dict:
    preflight = context["ti"].xcom_pull(task_ids="preflight") or {}
    return build_plan(context["params"], preflight.get("checks"))


kafka_enable_streams_protocol()

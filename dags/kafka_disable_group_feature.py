"""Disable (or lower) a group-protocol feature: ``streams.version``, ``group.version`` or ``share.version``.

Runbook (Kafka docs, ``kafka-features downgrade`` / ``disable``):

1. Look at what depends on the feature: every group of the type it enables
   (``streams.version``: streams groups; ``group.version``: consumer-protocol
   groups; ``share.version``: share groups), any state. A group with members
   refuses the change (its members would fail at their next heartbeat with
   UNSUPPORTED_VERSION), so does one whose members cannot be counted; an empty
   one is listed with a warning: it stays, listed but neither describable nor
   joinable, until the feature is raised again.
2. Validate the change with the controller (``kafka-features disable --feature
   streams.version --dry-run``): the broker's verdict goes into the plan (the
   controller also refuses lowering a feature another finalized feature
   depends on).
3. A person approves the exact change (four eyes, per the change-control Params).
4. Right before the change: the plan is computed again from the cluster (a
   group that gained members since fails the run; a changed plan asks again).
5. Apply it (``kafka-features disable --feature streams.version``), audited,
   and read it back.

Nothing to do (already at or below the level) ends after step 2 and says so;
a dry run ends there too, with the plan rendered. To raise the feature again:
``kafka_enable_streams_protocol``.
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
from airflow_provider_kip848.operators.report import PREFLIGHT, RunReport, change_rule, report_task
from airflow_provider_kip848.operators.runbook_steps import feature_readback
from airflow_provider_kip848.operators.schedule import deployment_schedule

DAG_ID = "kafka_disable_group_feature"
CONN = "{{ params.kafka_conn_id }}"
#: 0 disables the feature; a level above 0 and below the current one downgrades it
ACTION = "{{ 'disable' if params.level == 0 else 'downgrade' }}"


@dag(
    dag_id=DAG_ID,
    schedule=deployment_schedule(DAG_ID),  # None unless the deployment sets [kip848] <dag_id>_schedule (docs/deploy.md)
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "kip848", "kip1071", "feature", "destructive"],
    doc_md=__doc__,
    params={
        "kafka_conn_id": Param("kafka_admin_default", type="string", title="Kafka connection"),
        "feature": Param("streams.version", type="string", enum=["streams.version", "group.version", "share.version"],
                         title="Feature"),
        "level": Param(0, type="integer", minimum=0, maximum=10, title="Target level (0: disable)",
                       description="Below the finalized level; at it: nothing to do. Raising a feature is "
                                   "kafka_enable_streams_protocol."),
        "dry_run": Param(False, type="boolean", title="Dry run (dependants, validation and plan only)"),
        **change_control_params(),
    },
    render_template_as_native_obj=True,
)
def kafka_disable_group_feature():
    lock = KafkaChangeLockOperator(task_id="lock", kafka_conn_id=CONN, resource="feature:{{ params.feature }}",
                                   dry_run="{{ params.dry_run }}")
    # the dependants: every group of the type the feature enables; members fail it, empty ones are warned
    preflight = KafkaMigrationPreflightOperator(task_id="preflight", kafka_conn_id=CONN, mode="disable_feature",
                                           feature="{{ params.feature }}", feature_level="{{ params.level }}")

    @task
    def describe_features(params: dict | None = None) -> dict:
        from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook

        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            return hook.describe_features().to_dict()

    # the broker's verdict: validate-only (changes nothing)
    validate = KafkaFeatureOperator(task_id="validate_change", kafka_conn_id=CONN, feature="{{ params.feature }}",
                                    level="{{ params.level }}", action=ACTION, dry_run=True,
                                    allow_empty_dependent_groups=True)

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
        subject="Kafka: lower {{ params.feature }} to {{ params.level }} ({{ params.kafka_conn_id }})",
        body="{{ ti.xcom_pull(task_ids='make_plan')['markdown'] }}",
        **APPROVAL_ARGS,
    )
    recheck = KafkaApprovalRecheckOperator(task_id="recheck_approval", replan=replan, **RECHECK_ARGS)

    apply = KafkaFeatureOperator(task_id="apply_change", kafka_conn_id=CONN, feature="{{ params.feature }}",
                                 level="{{ params.level }}", action=ACTION, allow_empty_dependent_groups=True)

    @task
    def verify(params: dict | None = None) -> dict:
        return feature_readback(params)

    report = RunReport(
        title=lambda p: f"Lower {p['feature']} to {p['level']}",
        outcome=change_rule(apply_task="apply_change"),
        group_param=None, metrics=False,
        results={"preflight": PREFLIGHT, "validation": "validate_change", "change": "apply_change"},
        change_tasks=("apply_change",),
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
    """The lowering to approve, with the broker's verdict and the dependants it leaves (computed again right
    before applying: a dependant with members then fails the run, a changed list asks again)."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_kip848.changecontrol.plan import Change, Plan
    from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
    from airflow_provider_kip848.kafka.api import read_preflight_facts
    from airflow_provider_kip848.kafka.rules.features import FEATURE_GROUP_TYPES
    from airflow_provider_kip848.kafka.rules.preflight import run_preflight

    feature, level = params["feature"], int(params["level"])
    action = "disable" if level == 0 else "downgrade"
    if checks is None or features is None or validation is None:
        with KafkaGroupAdminHook(params["kafka_conn_id"]) as hook:
            facts = read_preflight_facts(hook.get_conn(), None, feature=feature)
            report = run_preflight(facts, "disable_feature", feature=feature, feature_level=level)
            if report.failures:  # e.g. a dependant gained members since the approval
                raise AirflowFailException("Refused now: " + "; ".join(
                    f"{c.name}: {c.evidence}. {c.remedy}" for c in report.failures))
            checks = report.to_dict()["checks"]
            features = facts.features.to_dict()
            validation = hook.update_feature(feature, level, action=action, dry_run=True,
                                             override_dependent_groups=True).to_dict()
            validation["validation"] = validation["message"]
            validation["dependent_groups"] = facts.dependent_groups
    current = features.get(feature, {}).get("finalized_level", 0)
    dependants = next((c["evidence"] for c in checks if c["name"] == "dependent_groups" and c["status"] != "pass"),
                      None)
    gtype = FEATURE_GROUP_TYPES[feature].value
    changes = () if validation["noop"] else (
        Change("feature", feature, current, level, f"broker (validate only): {validation['validation']}"),)
    steps = [f"kafka-features {action} --feature {feature}" + (f"={level}" if action == "downgrade" else ""),
             f"read back {feature} (expect {level})"]
    if changes and dependants:
        steps.insert(0, f"leave in place ({dependants}): unusable until {feature} is raised again")
    plan = Plan(
        title=f"Lower {feature} {current} -> {level}",
        steps=tuple(steps),
        changes=changes,
        checks=tuple(checks),
        notes=(f"Groups of type {gtype} depend on {feature}; every one of them was listed above (preflight "
               "dependent_groups). The broker's own verdict on the change is the note of the change row.",
               f"The way back: kafka_enable_streams_protocol with feature {feature}."),
        facts={"features": {n: f["finalized_level"] for n, f in features.items()},
               "dependent_groups": validation.get("dependent_groups") or {}},
    )
    return {**plan.to_dict(), "markdown": plan.render_markdown(dry_run=params["dry_run"])}


def replan(context) -> dict:
    return build_plan(context["params"])


kafka_disable_group_feature()

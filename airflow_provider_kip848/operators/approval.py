"""Approval gates for Kafka changes: Airflow's human-in-the-loop operators, under change control.

``KafkaChangeApprovalOperator`` is an ``ApprovalOperator`` (Approve / Reject;
Reject skips the change) and ``KafkaChangeBranchOperator`` an
``HITLBranchOperator`` (each option leads to a task, e.g. Reject -> rollback).
Both

* hand the run's ``approvers`` to Airflow's HITL ``assigned_users``, minus the
  user who triggered the run when the four-eyes rule is on (the default), so
  Airflow answers anybody else with 403;
* refuse a self-approval that still arrives (no approvers named) and fail,
  so nothing downstream is applied;
* push the decision as XCom ``decision``: option, who and when, the hash and
  changes of the plan that was shown (``plan_task_id``), and the change-control
  settings, which the audit trail and the run report quote.

``KafkaApprovalRecheckOperator`` sits right before the first change. It
reuses the earlier approval only if it is still fresh and the plan computed
*now* from the cluster has the approved hash; otherwise it requests a new
approval that shows why (expired, or the diff).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLBranchOperator, HITLOperator
from airflow.sdk import BaseHook, Context, Param
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException, AirflowSkipException
from airflow.sdk.execution_time.hitl import HITLUser

from airflow_provider_kip848.changecontrol.approvals import (
    MAX_APPROVAL_AGE_MINUTES,
    ApprovalExpired,
    ApprovalMissing,
    ApprovalPolicy,
    ChangeControlError,
    PlanChanged,
    check_plan,
    connection_requires_four_eyes,
    is_approving,
    parse_users,
)
from airflow_provider_kip848.changecontrol.report import approval_record
from airflow_provider_kip848.hooks.connection import extra_field
from airflow_provider_kip848.kafka.arguments import USER_ID_PATTERN
from airflow_provider_kip848.kafka.inert import md_text

CHANGE_CONTROL_FIELDS = ("approvers", "four_eyes", "approval_max_age_minutes", "kafka_conn_id")


def plan_summary(plan: Mapping[str, object] | None) -> dict[str, object] | None:
    """What of a plan goes into the decision and the audit: what the approver saw, and its hash."""
    if not plan:
        return None
    return {k: plan.get(k) for k in ("title", "hash", "changes", "steps", "markdown")}


class _ChangeControl(HITLOperator):
    """Shared by the approval operators (first in their bases, before Airflow's HITL operator they extend)."""

    approvers: list[str] | str | None
    four_eyes: bool | str
    approval_max_age_minutes: float | str | None
    plan_task_id: str | None
    kafka_conn_id: str | None

    def _init_change_control(self, approvers: list[str] | str | None, four_eyes: bool | str,
                             approval_max_age_minutes: float | str | None,
                             plan_task_id: str | None, kafka_conn_id: str | None) -> None:
        # Airflow's operator metaclass wraps each operator class's own __init__, so the operators
        # below keep theirs and call this.
        self.approvers = approvers
        self.four_eyes = four_eyes
        self.approval_max_age_minutes = approval_max_age_minutes
        self.plan_task_id = plan_task_id
        self.kafka_conn_id = kafka_conn_id

    def execute(self, context: Context) -> Any:
        self._assign(context)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        self._decide(context, event)
        return super().execute_complete(context, event)

    def _cluster_rules(self) -> dict[str, Any]:
        """Change-control rules the cluster's connection sets (extra ``approvers``, ``four_eyes``):
        a platform team names who approves changes to *this cluster*, and a production connection
        with ``"four_eyes": "required"`` cannot be relaxed by a run's Params."""
        if not self.kafka_conn_id or str(self.kafka_conn_id) in ("None", ""):
            return {}
        try:
            extra = BaseHook.get_connection(str(self.kafka_conn_id)).extra_dejson or {}
        except AirflowNotFoundException as exc:  # a typo in kafka_conn_id: a retry cannot find it either
            raise AirflowFailException(f"There is no Airflow connection {self.kafka_conn_id!r}: create it "
                                       "(type kafka_admin) or fix kafka_conn_id.") from exc
        return {"approvers": extra_field(extra, "approvers"), "four_eyes": extra_field(extra, "four_eyes")}

    def policy(self) -> ApprovalPolicy:
        try:
            rules = self._cluster_rules()
            approvers = self.approvers if parse_users(self.approvers) else rules.get("approvers")
            policy = ApprovalPolicy.from_values(approvers, self.four_eyes, self.approval_max_age_minutes)
            required = connection_requires_four_eyes(rules.get("four_eyes"), str(self.kafka_conn_id))
        except ChangeControlError as exc:
            raise AirflowFailException(str(exc)) from exc
        if not policy.four_eyes and required:
            self.log.warning("four_eyes=False ignored: connection %s requires the four-eyes rule.", self.kafka_conn_id)
            policy = replace(policy, four_eyes=True)
        return policy

    @staticmethod
    def triggered_by(context: Context) -> str | None:
        return getattr(context.get("dag_run"), "triggering_user_name", None)

    def _assign(self, context: Context) -> None:
        policy = self.policy()
        who = self.triggered_by(context)
        try:
            assigned = policy.assigned_users(who)
        except ChangeControlError as exc:
            raise AirflowFailException(str(exc)) from exc
        self.assigned_users = cast(list[HITLUser] | None, assigned)
        self.body = f"{self.body or ''}\n\n{policy.who_may_approve(who)}".strip()
        control = {**policy.describe(), "triggered_by": who,
                   "assigned_users": [u["id"] for u in assigned or []] or None}
        context["ti"].xcom_push(key="change_control", value=control)
        self.log.info("Change control: %s", control)

    def _plan(self, context: Context) -> dict[str, Any] | None:
        if not self.plan_task_id:
            return None
        return context["ti"].xcom_pull(task_ids=self.plan_task_id)

    def _decide(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        ti = context["ti"]
        record = approval_record(event if "chosen_options" in event else None) or {}
        plan = plan_summary(self._plan(context))
        record.update(plan_hash=(plan or {}).get("hash"), plan=plan,
                      change_control=ti.xcom_pull(task_ids=self.task_id, key="change_control"),
                      triggered_by=self.triggered_by(context))
        try:
            self.policy().check_response(record.get("decision"), event.get("responded_by_user"),
                                         self.triggered_by(context))
        except ChangeControlError as exc:
            record["refused"] = str(exc)
            ti.xcom_push(key="decision", value=record)
            self.log.error("%s", exc)
            raise AirflowFailException(str(exc)) from exc
        # recorded first: on Reject the parent skips downstream tasks by raising, so nothing after it runs
        ti.xcom_push(key="decision", value=record)
        self.log.info("Decision: %s by %s at %s (plan %s)", record.get("decision"), record.get("by"),
                      record.get("at"), record.get("plan_hash"))
        return record


class KafkaChangeApprovalOperator(_ChangeControl, ApprovalOperator):
    """Approve or Reject the change shown in ``body`` (Markdown: the plan with before/after).

    :param approvers: user ids allowed to answer (list, or a comma-separated string; templated);
        empty: the connection's extra ``approvers``, else anybody Airflow lets update the task's HITL detail.
    :param four_eyes: the user who triggered the run may not approve it (default True; templated);
        a connection whose extra says ``"four_eyes": "required"`` ignores False.
    :param kafka_conn_id: the cluster's connection, for its change-control extras (templated).
    :param plan_task_id: task whose XCom is the plan shown (its hash is recorded with the decision).
    """

    ui_color = "#fef7e0"
    template_fields = (*ApprovalOperator.template_fields, *CHANGE_CONTROL_FIELDS)

    def __init__(self, *, approvers: list[str] | str | None = None, four_eyes: bool | str = True,
                 approval_max_age_minutes: float | str | None = None, plan_task_id: str | None = None,
                 kafka_conn_id: str | None = None, **kwargs: Any) -> None:  # Any: passed to the HITL operator
        super().__init__(**kwargs)
        self._init_change_control(approvers, four_eyes, approval_max_age_minutes, plan_task_id, kafka_conn_id)


class KafkaChangeBranchOperator(_ChangeControl, HITLBranchOperator):
    """A human decision that picks the next task (``options_mapping``: option -> task id), under change control.

    Only an approving option (``Approve``) is subject to the four-eyes rule: declining your own
    change (Reject -> rollback) is always allowed.
    """

    ui_color = "#fef7e0"
    template_fields = (*HITLBranchOperator.template_fields, *CHANGE_CONTROL_FIELDS)

    def __init__(self, *, approvers: list[str] | str | None = None, four_eyes: bool | str = True,
                 approval_max_age_minutes: float | str | None = None, plan_task_id: str | None = None,
                 kafka_conn_id: str | None = None, **kwargs: Any) -> None:  # Any: passed to the HITL operator
        super().__init__(**kwargs)
        self._init_change_control(approvers, four_eyes, approval_max_age_minutes, plan_task_id, kafka_conn_id)


class KafkaApprovalRecheckOperator(KafkaChangeApprovalOperator):
    """Right before the first change: reuse the approval only if it is fresh and the plan is unchanged.

    ``replan(context) -> plan dict`` computes the plan again from the cluster
    (the same function that built the approved plan). The earlier approval of
    ``approval_task_id`` is reused when it is younger than
    ``approval_max_age_minutes`` and the new plan has the approved hash.
    Otherwise a new approval is requested here, its body saying why (expired,
    or the plan's diff), under the same approvers and four-eyes rule; Reject
    skips the change. When the cluster already is where the plan leads,
    nothing is left to apply and the change steps are skipped.
    """

    def __init__(self, *, replan: Callable[[Context], dict[str, object]], approval_task_id: str = "approval",
                 approval_max_age_minutes: float | str | None = 60, subject: str = "Re-approval needed",
                 body: str = "", **kwargs: Any) -> None:  # Any: passed to the approval operator
        super().__init__(subject=subject, body=body, approval_max_age_minutes=approval_max_age_minutes, **kwargs)
        self.replan = replan
        self.approval_task_id = approval_task_id

    def execute(self, context: Context) -> dict[str, object]:
        ti = context["ti"]
        approved = ti.xcom_pull(task_ids=self.approval_task_id, key="decision")
        if not approved or not is_approving(approved.get("decision")):
            raise AirflowFailException(str(ApprovalMissing(
                f"No approval of this run's plan was recorded by task {self.approval_task_id}")))
        policy = self.policy()
        current = self.replan(context)
        ti.xcom_push(key="plan", value=plan_summary(current))
        reasons = []
        try:
            policy.check_fresh(approved.get("at"))
        except ApprovalExpired as exc:
            reasons.append(exc.what)
        try:
            check_plan(approved.get("plan_hash"), approved.get("plan"), current)
        except PlanChanged as exc:
            reasons.append(exc.what)
        ti.xcom_push(key="recheck", value={"reasons": reasons, "approved_hash": approved.get("plan_hash"),
                                          "current_hash": current.get("hash")})
        if not reasons:
            reused = {**approved, "reused": self.approval_task_id,
                      "rechecked_at": datetime.now(UTC).isoformat(timespec="seconds")}
            ti.xcom_push(key="decision", value=reused)
            self.log.info("Approval of %s by %s reused: plan %s unchanged and approved %s.", self.approval_task_id,
                          approved.get("by"), current.get("hash"), approved.get("at"))
            return reused
        for reason in reasons:
            self.log.warning("Not reusing the approval: %s", reason)
        if current.get("nothing_to_do"):
            raise AirflowSkipException("The cluster already is where the plan leads; nothing left to apply. "
                                       + " ".join(reasons))
        self.subject = f"Re-approval needed: {current.get('title') or self.subject}"
        # a reason quotes the plan's targets and values (names): inert text; the plan's Markdown is the provider's
        self.body = "\n".join(["**The earlier approval is not reused:**", ""] + [f"- {md_text(r)}" for r in reasons]
                              + ["", str(current.get("markdown") or "")])
        asked: dict[str, object] = super().execute(context)  # the HITL operator's answer
        return asked

    def _plan(self, context: Context) -> dict[str, Any] | None:
        return context["ti"].xcom_pull(task_ids=self.task_id, key="plan")


def change_control_params(*, max_age_minutes: float = 60) -> dict[str, Param]:
    """The Params every change DAG shares: who may approve, four eyes, approval expiry. Not the audit log: where
    the records go is the deployment's (the connection's extra ``audit_log``, ``$KIP848_AUDIT_LOG``, the artifact
    location; ``changecontrol.audit.audit_location``), never a run's."""
    return {
        "approvers": Param([], type="array", items={"type": "string", "pattern": USER_ID_PATTERN},
                           title="Approvers (Airflow user ids)",
                           description="Only these users may answer the approval (Airflow refuses anybody else); "
                                       "empty: anybody allowed to answer approvals of this DAG."),
        "four_eyes": Param(True, type="boolean", title="Four-eyes rule",
                           description="The user who triggered the run cannot approve it. Relax only on "
                                       "development clusters; the report says so."),
        "approval_max_age_minutes": Param(max_age_minutes, type="number", minimum=0, maximum=MAX_APPROVAL_AGE_MINUTES,
                                          title="Approval expires after (minutes, 0: never)"),
    }


#: Templated arguments of the approval operators, from ``change_control_params``.
APPROVAL_ARGS = {"approvers": "{{ params.approvers }}", "four_eyes": "{{ params.four_eyes }}",
                 "kafka_conn_id": "{{ params.kafka_conn_id }}", "plan_task_id": "make_plan",
                 "approval_max_age_minutes": "{{ params.get('approval_max_age_minutes') }}"}
RECHECK_ARGS = {"approvers": "{{ params.approvers }}", "four_eyes": "{{ params.four_eyes }}",
                "kafka_conn_id": "{{ params.kafka_conn_id }}",
                "approval_max_age_minutes": "{{ params.get('approval_max_age_minutes') }}"}

"""Approval gates for Kafka changes: Airflow's human-in-the-loop operators, with the decision recorded.

``KafkaChangeApprovalOperator`` is an ``ApprovalOperator`` (Approve / Reject;
Reject skips the change) and ``KafkaChangeBranchOperator`` an
``HITLBranchOperator`` (each option leads to a task, e.g. Reject -> rollback).
Both push the decision as XCom ``decision``: option, who and when, which the
run report quotes.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLBranchOperator


def _record(context: Any, result: Any) -> dict[str, Any]:
    from airflow_provider_kip848.runbook.report import approval_record

    record = approval_record(result) or {}
    context["ti"].xcom_push(key="decision", value=record)
    return record


class KafkaChangeApprovalOperator(ApprovalOperator):
    """Approve or Reject the change shown in ``body`` (Markdown: the plan with before/after)."""

    ui_color = "#fef7e0"

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        # recorded first: on Reject the parent skips downstream tasks by raising, so nothing after it runs
        record = _record(context, event if "chosen_options" in event else None)
        self.log.info("Decision: %s by %s at %s", record.get("decision"), record.get("by"), record.get("at"))
        return super().execute_complete(context, event)


class KafkaChangeBranchOperator(HITLBranchOperator):
    """A human decision that picks the next task (``options_mapping``: option -> task id)."""

    ui_color = "#fef7e0"

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        record = _record(context, event if "chosen_options" in event else None)
        self.log.info("Decision: %s by %s at %s", record.get("decision"), record.get("by"), record.get("at"))
        return super().execute_complete(context, event)

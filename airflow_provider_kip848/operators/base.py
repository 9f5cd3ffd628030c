"""What every operator of this provider shares: a connection, a backend choice, and error handling.

Bad input and refusals (a group that does not exist, a config out of the
broker's bounds, a non-empty group ...) fail the task at once with
``AirflowFailException``: retrying would only repeat them. An unreachable or
slow cluster raises the provider's retriable error, so the task's ``retries``
apply, which is safe because every operator reads the cluster state before it
changes anything.

Every change an operator applies is written to the audit trail
(``runbook/audit.py``): one JSON line per change with who triggered, who
approved (the ``decision`` XComs of ``approval_task_ids``), the plan they saw,
and the before/after values read back from the cluster.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.cli import KafkaCliHook
from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.kafka.errors import Kip848Error

BACKENDS = ("native", "cli")


class KafkaAdminBaseOperator(BaseOperator):
    """Base of the provider's operators.

    :param kafka_conn_id: a ``kafka_admin`` connection.
    :param backend: ``native`` (default) or ``cli`` (Kafka's own tools) for the actions both implement.
    :param audit_log: where the audit records of the changes go (a local ``.jsonl`` path or an object
        storage URL); default: the connection's extra ``audit_log``, else ``$KIP848_AUDIT_LOG``, else
        ``$AIRFLOW_HOME/kip848/audit.jsonl``.
    :param approval_task_ids: tasks whose ``decision`` XCom authorised the change (quoted in the audit).
    """

    template_fields: tuple[str, ...] = ("kafka_conn_id", "audit_log")
    ui_color = "#e8f0fe"

    def __init__(self, *, kafka_conn_id: str = DEFAULT_CONN_ID, backend: str = "native",
                 audit_log: str | None = None,
                 approval_task_ids: Sequence[str] = ("approval", "recheck_approval"), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        self.kafka_conn_id = kafka_conn_id
        self.backend = backend
        self.audit_log = audit_log
        self.approval_task_ids = tuple(approval_task_ids)

    @cached_property
    def hook(self) -> KafkaGroupAdminHook | KafkaCliHook:
        return KafkaCliHook(self.kafka_conn_id) if self.backend == "cli" else KafkaGroupAdminHook(self.kafka_conn_id)

    @cached_property
    def native_hook(self) -> KafkaGroupAdminHook:
        """Actions only the native backend has (member removal, snapshots, preflight facts)."""
        return self.hook if isinstance(self.hook, KafkaGroupAdminHook) else KafkaGroupAdminHook(self.kafka_conn_id)

    def execute(self, context: Any) -> Any:
        try:
            result = self.run(context)
            self._audit(context, result)
            return result
        except Kip848Error as exc:
            if exc.retriable:
                raise
            raise AirflowFailException(str(exc)) from exc
        finally:
            for name in ("hook", "native_hook"):
                if name in self.__dict__:
                    self.__dict__.pop(name).close()

    def run(self, context: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- audit ---------------------------------------------------------------

    def audit_changes(self, context: Any, result: Any) -> list[tuple[str, str, Any, Any]]:
        """``(kind, target, before, after)`` of each change ``run`` applied (read back); none by default."""
        return []

    def _audit(self, context: Any, result: Any) -> None:
        changes = self.audit_changes(context, result)
        if changes:
            record_changes(self, context, changes, hook=self.native_hook, audit_log=self.audit_log,
                           approval_task_ids=self.approval_task_ids)


def audit_location(hook: KafkaGroupAdminHook, audit_log: str | None) -> str:
    """Where audit records go: the task's ``audit_log``, the connection's extra ``audit_log``,
    ``$KIP848_AUDIT_LOG``, else ``$AIRFLOW_HOME/kip848/audit.jsonl``."""
    if audit_log and str(audit_log) not in ("None", ""):
        return str(audit_log)
    from airflow_provider_kip848.hooks.connection import extra_field

    extra = extra_field(hook.connection.extra_dejson or {}, "audit_log")
    if extra:
        return str(extra)
    if os.environ.get("KIP848_AUDIT_LOG"):
        return os.environ["KIP848_AUDIT_LOG"]
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return os.path.join(home, "kip848", "audit.jsonl")


def record_changes(task: Any, context: Any, changes: list[tuple[str, str, Any, Any]], *,
                   hook: KafkaGroupAdminHook, audit_log: str | None = None,
                   approval_task_ids: Sequence[str] = ("approval", "recheck_approval")) -> list[dict[str, Any]]:
    """Append one audit record per change (``(kind, target, before, after)``) and push them as XCom ``audit``."""
    from airflow_provider_kip848.runbook import audit
    from airflow_provider_kip848.runbook.changecontrol import is_approving

    ti = context["ti"]
    dag_run = context.get("dag_run")
    decisions = [(t, d) for t in approval_task_ids if (d := ti.xcom_pull(task_ids=t, key="decision"))]
    approvals = [{"task_id": t, **{k: d.get(k) for k in ("decision", "by", "by_id", "at", "plan_hash", "reused")}}
                 for t, d in decisions]
    authorising = next((d for _, d in reversed(decisions) if is_approving(d.get("decision"))), {})
    try:
        cluster_id = hook.describe_cluster().cluster_id
    except Kip848Error:
        cluster_id = None
    records = [audit.AuditRecord(
        kind=kind, target=target, before=before, after=after, cluster_id=cluster_id,
        triggered_by=getattr(dag_run, "triggering_user_name", None), approvals=approvals,
        plan_hash=authorising.get("plan_hash"), plan=authorising.get("plan"),
        change_control=authorising.get("change_control"),
        dag_id=getattr(ti, "dag_id", None), run_id=getattr(ti, "run_id", None), task_id=task.task_id,
        try_number=getattr(ti, "try_number", None), map_index=getattr(ti, "map_index", None),
    ) for kind, target, before, after in changes]
    location = audit_location(hook, audit_log)
    written = audit.append(location, records)
    task.log.info("Audit: %d change record(s) appended to %s", len(records), location)
    pushed = [{**r.to_dict(), "written_to": w} for r, w in zip(records, written)]
    ti.xcom_push(key="audit", value=pushed)
    return pushed


def as_bool(value: Any) -> bool:
    """Templated booleans arrive as strings ("True", "false")."""
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "1", "yes")

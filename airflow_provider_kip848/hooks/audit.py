"""A task's audit trail through its ``kafka_admin`` connection: where it goes, and a retry completing the last try's.

Where the records go is the deployment's (:func:`~airflow_provider_kip848.changecontrol.audit.audit_location`:
the task's ``audit_log`` argument, the connection's extra ``audit_log``, ``$KIP848_AUDIT_LOG``, the artifact
location). Every path that changes a cluster records through the
:class:`~airflow_provider_kip848.changecontrol.audit_trail.TaskAudit` made here, and on a retry calls
:func:`complete_earlier_tries` before it plans anything: an intent the killed try left alone is completed from
what the cluster shows (``found in place`` or ``not applied``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_kip848.changecontrol.artifacts import artifact_root
from airflow_provider_kip848.changecontrol.audit import audit_location
from airflow_provider_kip848.changecontrol.audit_trail import TaskAudit
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.rules.conditions import TaskLog

APPROVALS = ("approval", "recheck_approval")


def trail_location(hook: KafkaGroupAdminHook, audit_log: str | None) -> str:
    """Where the audit records of changes through ``hook``'s connection go."""
    return audit_location(None if audit_log in (None, "", "None") else audit_log, hook.extra("audit_log"),
                          artifact_root(hook.kafka_conn_id))


def task_audit(context: Mapping[str, Any], task_id: str, hook: KafkaGroupAdminHook,  # Any: a task's Context
               audit_log: str | None, *, approval_task_ids: Sequence[str] = APPROVALS,
               log: TaskLog | None = None) -> TaskAudit:
    """The audit of this try of ``task_id`` (changes through ``hook``'s connection)."""
    return TaskAudit(context, task_id, location=trail_location(hook, audit_log), admin=hook,
                     approval_task_ids=approval_task_ids, log=log)


def is_retry(context: Mapping[str, Any]) -> bool:  # Any: a task's Context
    """Whether this try may follow one that was killed: any try but the first (a try number unknown: maybe)."""
    number = getattr(context["ti"], "try_number", None)
    return not isinstance(number, int) or number > 1


def complete_earlier_tries(context: Mapping[str, Any], task_id: str, hook: KafkaGroupAdminHook,  # Any: Context
                           audit_log: str | None, *, log: TaskLog | None = None) -> TaskAudit | None:
    """On a retry: the intents earlier tries of ``task_id`` left without an outcome, completed (see
    :meth:`~airflow_provider_kip848.changecontrol.audit_trail.TaskAudit.complete_earlier`); None on a first try
    (nothing is read)."""
    if not is_retry(context):
        return None
    trail = task_audit(context, task_id, hook, audit_log, log=log)
    trail.complete_earlier()
    trail.push()
    return trail


__all__ = ["APPROVALS", "complete_earlier_tries", "is_retry", "task_audit", "trail_location"]

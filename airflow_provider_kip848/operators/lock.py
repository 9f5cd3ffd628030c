"""One change at a time per group: the run's change lock (see :mod:`airflow_provider_kip848.kafka.lock`).

``KafkaChangeLockOperator`` takes the lock at the start of a change DAG and
fails at once, naming the holder (DAG, run, who triggered it, since when),
when another run holds it. A retry of the same run re-enters its own lock.
A lock whose holder run has ended (success/failed, as Airflow reports it)
without releasing it is stale and taken over. ``release_change_lock`` frees
it; the DAGs call it from their report task (``trigger_rule=all_done``), so
the lock is released however the run ended, and hand its answer to the report.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow.sdk import Context

from airflow_provider_kip848.engine.lock import ENDED_STATES, holder_run_ended, lock_holder, run_owner
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.arguments import parse_flag
from airflow_provider_kip848.kafka.errors import ResourceLocked
from airflow_provider_kip848.kafka.lock import ChangeLock, LockHolder
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_flag_arg
from airflow_provider_kip848.operators.run_conf import check_run_conf


class KafkaChangeLockOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Take the change lock of ``resource`` (e.g. ``group:<group id>``) for this run, or fail saying who holds it.

    :param resource: what the run changes; one lock per resource per cluster (templated).
    :param dry_run: a dry run changes nothing and takes no lock (templated).
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "resource", "dry_run_flag")
    ui_color = "#f1e4fb"
    supported_backends = ("native",)

    def __init__(self, *, resource: str, dry_run: bool | str = False,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        self.resource = resource
        check_flag_arg(dry_run, "dry_run")
        self.dry_run_flag = dry_run

    def run(self, context: Context) -> dict[str, object]:
        check_run_conf(context)  # before the lock: a conf key no Param declares (a typo of dry_run) fails here
        if parse_flag(self.dry_run_flag, "dry_run"):
            self.log.info("Dry run: no lock taken on %s.", self.resource)
            return {"held": False, "resource": self.resource, "reason": "dry run"}
        ti = context["ti"]
        lock = ChangeLock(self.native_hook.get_conn(), str(self.resource))
        try:
            result = lock.acquire(lock_holder(context), is_stale=lambda current: self._ended(ti, current))
        except ResourceLocked as exc:  # for the report: refused, and by whom (every DAG ends 'locked', failed)
            ti.xcom_push(key="refused", value={"reason": str(exc), "holder": exc.holder})
            self.log.error("Change lock on %s refused: held by %s. This run changes nothing; its report "
                           "ends 'locked'.", self.resource, _holder_text(exc.holder))
            raise
        if result.took_over_from:
            self.log.warning("Took over the lock of %s from %s: that run has ended without releasing it.",
                             self.resource, result.took_over_from.describe())
        self.log.info("Change lock on %s held (%s): topic %s.", self.resource,
                      "re-entered" if result.reentered else "acquired", result.topic)
        return {**result.to_dict(), "kafka_conn_id": self.kafka_conn_id}

    def _ended(self, ti: Any, holder: LockHolder) -> bool:
        return holder_run_ended(ti, holder, self.log)


def _holder_text(holder: dict[str, Any] | None) -> str:
    """The holder as the log and the report name it: DAG, run, task, who triggered it, host, since when."""
    return LockHolder.from_dict(holder).describe() if holder else "a holder whose record cannot be read"


def release_change_lock(context: Mapping[str, Any],  # Any: a task's Context, or a @task's keyword context
                        lock_task_id: str = "lock") -> dict[str, object] | None:
    """Release the lock ``lock_task_id`` took for this run (no-op when it took none). Returns what
    happened, for the report; never raises (a lock left behind is taken over once this run has ended)."""
    log = logging.getLogger("airflow.task")
    taken = context["ti"].xcom_pull(task_ids=lock_task_id)
    refused = context["ti"].xcom_pull(task_ids=lock_task_id, key="refused")
    if refused:
        return {"held": False, "refused": refused["reason"], "holder": refused.get("holder"),
                "held_by": _holder_text(refused.get("holder"))}
    if not taken or not taken.get("held"):
        return taken
    try:
        with KafkaGroupAdminHook(taken["kafka_conn_id"]) as hook:
            released = ChangeLock(hook.get_conn(), taken["resource"]).release(run_owner(context))
    except Exception as exc:  # noqa: BLE001
        log.warning("Could not release the change lock on %s (%s); the next run takes it over.", taken["resource"], exc)
        return {**taken, "released": False, "release_error": str(exc)}
    log.info("Change lock on %s released.", taken["resource"])
    return {**taken, "released": released}


__all__ = ["ENDED_STATES", "KafkaChangeLockOperator", "holder_run_ended", "release_change_lock", "run_owner"]

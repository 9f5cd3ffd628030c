"""The change lock as a run holds it: who the owner is, and when a holder's run has ended.

Used by the lock task of every change DAG
(:class:`~airflow_provider_kip848.operators.lock.KafkaChangeLockOperator`) and by the fleet's application
moves, which take their groups' locks themselves (:mod:`airflow_provider_kip848.engine.move`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk.types import RuntimeTaskInstanceProtocol

from airflow_provider_kip848.kafka.lock import LockHolder
from airflow_provider_kip848.kafka.rules.conditions import TaskLog

#: Airflow run states in which a holder run can no longer be changing anything.
ENDED_STATES = ("success", "failed")


def run_owner(context: Mapping[str, Any]) -> str:  # Any: a task's Context (or the Airflow layers' dict of it)
    """The lock owner of the run a task belongs to: ``<dag_id>/<run_id>`` (every task of a run re-enters)."""
    ti = context["ti"]
    return f"{ti.dag_id}/{ti.run_id}"


def lock_holder(context: Mapping[str, Any]) -> LockHolder:  # Any: a task's Context (or the Airflow layers' dict of it)
    """The holder record of this run (shown to whoever is refused: DAG, run, the task that took it, who
    triggered the run)."""
    ti = context["ti"]
    return LockHolder(owner=run_owner(context), dag_id=ti.dag_id, run_id=ti.run_id,
                      triggered_by=getattr(context.get("dag_run"), "triggering_user_name", None),
                      task_id=getattr(ti, "task_id", None))


def holder_run_ended(ti: RuntimeTaskInstanceProtocol, holder: LockHolder, log: TaskLog) -> bool:
    """A holder is stale when Airflow says its run has ended; unknown runs (another Airflow) are not."""
    if not (holder.dag_id and holder.run_id):
        return False
    try:
        state = ti.get_dagrun_state(holder.dag_id, holder.run_id)
    except Exception as exc:  # noqa: BLE001 - a run this Airflow does not know: leave its lock alone
        log.info("Could not read the state of %s/%s (%s): its lock stays.", holder.dag_id, holder.run_id, exc)
        return False
    return str(getattr(state, "value", state)) in ENDED_STATES


__all__ = ["ENDED_STATES", "holder_run_ended", "lock_holder", "run_owner"]

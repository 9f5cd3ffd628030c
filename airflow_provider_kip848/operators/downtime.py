"""The downtime a migration run caused, measured for its report from the group's own records.

A report task calls :func:`measured_downtime` at the end of a run that changed
something: it reads the group's records in ``__consumer_offsets`` since the run
started (exact commit stalls, rebalances, the first member leaving; see
:meth:`~airflow_provider_kip848.hooks.admin.KafkaGroupAdminHook.group_downtime`).
It works wherever the run's tasks run (``dag.test()`` included), holds no slot
while the change runs, and fails soft: the report then says why the downtime is
not measured, it is never reported as 0.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_kip848.changecontrol.report import records_downtime
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import Kip848Error

#: outcomes of a run in which nothing was stopped or restarted: no downtime to measure
NOTHING_RAN = ("nothing_to_do", "dry_run", "rejected", "rejected_after_recheck", "nothing_applied", "refused",
               "locked")


def measured_downtime(context: dict[str, Any], conn_id: str, group_id: str, outcome: str, *,
                      members_before: int | None = None,
                      output_gap: dict[str, Any] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(the report's downtime section, its chart) for this run; (None, None) when nothing ran.
    ``members_before``: the group's members when the run planned the change (its plan's facts)."""
    if outcome in NOTHING_RAN:
        return None, None
    started = getattr(context.get("dag_run"), "start_date", None)
    if started is None:
        return {"error": "the run's start time is unknown"}, None
    try:
        with KafkaGroupAdminHook(conn_id) as hook:
            downtime = hook.group_downtime(group_id, started.timestamp(), members_before=members_before)
    except Kip848Error as exc:
        return {"error": str(exc)}, None
    return records_downtime(downtime, group_id, output_gap=output_gap)

"""The downtime a migration run caused, measured for its report from the group's own records.

A report task calls :func:`measured_downtime` at the end of a run that changed
something: it reads the group's records in ``__consumer_offsets`` since the run
started (states, members by protocol, exact commit stalls, rebalances, the
first member leaving, Stable on the target protocol; see
:meth:`~airflow_provider_kip848.hooks.admin.KafkaGroupAdminHook.group_downtime`)
and, when the validation job read the output topic, its ``output_timing``
(the processing gap from the output records). It works wherever the run's
tasks run (``dag.test()`` included), holds no slot while the change runs, and
fails soft: the report then says why the downtime is not measured, it is never
reported as 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_kip848.changecontrol.downtime import downtime_section
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import Kip848Error

#: outcomes of a run in which nothing was stopped or restarted: no downtime to measure
NOTHING_RAN = ("nothing_to_do", "dry_run", "rejected", "rejected_after_recheck", "nothing_applied", "refused",
               "locked")


def classic_before(facts: dict[str, Any] | None) -> tuple[int | None, str | None]:  # Any: a plan's facts, JSON
    """(members, state) of a classic group from a plan's ``facts`` (``group.type``/``group.state`` and
    ``members``, a count or a list); (None, None) for another type or no facts: only a classic group's state
    before the window is needed (its last generation may predate it), and nothing is assumed."""
    group = (facts or {}).get("group") or {}
    if group.get("type") != "classic":
        return None, None
    members = (facts or {}).get("members")
    count = members if isinstance(members, int) else len(members) if isinstance(members, list) else None
    return count, group.get("state")


def measured_downtime(context: Mapping[str, Any], conn_id: str, group_id: str, outcome: str, *,
                      target: str | None = None, facts: dict[str, Any] | None = None,
                      validation_task: str | None = "validate",
                      ) -> dict[str, Any] | None:  # Any: the run's context and a plan's facts in, a JSON section out
    """The report's downtime section for this run; None when nothing ran. ``target``: the group type the run
    moves to; ``facts``: the plan's facts (the group when the run planned the change); ``validation_task``:
    the task whose result may hold the output records' timing."""
    if outcome in NOTHING_RAN:
        return None
    members_before, state_before = classic_before(facts)
    started = getattr(context.get("dag_run"), "start_date", None)
    if started is None:
        return {"error": "the run's start time is unknown"}
    timing = None
    if validation_task:
        timing = (context["ti"].xcom_pull(task_ids=validation_task) or {}).get("output_timing")
    try:
        with KafkaGroupAdminHook(conn_id) as hook:
            downtime = hook.group_downtime(group_id, started.timestamp(), members_before=members_before,
                                           state_before=state_before, target=target)
    except Kip848Error as exc:
        return {"error": str(exc)}
    return downtime_section(downtime, group_id=group_id, target=target, output_timing=timing)

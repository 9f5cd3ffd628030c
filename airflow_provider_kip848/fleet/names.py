"""The fleet migration DAG's task ids and XCom keys: written by the DAG and its operator, read by the UI plugin.

The fleet view reads a run's task instances and XComs straight from the
metadata database, by task id and key. A name written in one place and read
in another is a contract; it lives here once, and the DAG, the per-application
operator and the plugin all import it (a renamed task would otherwise show as
"not created" in the view without any test noticing).
"""

from __future__ import annotations

#: the fleet migration DAG
FLEET_DAG_ID = "kip848_fleet_migration"

# -- tasks outside the waves
WINDOW_GUARD_TASK, LOCK_TASK, PLAN_TASK, REPORT_TASK = "window_guard", "lock", "plan", "report"

# -- the tasks of wave k (task group ``wave_k``)
OPEN, APPROVAL, RECHECK, MIGRATE_TASK, TO_VALIDATE, VALIDATE, JUDGE, TO_ROLL_BACK, ROLLBACK_TASK = (
    "open", "approval", "recheck", "migrate", "to_validate", "validate", "judge", "to_roll_back", "rollback")
#: the wave tasks the fleet view shows, in order
WAVE_TASKS = (OPEN, APPROVAL, RECHECK, MIGRATE_TASK, TO_VALIDATE, VALIDATE, JUDGE, TO_ROLL_BACK, ROLLBACK_TASK)
#: the wave's validation (the fleet view's "validating" while one of them runs)
VALIDATION_TASKS = (TO_VALIDATE, VALIDATE)

# -- XCom keys
#: every mapped move's :class:`~airflow_provider_kip848.fleet.results.ApplicationResult` (success or failure)
RESULT_KEY = "fleet_result"
#: where each mapped move stands (:class:`~airflow_provider_kip848.fleet.results.MoveProgress`), pushed after
#: every recorded step: the fleet view's per-group step while the move runs
PROGRESS_KEY = "fleet_progress"
RETURN_KEY = "return_value"
#: the approval's answer (approval task)
DECISION_KEY = "decision"
#: the applications the judge sends back (judge task)
ROLLBACK_UNITS_KEY = "rollback_units"
#: the wave validation's verdicts per group (validate task)
WAVE_VERDICTS_KEY = "wave_verdicts"
#: (key, task id suffix) of the XComs the view reads besides each mapped task instance's ``fleet_result``
WAVE_XCOMS = ((RETURN_KEY, f".{JUDGE}"), (ROLLBACK_UNITS_KEY, f".{JUDGE}"), (RETURN_KEY, f".{RECHECK}"),
              (DECISION_KEY, f".{APPROVAL}"))


def wave_group(number: int) -> str:
    """The task group of wave ``number``."""
    return f"wave_{number}"


def wave_task(number: int, task: str) -> str:
    """The full task id of ``task`` in wave ``number`` (``wave_2.migrate``)."""
    return f"{wave_group(number)}.{task}"


__all__ = [
    "APPROVAL", "DECISION_KEY", "FLEET_DAG_ID", "JUDGE", "LOCK_TASK", "MIGRATE_TASK", "OPEN", "PLAN_TASK",
    "PROGRESS_KEY", "RECHECK", "REPORT_TASK", "RESULT_KEY", "RETURN_KEY", "ROLLBACK_TASK", "ROLLBACK_UNITS_KEY",
    "TO_ROLL_BACK", "TO_VALIDATE", "VALIDATE", "VALIDATION_TASKS", "WAVE_TASKS", "WAVE_VERDICTS_KEY", "WAVE_XCOMS",
    "WINDOW_GUARD_TASK", "wave_group", "wave_task",
]

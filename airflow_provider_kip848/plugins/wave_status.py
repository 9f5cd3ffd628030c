"""A wave of a fleet run: its facts (task instances, records) and its status, as the fleet runs page shows it.

Pure, no I/O: :func:`wave_facts` picks one wave slot's task instances and XComs out of a run's facts
(:mod:`.run_facts`); :func:`wave_status` derives the wave's status (:data:`WAVE_STATUSES`) from them: the judge's
record when there is one, else the state of its tasks (waiting for approval, running, validating while its
validation runs, stopped, not reached ...). What cannot be read is ``unknown`` with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_kip848.changecontrol.approvals import APPROVING_OPTIONS
from airflow_provider_kip848.fleet.names import (
    APPROVAL,
    DECISION_KEY,
    JUDGE,
    MIGRATE_TASK,
    OPEN,
    RECHECK,
    RESULT_KEY,
    RETURN_KEY,
    ROLLBACK_TASK,
    ROLLBACK_UNITS_KEY,
    VALIDATION_TASKS,
    WAVE_TASKS,
    wave_group,
    wave_task,
)
from airflow_provider_kip848.fleet.results import ROLLBACK, ApplicationResult, WaveRecord
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.plugins.run_facts import RunFacts, TaskFact

WAVE_STATUSES = {
    "not_reached": "not reached",
    "waiting_for_approval": "waiting for approval",
    "running": "running",
    "validating": "validating",
    "done_ok": "done ok",
    "done_with_failures": "done with failures",
    "stopped_by_budget": "stopped by budget",
    "rejected": "rejected",
    "stopped": "stopped",
    "unknown": "unknown",
}
#: task instance states in which a task is on its way (not finished)
ACTIVE_STATES = frozenset({"scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule",
                           "restarting", "awaiting_input"})
FAILED_STATES = frozenset({"failed", "upstream_failed"})
#: DAG run states in which a run is on its way (the pages refresh themselves while one is)
ACTIVE_RUN_STATES = frozenset({"queued", "running"})
NOT_RUN_STATES = frozenset({"skipped", "removed", "upstream_failed"})
#: what the page says for a task instance with no state, for one that does not exist, and for an application's
#: mapped task instance while its task is not expanded yet (only its map index -1 exists)
NO_STATUS, NOT_CREATED, NOT_MAPPED, UNKNOWN = "no status", "not created", "not mapped yet", "unknown"
HASH_SHORT = 12

def read_result(value: object, kind: str) -> tuple[ApplicationResult | None, str | None]:
    """(the result, None) or (None, why it could not be read); (None, None) when there is none."""
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        return None, f"not an object: {str(value)[:200]!r}"
    try:
        result = ApplicationResult.from_dict(value)
    except (InvalidArgument, KeyError, TypeError, ValueError) as exc:
        return None, str(exc)
    if result.kind != kind:
        return None, f"a {result.kind} result where a {kind} result belongs"
    return result, None



@dataclass
class WaveFacts:
    """The task instances and records of one wave slot of a run."""

    number: int
    tis: dict[str, list[TaskFact]]
    record: WaveRecord | None
    record_error: str | None
    results: dict[int, ApplicationResult | None]
    result_errors: dict[int, str]
    rollbacks: dict[int, ApplicationResult | None]
    rollback_errors: dict[int, str]
    #: the applications the recheck let through (what ``migrate`` maps over), the judge sent back (what
    #: ``rollback`` maps over), in order; None: not recorded
    moved: list[str] | None = None
    sent_back: list[str] | None = None
    #: the approval's answer: decision, by, at, refused (None: not answered)
    decision: Mapping[str, Any] | None = None  # Any: the approval's answer as Airflow stores it (JSON)

    def one(self, task: str) -> TaskFact | None:
        found = self.tis.get(task) or []
        return found[0] if found else None

    def states(self) -> list[str | None]:
        return [t.state for tis in self.tis.values() for t in tis]


def wave_facts(run: RunFacts, number: int) -> WaveFacts:
    prefix = wave_group(number) + "."
    tis = {task: run.instances(prefix + task) for task in WAVE_TASKS}
    record, record_error = None, None
    raw = run.xcoms.get((prefix + JUDGE, -1, RETURN_KEY))
    if raw is not None:
        try:
            if not isinstance(raw, Mapping):
                raise InvalidArgument(f"not an object: {str(raw)[:200]!r}")
            record = WaveRecord.from_dict(raw)
        except (InvalidArgument, KeyError, TypeError, ValueError) as exc:
            record_error = str(exc)
    found: dict[str, tuple[dict[int, ApplicationResult | None], dict[int, str]]] = {}
    for task, kind in ((MIGRATE_TASK, "migrate"), (ROLLBACK_TASK, ROLLBACK)):
        ok: dict[int, ApplicationResult | None] = {}
        errors: dict[int, str] = {}
        for ti in tis[task]:
            result, error = read_result(run.xcoms.get((prefix + task, ti.map_index, RESULT_KEY)), kind)
            ok[ti.map_index] = result
            if error:
                errors[ti.map_index] = error
        found[task] = (ok, errors)
    decision = run.xcoms.get((prefix + APPROVAL, -1, DECISION_KEY))
    return WaveFacts(number, tis, record, record_error, *found[MIGRATE_TASK], *found[ROLLBACK_TASK],
                      moved=_apps_of(run.xcoms.get((prefix + RECHECK, -1, RETURN_KEY))),
                      sent_back=_apps_of(run.xcoms.get((prefix + JUDGE, -1, ROLLBACK_UNITS_KEY))),
                      decision=decision if isinstance(decision, Mapping) else None)


def _apps_of(units: Any) -> list[str] | None:
    """The application names of a list of units (``[{"app": ...}, ...]``); None if it is not one."""
    if not isinstance(units, list) or not all(isinstance(u, Mapping) and isinstance(u.get("app"), str)
                                              for u in units):
        return None
    return [u["app"] for u in units]


def _verdict_status(record: WaveRecord, recheck: TaskFact | None) -> tuple[str, str]:
    verdict = record.verdict
    if verdict is None:
        return "not_reached", "the judge recorded that the wave did not run"
    if not verdict.proceed and recheck is not None and recheck.state in FAILED_STATES | NOT_RUN_STATES:
        return "stopped", verdict.reason  # the recheck refused the wave: nothing moved, no budget spent
    if not verdict.proceed:
        return "stopped_by_budget", verdict.reason
    if verdict.failed_apps or any(not r.ok for r in record.results):
        return "done_with_failures", verdict.reason
    return "done_ok", verdict.reason


def _active(wave: WaveFacts) -> list[str]:
    return sorted({f"{task} {t.state}" for task, tis in wave.tis.items() for t in tis if t.state in ACTIVE_STATES})


def _answer(decision: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """A wave's status from its approval's answer when that stopped it (refused, or not approving)."""
    if decision is None:
        return None
    who = f" by {decision.get('by') or 'unknown'}" + (f" at {decision['at']}" if decision.get("at") else "")
    if decision.get("refused"):
        return "stopped", f"the answer{who} was refused: {decision['refused']}"
    if decision.get("decision") is not None and decision["decision"] not in APPROVING_OPTIONS:
        return "rejected", f"{decision['decision']}{who}"
    return None


def _running(wave: WaveFacts, active: list[str]) -> tuple[str, str]:
    """``validating`` while the wave's validation runs (its moves done), else ``running``."""
    validating = [f"{wave_task(wave.number, task)} {t.state}" for task in VALIDATION_TASKS for t in wave.tis[task]
                  if t.state in ACTIVE_STATES]
    if validating and not any(t.state in ACTIVE_STATES for t in wave.tis[MIGRATE_TASK]):
        return "validating", ", ".join(validating)
    return "running", ", ".join(active)


def wave_status(wave: WaveFacts, stopped_before: str | None = None) -> tuple[str, str]:
    """(status of :data:`WAVE_STATUSES`, why) of a wave, from its task instances and the judge's record.

    ``stopped_before``: why an earlier wave stopped the run (the reason of a wave that never started)."""
    states = wave.states()
    if not states:
        return "not_reached", (f"the run has no task of wave_{wave.number}: beyond its wave slots, a later run "
                               "plans what is left")
    if wave.record is not None:
        status, reason = _verdict_status(wave.record, wave.one(RECHECK))
        if any(t.state in ACTIVE_STATES for t in wave.tis[ROLLBACK_TASK]):
            reason += " (rolling back)"
        return status, reason
    if wave.record_error is not None:
        return "unknown", f"the judge's record could not be read: {wave.record_error}"
    opener = wave.one(OPEN)
    approval = wave.one(APPROVAL)
    if opener is not None and opener.state in NOT_RUN_STATES:
        return "not_reached", stopped_before or f"{wave_task(wave.number, OPEN)}: {opener.state}"
    if approval is not None and approval.state in ("awaiting_input", "deferred"):
        return "waiting_for_approval", f"{wave_task(wave.number, APPROVAL)}: {approval.state}"
    if answered := _answer(wave.decision):
        return answered
    if active := _active(wave):
        return _running(wave, active)
    judge = wave.one(JUDGE)
    if judge is not None and judge.state == "success":
        return "unknown", "the judge succeeded but its record is not in XCom"
    after_approval = wave.tis[RECHECK] + wave.tis[MIGRATE_TASK]
    if approval is not None and approval.state == "success" and after_approval \
            and all(t.state == "skipped" for t in after_approval):
        return "rejected", "the approval was rejected: the wave's tasks were skipped"
    failed = sorted({f"{task} {t.state}" for task, tis in wave.tis.items() for t in tis if t.state in FAILED_STATES})
    if failed:
        return "stopped", ", ".join(failed)
    if all(s is None for s in states):
        return "not_reached", stopped_before or "not started yet"
    if judge is not None and judge.state is None and "success" in states:
        # between two tasks: the last one ended, the scheduler has not queued the next one yet
        waiting = sorted({task for task, tis in wave.tis.items() for t in tis if t.state is None})
        return "running", "next: " + ", ".join(wave_task(wave.number, t) for t in waiting)
    return "unknown", ", ".join(sorted({f"{task} {t.state or NO_STATUS}" for task, tis in wave.tis.items()
                                        for t in tis}))


__all__ = ["ACTIVE_RUN_STATES", "ACTIVE_STATES", "FAILED_STATES", "HASH_SHORT", "NOT_CREATED", "NOT_MAPPED",
           "NOT_RUN_STATES", "NO_STATUS", "UNKNOWN", "WAVE_STATUSES", "WaveFacts", "read_result",
           "wave_facts", "wave_status"]

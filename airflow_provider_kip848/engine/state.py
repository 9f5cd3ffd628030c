"""A migration's steps and the typed state of one application's move through them.

The steps of a migration exist once (:class:`Step`), in the order each path
takes them (:data:`PATHS`): the offline path of the Kafka docs' runbook
(snapshot, stop, wait Empty, restore, start on the new protocol, wait migrated,
wait for the lag, compare), the online path (a rolling restart in place of
stop/start) and the way back. :class:`MoveState` is where one application's
move stands: the next step, what each step did (:class:`StepRecord`), and the
facts later steps act on (the platform's word that every instance is gone,
the instances right after the start, each group's wait memory). It is JSON
both ways, strictly, because it travels with a deferred trigger and is
recorded on durable storage after every step: a task lost by an executor or a
worker picks the move up where it stands instead of starting it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from airflow_provider_kip848.fleet.results import MIGRATE, ROLLBACK, MoveProgress, StepRecord
from airflow_provider_kip848.kafka.errors import InvalidArgument


class Step(StrEnum):
    """One step of a migration, named as the runbooks and the fleet report name it."""

    LOCK = "lock"
    SNAPSHOT = "snapshot"
    STOP = "stop"
    ROLL = "roll"
    WAIT_EMPTY = "wait_empty"
    RESTORE = "restore"
    START = "start"
    START_BACK = "start_back"
    WAIT_MIGRATED = "wait_migrated"
    WAIT_LAG = "wait_lag"
    WAIT_BACK = "wait_back"
    COMPARE = "compare"


class MovePath(StrEnum):
    """How an application moves: ``online`` (a rolling restart, every group allows the online upgrade) or
    ``offline`` (stop, Empty, start on the other protocol)."""

    ONLINE = "online"
    OFFLINE = "offline"


#: the steps of each (kind, path), in order
PATHS: dict[tuple[str, MovePath], tuple[Step, ...]] = {
    (MIGRATE, MovePath.OFFLINE): (Step.LOCK, Step.SNAPSHOT, Step.STOP, Step.WAIT_EMPTY, Step.RESTORE, Step.START,
                                  Step.WAIT_MIGRATED, Step.WAIT_LAG, Step.COMPARE),
    (MIGRATE, MovePath.ONLINE): (Step.LOCK, Step.SNAPSHOT, Step.ROLL, Step.WAIT_MIGRATED, Step.WAIT_LAG,
                                 Step.COMPARE),
    # the way back always stops the application: one that failed half-way is brought to a known state
    (ROLLBACK, MovePath.OFFLINE): (Step.LOCK, Step.STOP, Step.WAIT_EMPTY, Step.RESTORE, Step.START_BACK,
                                   Step.WAIT_BACK, Step.COMPARE),
    (ROLLBACK, MovePath.ONLINE): (Step.LOCK, Step.STOP, Step.WAIT_EMPTY, Step.RESTORE, Step.START_BACK,
                                  Step.WAIT_BACK, Step.COMPARE),
}
#: the steps that wait for the application's groups (in the triggerer; consecutive ones wait together)
WAITS = frozenset({Step.WAIT_EMPTY, Step.WAIT_MIGRATED, Step.WAIT_LAG, Step.WAIT_BACK})
#: the steps after which the application is no longer as it was (a failure from there on needs the way back)
CHANGING_STEPS = frozenset({Step.STOP, Step.ROLL, Step.START, Step.START_BACK})
#: the waits whose end means the application is back on a protocol (the end of the processing gap)
ARRIVALS = frozenset({Step.WAIT_MIGRATED, Step.WAIT_BACK})


def touched(steps: Iterable[StepRecord]) -> bool:
    """Whether a step that changes the application (stop, roll, start) ran: a move that failed after one needs
    the way back; one that failed before (e.g. its lock refused) left the application as it was."""
    return any(s.step in CHANGING_STEPS for s in steps)


def path_of(kind: str, path: str) -> tuple[Step, ...]:
    """The steps of a move of ``kind`` (migrate, rollback) on ``path`` (online, offline)."""
    try:
        return PATHS[(kind, MovePath(path))]
    except (KeyError, ValueError):
        raise InvalidArgument(f"no migration path for kind {kind!r} and path {path!r}",
                              remedy="kind is migrate or rollback, path online or offline.") from None


def wait_stage(steps: tuple[Step, ...], position: int) -> tuple[Step, ...]:
    """The consecutive waits starting at ``position`` (one deferral follows them all): e.g. wait_migrated
    and wait_lag after a start; empty when the step at ``position`` is an action."""
    out: list[Step] = []
    for step in steps[position:]:
        if step not in WAITS:
            break
        out.append(step)
    return tuple(out)


def _float(data: Mapping[str, Any], key: str, *, optional: bool = True) -> float | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"move state: {key!r} must be a number, got {value!r}")
    return float(value)


@dataclass
class MoveState:
    """Where one application's move stands.

    ``position``: index of the next step in :func:`path_of` ``(kind, path)``. ``steps``: what each step did
    (a wait: one record per group). ``gone``: the platform's answer at the stop (True: every instance
    confirmed gone; None: it cannot tell). ``baseline``: the platform's status right after the stop, the start or
    the roll, the latest of them (what the stage's platform watch compares with: an instance running again
    during Empty; a crash or restart during the arrival stages). ``liveness``: each group's liveness window for a
    protocol (``group:protocol`` -> s), read once in a worker. ``waits``: each group's wait memory
    (:class:`~airflow_provider_kip848.kafka.rules.conditions.WaitState` as JSON) in the current wait stage.
    ``wait_started``: when the current stage began. ``removed``: members forced out. ``attempts``: how many
    times a task process took the move up (more than 1: it was resumed from its record). ``deferrals``: how many
    times the move deferred to the triggerer (each costs a task round trip when it resumes).
    ``result``: the :class:`~airflow_provider_kip848.fleet.results.ApplicationResult` once finished. ``before``:
    the platform's status right before the stop (a member an instance left behind is paired with it once the
    platform no longer lists that instance: a deleted pod).
    """

    app: str
    kind: str
    path: str
    started_at: float
    position: int = 0
    steps: list[StepRecord] = field(default_factory=list)
    gone: bool | None = None
    baseline: dict[str, Any] | None = None  # Any: JSON of several shapes
    before: dict[str, Any] | None = None  # Any: JSON of several shapes
    liveness: dict[str, float] = field(default_factory=dict)
    waits: dict[str, dict[str, Any]] = field(default_factory=dict)  # Any: JSON of several shapes
    wait_started: float | None = None
    removed: list[dict[str, Any]] = field(default_factory=list)  # Any: JSON of several shapes
    notes: list[str] = field(default_factory=list)
    attempts: int = 1
    deferrals: int = 0
    result: dict[str, Any] | None = None  # Any: JSON of several shapes

    @property
    def path_steps(self) -> tuple[Step, ...]:
        return path_of(self.kind, self.path)

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def next_step(self) -> Step | None:
        steps = self.path_steps
        return steps[self.position] if self.position < len(steps) else None

    def changed(self) -> bool:
        """Whether a step that changes the application ran (:func:`touched`)."""
        return touched(self.steps)

    def record(self, step: Step, started: float | None, ended: float, *, ok: bool, detail: str,
               group_id: str | None = None) -> StepRecord:
        rec = StepRecord(step=step.value, group_id=group_id, started_at=float(started or ended), ended_at=ended,
                         ok=ok, detail=detail[:2000])
        self.steps.append(rec)
        return rec

    def progress(self, group_ids: Iterable[str], now: float, pending: Mapping[str, str | None] | None = None,
                 ) -> MoveProgress:
        """Where the move stands for the fleet view: the next step, and each group's. ``pending``: in a wait
        stage, the wait each group still waits for (None: it passed the stage), as the stage's entries say
        when the move defers; without it every group is at the move's step."""
        step = self.next_step
        groups = {}
        for gid in group_ids:
            if step is None:
                groups[gid] = "done"
            elif pending is not None and gid in pending:
                groups[gid] = pending[gid] or "done"
            else:
                groups[gid] = step.value
        return MoveProgress(app=self.app, kind=self.kind, path=self.path, step=None if step is None else step.value,
                            position=self.position, steps=tuple(s.value for s in self.path_steps), recorded_at=now,
                            waiting=pending is not None, groups=groups)

    def to_dict(self) -> dict[str, object]:
        return {"app": self.app, "kind": self.kind, "path": self.path, "started_at": self.started_at,
                "position": self.position, "steps": [s.to_dict() for s in self.steps], "gone": self.gone,
                "baseline": self.baseline, "before": self.before, "liveness": dict(self.liveness),
                "waits": dict(self.waits),
                "wait_started": self.wait_started, "removed": list(self.removed), "notes": list(self.notes),
                "attempts": self.attempts, "deferrals": self.deferrals, "result": self.result}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MoveState:  # Any: JSON read back (XCom, a file, a response)
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"move state must be an object, got {type(data).__name__}")
        texts = {k: data.get(k) for k in ("app", "kind", "path")}
        if not all(isinstance(v, str) and v for v in texts.values()):
            raise InvalidArgument(f"move state needs app, kind and path, got {texts!r}")
        path_of(str(texts["kind"]), str(texts["path"]))  # refuses an unknown kind or path
        position = data.get("position")
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise InvalidArgument(f"move state: position must be a whole number >= 0, got {position!r}")
        gone = data.get("gone")
        if gone is not None and not isinstance(gone, bool):
            raise InvalidArgument(f"move state: gone must be true, false or null, got {gone!r}")
        for key, kind in (("steps", list), ("removed", list), ("notes", list), ("liveness", Mapping),
                          ("waits", Mapping)):
            if data.get(key) is not None and not isinstance(data.get(key), kind):
                raise InvalidArgument(f"move state: {key!r} has the wrong shape, got {data.get(key)!r}")
        baseline, result, before = data.get("baseline"), data.get("result"), data.get("before")
        if baseline is not None and not isinstance(baseline, Mapping):
            raise InvalidArgument("move state: baseline must be an object or null")
        if before is not None and not isinstance(before, Mapping):
            raise InvalidArgument("move state: before must be an object or null")
        if result is not None and not isinstance(result, Mapping):
            raise InvalidArgument("move state: result must be an object or null")
        attempts, deferrals = data.get("attempts", 1), data.get("deferrals", 0)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise InvalidArgument(f"move state: attempts must be a whole number >= 1, got {attempts!r}")
        if isinstance(deferrals, bool) or not isinstance(deferrals, int) or deferrals < 0:
            raise InvalidArgument(f"move state: deferrals must be a whole number >= 0, got {deferrals!r}")
        return cls(app=str(texts["app"]), kind=str(texts["kind"]), path=str(texts["path"]),
                   started_at=float(_float(data, "started_at", optional=False) or 0.0), position=position,
                   steps=[StepRecord.from_dict(s) for s in data.get("steps") or []], gone=gone,
                   baseline=dict(baseline) if baseline is not None else None,
                   before=dict(before) if before is not None else None,
                   liveness={str(k): float(v) for k, v in (data.get("liveness") or {}).items()},
                   waits={str(k): dict(v) for k, v in (data.get("waits") or {}).items()},
                   wait_started=_float(data, "wait_started"), removed=list(data.get("removed") or []),
                   notes=[str(n) for n in data.get("notes") or []], attempts=attempts, deferrals=deferrals,
                   result=dict(result) if result is not None else None)


__all__ = ["ARRIVALS", "CHANGING_STEPS", "PATHS", "WAITS", "MovePath", "MoveState", "Step", "path_of", "touched",
           "wait_stage"]

"""What a fleet run records: one result per application moved (or moved back), one record per wave.

These are the shapes the fleet migration DAG's tasks hand each other as XCom
and the fleet report and the fleet view read back, so they are plain JSON with
a strict reader: a record that does not parse is an error, never a guess.

* :class:`StepRecord`: one step of one application's move (snapshot, stop,
  wait_empty, start, roll, wait_migrated, wait_lag, compare_offsets ...), with
  its start and end (epoch seconds), whether it held, and what it saw.
* :class:`ApplicationResult`: an application's move in a wave (``kind``
  ``migrate``) or its way back (``kind`` ``rollback``): its groups' outcome
  (:class:`GroupOutcome`), its steps, and the *processing gap*: for the
  offline path, from the moment the application was told to stop until
  every group had its expected members again on the new protocol (the
  longest stretch the application processed nothing); for the online path,
  None (no instance is stopped while the others run, so no group-wide gap is
  measured here).
* :class:`WaveRecord`: the wave's number, hash, approval, timing, results and
  the error budget's verdict.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_kip848.fleet.budget import GroupResult, WaveVerdict
from airflow_provider_kip848.kafka.errors import InvalidArgument

MIGRATE, ROLLBACK = "migrate", "rollback"


def _require(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InvalidArgument(f"{what}: {key!r} is missing or not {kind.__name__}, got {value!r}")
    return value


def _span(started: float | None, ended: float | None) -> float | None:
    """Seconds from ``started`` to ``ended``; None when either is not known."""
    return None if started is None or ended is None else ended - started


def _names(data: Mapping[str, Any], key: str, what: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{what}: {key!r} must be a list of strings, got {value!r}")
    return tuple(value)


def _text_map(data: Mapping[str, Any], key: str, what: str) -> dict[str, str]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidArgument(f"{what}: {key!r} must map strings to strings, got {value!r}")
    return dict(value)


def _opt_float(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(f"{key!r} must be a number or null, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class StepRecord:
    """One step of an application's move: ``step`` (name), ``group_id`` (None: the whole application),
    ``started_at``/``ended_at`` (epoch seconds), ``ok``, ``detail`` (what it saw or why it failed)."""

    step: str
    started_at: float
    ended_at: float | None
    ok: bool | None
    group_id: str | None = None
    detail: str = ""

    @property
    def duration_s(self) -> float | None:
        return _span(self.started_at, self.ended_at)

    def to_dict(self) -> dict[str, object]:
        return {"step": self.step, "group_id": self.group_id, "started_at": self.started_at,
                "ended_at": self.ended_at, "ok": self.ok, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepRecord:  # Any: JSON read back (XCom, a file, a response)
        ok = data.get("ok")
        if ok is not None and not isinstance(ok, bool):
            raise InvalidArgument(f"step ok must be true, false or null, got {ok!r}")
        started = _opt_float(data, "started_at")
        if started is None:
            raise InvalidArgument(f"a step needs started_at, got {dict(data)!r}")
        return cls(step=_require(data, "step", str, "step"), started_at=started,
                   ended_at=_opt_float(data, "ended_at"), ok=ok, group_id=data.get("group_id"),
                   detail=str(data.get("detail") or ""))


@dataclass(frozen=True)
class MoveProgress:
    """Where one application's move stands, as its task records it after every step (XCom ``fleet_progress``):
    the fleet view shows each group's step from it while the move runs.

    ``step``: the next step of the path (None: the path is done); ``position`` of ``len(steps)``; ``waiting``:
    the move is deferred on the wait stage starting at ``step``; ``groups``: each group's step: the
    application's step, or in a wait stage the wait the group was still in when the move deferred (the
    triggerer's progress within a stage is not recorded until the stage ends); ``done`` for a group past the
    stage; ``recorded_at``: epoch seconds of the record."""

    app: str
    kind: str
    path: str
    step: str | None
    position: int
    steps: tuple[str, ...]
    recorded_at: float
    waiting: bool = False
    groups: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"app": self.app, "kind": self.kind, "path": self.path, "step": self.step, "position": self.position,
                "steps": list(self.steps), "recorded_at": self.recorded_at, "waiting": self.waiting,
                "groups": dict(self.groups)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MoveProgress:  # Any: JSON read back (XCom, a file, a response)
        """The record as :meth:`to_dict` wrote it; InvalidArgument if it is not one (never a guess)."""
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"move progress: not an object, got {data!r}")
        what = "move progress"
        step = data.get("step")
        if step is not None and not isinstance(step, str):
            raise InvalidArgument(f"{what}: 'step' must be a string or null, got {step!r}")
        position = _require(data, "position", int, what)
        recorded = _opt_float(data, "recorded_at")
        if recorded is None:
            raise InvalidArgument(f"{what}: 'recorded_at' is missing")
        return cls(app=_require(data, "app", str, what), kind=_require(data, "kind", str, what),
                   path=_require(data, "path", str, what), step=step, position=position,
                   steps=_names(data, "steps", what), recorded_at=recorded,
                   waiting=bool(data.get("waiting")), groups=_text_map(data, "groups", what))


@dataclass(frozen=True)
class GroupOutcome:
    """One group at the end of its application's move: ``ok``, the type before and after, the state,
    live members after, the committed offsets compared with the snapshot (``offsets_regressed``: partitions
    whose committed offset went backwards; None: not compared), ``downtime`` (the group's settle time,
    rebalances and longest commit stall read from its own records after the move, see
    :func:`~airflow_provider_kip848.changecontrol.downtime.downtime_summary`; ``{"error": ...}`` when they
    could not be read; None: the application was not touched), and ``detail``."""

    group_id: str
    ok: bool
    type_before: str | None = None
    type_after: str | None = None
    state_after: str | None = None
    members_after: int | None = None
    offsets_compared: int | None = None
    offsets_regressed: int | None = None
    detail: str = ""
    downtime: Mapping[str, Any] | None = None  # Any: JSON of several shapes

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "ok": self.ok, "type_before": self.type_before,
                "type_after": self.type_after, "state_after": self.state_after,
                "members_after": self.members_after, "offsets_compared": self.offsets_compared,
                "offsets_regressed": self.offsets_regressed, "detail": self.detail,
                "downtime": None if self.downtime is None else dict(self.downtime)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupOutcome:  # Any: JSON read back (XCom, a file, a response)
        def opt_int(key: str) -> int | None:
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InvalidArgument(f"group outcome {key!r} must be a whole number or null, got {value!r}")
            return value

        return cls(group_id=_require(data, "group_id", str, "group outcome"),
                   ok=_require(data, "ok", bool, "group outcome"), type_before=data.get("type_before"),
                   type_after=data.get("type_after"), state_after=data.get("state_after"),
                   members_after=opt_int("members_after"), offsets_compared=opt_int("offsets_compared"),
                   offsets_regressed=opt_int("offsets_regressed"), detail=str(data.get("detail") or ""),
                   downtime=_downtime(data.get("downtime")))


def _downtime(value: Any) -> dict[str, Any] | None:
    """A group outcome's ``downtime``: null, ``{"error": text}``, or a summary whose figures are numbers or
    null (a figure that is not a number is an error, never read as 0)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"group outcome 'downtime' must be an object or null, got {value!r}")
    for key in ("settle_s", "commit_stall_s"):
        _opt_float(value, key)
    rebalances = value.get("rebalances")
    if rebalances is not None and (isinstance(rebalances, bool) or not isinstance(rebalances, int)):
        raise InvalidArgument(f"group outcome downtime 'rebalances' must be a whole number or null, got {rebalances!r}")
    if "error" not in value and "settle_s" not in value:
        raise InvalidArgument(f"group outcome 'downtime' needs 'settle_s' or 'error', got {dict(value)!r}")
    return dict(value)


@dataclass(frozen=True)
class ApplicationResult:
    """An application's move (``kind`` migrate) or way back (``kind`` rollback) in wave ``wave``.

    ``ok``: every group ended where it had to (migrated: the target type with the expected live members,
    no committed offset regressed; rollback: back on the source type). ``gap_s``/``gap_from``/``gap_to``:
    the processing gap (module docstring; None when not measured).
    """

    app: str
    team: str
    wave: int
    kind: str
    path: str
    ok: bool
    groups: tuple[GroupOutcome, ...]
    steps: tuple[StepRecord, ...] = ()
    started_at: float | None = None
    ended_at: float | None = None
    gap_s: float | None = None
    gap_from: float | None = None
    gap_to: float | None = None
    detail: str = ""
    map_index: int | None = None
    task_id: str | None = None

    @property
    def group_results(self) -> tuple[GroupResult, ...]:
        """What the error budget judges."""
        return tuple(GroupResult(g.group_id, g.ok, g.detail) for g in self.groups)

    @property
    def duration_s(self) -> float | None:
        return _span(self.started_at, self.ended_at)

    def to_dict(self) -> dict[str, object]:
        return {"app": self.app, "team": self.team, "wave": self.wave, "kind": self.kind, "path": self.path,
                "ok": self.ok, "detail": self.detail, "groups": [g.to_dict() for g in self.groups],
                "steps": [s.to_dict() for s in self.steps], "started_at": self.started_at,
                "ended_at": self.ended_at, "gap_s": self.gap_s, "gap_from": self.gap_from, "gap_to": self.gap_to,
                "map_index": self.map_index, "task_id": self.task_id}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApplicationResult:  # Any: JSON read back (XCom, a file, a response)
        what = "application result"
        kind = _require(data, "kind", str, what)
        if kind not in (MIGRATE, ROLLBACK):
            raise InvalidArgument(f"{what}: kind must be {MIGRATE!r} or {ROLLBACK!r}, got {kind!r}")
        groups = data.get("groups")
        steps = data.get("steps") or []
        if not isinstance(groups, list) or not isinstance(steps, list):
            raise InvalidArgument(f"{what}: groups and steps must be lists")
        wave = _require(data, "wave", int, what)
        map_index = data.get("map_index")
        if map_index is not None and (isinstance(map_index, bool) or not isinstance(map_index, int)):
            raise InvalidArgument(f"{what}: map_index must be a whole number or null, got {map_index!r}")
        task_id = data.get("task_id")
        if task_id is not None and not isinstance(task_id, str):
            raise InvalidArgument(f"{what}: task_id must be a string or null, got {task_id!r}")
        return cls(app=_require(data, "app", str, what), team=_require(data, "team", str, what), wave=wave,
                   kind=kind, path=_require(data, "path", str, what), ok=_require(data, "ok", bool, what),
                   groups=tuple(GroupOutcome.from_dict(g) for g in groups),
                   steps=tuple(StepRecord.from_dict(s) for s in steps),
                   started_at=_opt_float(data, "started_at"), ended_at=_opt_float(data, "ended_at"),
                   gap_s=_opt_float(data, "gap_s"), gap_from=_opt_float(data, "gap_from"),
                   gap_to=_opt_float(data, "gap_to"), detail=str(data.get("detail") or ""),
                   map_index=map_index, task_id=task_id)


@dataclass(frozen=True)
class WaveRecord:
    """A wave as it ran: ``number``, ``canary``, ``wave_hash``, the approval (``approved_by``, ``approved_at``),
    ``started_at``/``ended_at`` (approval answered -> last result in), the applications' ``results``, the
    budget's ``verdict`` (None: the wave did not run), and the groups by type in the cluster's inventory
    taken after the wave (``types_after``: type -> count, of the plan's groups)."""

    number: int
    canary: bool
    wave_hash: str
    apps: tuple[str, ...]
    group_ids: tuple[str, ...]
    results: tuple[ApplicationResult, ...] = ()
    rollbacks: tuple[ApplicationResult, ...] = ()
    verdict: WaveVerdict | None = None
    started_at: float | None = None
    ended_at: float | None = None
    approved_by: str | None = None
    approved_at: str | None = None
    types_after: Mapping[str, int] = field(default_factory=dict)

    @property
    def duration_s(self) -> float | None:
        return _span(self.started_at, self.ended_at)

    def to_dict(self) -> dict[str, object]:
        return {"number": self.number, "canary": self.canary, "wave_hash": self.wave_hash, "apps": list(self.apps),
                "group_ids": list(self.group_ids), "results": [r.to_dict() for r in self.results],
                "rollbacks": [r.to_dict() for r in self.rollbacks],
                "verdict": self.verdict.to_dict() if self.verdict else None, "started_at": self.started_at,
                "ended_at": self.ended_at, "duration_s": self.duration_s, "approved_by": self.approved_by,
                "approved_at": self.approved_at, "types_after": dict(self.types_after)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WaveRecord:  # Any: JSON read back (XCom, a file, a response)
        what = "wave record"
        v = data.get("verdict")
        verdict = None
        if v is not None:
            if not isinstance(v, Mapping):
                raise InvalidArgument(f"{what}: verdict must be an object or null")
            verdict = WaveVerdict(wave=_require(v, "wave", int, "verdict"),
                                  proceed=_require(v, "proceed", bool, "verdict"),
                                  reason=_require(v, "reason", str, "verdict"),
                                  failed_apps=_names(v, "failed_apps", "verdict"),
                                  succeeded_apps=_names(v, "succeeded_apps", "verdict"),
                                  failed_groups=_text_map(v, "failed_groups", "verdict"),
                                  rollback_groups=_names(v, "rollback_groups", "verdict"))
        types_after = data.get("types_after") or {}
        if not isinstance(types_after, Mapping) or not all(
                isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) for k, n in types_after.items()):
            raise InvalidArgument(f"{what}: types_after must map type names to counts")
        return cls(number=_require(data, "number", int, what), canary=_require(data, "canary", bool, what),
                   wave_hash=_require(data, "wave_hash", str, what), apps=_names(data, "apps", what),
                   group_ids=_names(data, "group_ids", what),
                   results=tuple(ApplicationResult.from_dict(r) for r in data.get("results") or ()),
                   rollbacks=tuple(ApplicationResult.from_dict(r) for r in data.get("rollbacks") or ()),
                   verdict=verdict, started_at=_opt_float(data, "started_at"),
                   ended_at=_opt_float(data, "ended_at"), approved_by=data.get("approved_by"),
                   approved_at=data.get("approved_at"), types_after=dict(types_after))


def apply_validation(results: Sequence[ApplicationResult], validated: Collection[str],
                     # Any: JSON of several shapes (XCom, reports)
                     verdicts: Mapping[str, Mapping[str, Any]] | None) -> list[ApplicationResult]:
    """The applications' results once their groups were validated: a group in ``validated`` whose verdict in
    ``verdicts`` (group id -> ``{verdict, detail}``, the wave validation's ``groups``) is not ``pass`` fails,
    and so does its application, which the error budget then counts and the way back brings back like a
    failed move. ``verdicts`` None (the validation gave none: it failed or never ran) is ``unknown`` for every
    validated group: never a pass."""
    out = []
    for result in results:
        groups, failed = [], []
        for g in result.groups:
            if g.group_id not in validated:
                groups.append(g)
                continue
            found = (verdicts or {}).get(g.group_id) or {}
            verdict = str(found.get("verdict") or "unknown")
            if verdict == "pass":
                groups.append(g)
                continue
            why = f"validation {verdict}" + (f": {found['detail']}" if found.get("detail") else "")
            failed.append(f"{g.group_id}: {why}")
            groups.append(replace(g, ok=False, detail="; ".join(x for x in (g.detail, why) if x)))
        if failed:
            detail = "; ".join(x for x in (result.detail, *failed) if x)
            result = replace(result, ok=False, groups=tuple(groups), detail=detail[:2000])
        out.append(result)
    return out


__all__ = ["MIGRATE", "ROLLBACK", "ApplicationResult", "GroupOutcome", "MoveProgress", "StepRecord", "WaveRecord",
           "apply_validation"]

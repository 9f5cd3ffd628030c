"""What a migration waits for, as data: a group condition that sensors poke and triggers poll.

A condition is a small JSON-able value (so a trigger can be serialised and
resumed by the triggerer) evaluated against the cluster by one function,
:func:`judge`, over facts that :func:`~airflow_provider_kip848.kafka.api.evaluate_condition`
reads; both the non-deferrable ``poke`` and the deferrable trigger call that.
There is one source of truth for "is the group there yet".

Why over 500 lines: a condition is a contract between the sensors, the triggers and the engine: its JSON
value (:class:`GroupCondition`), the judge that reads it, and the wait state carried between polls
(:class:`WaitState`, the staged waits) are serialised by a trigger in one process and read back in another.
Kept in one module, the format and every reader of it change in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from airflow_provider_kip848.kafka.arguments import describe_similar, show_id
from airflow_provider_kip848.kafka.errors import (
    CoordinatorUnavailable,
    GroupNotEmpty,
    GroupNotFound,
    InvalidArgument,
    Kip848Error,
    MemberNotReconciled,
)
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupMember,
    GroupDescription,
    GroupOffsets,
    GroupState,
    GroupType,
    MemberProtocol,
    StreamsGroupMember,
    TaskAssignment,
)
from airflow_provider_kip848.kafka.rules.lag import (
    MARGIN_FRACTION,
    MARGIN_RECORDS,
    WINDOW_SECONDS,
    LagMargin,
    judge_caught_up,
    keep_samples,
    sample_of,
)

KINDS = ("state", "type", "migrated", "lag", "empty")
#: how long a wait rides out a coordinator that stays unavailable (a partition that never loads) before it fails
UNAVAILABLE_LIMIT_S = 300.0
#: how long a member may stay behind its group's assignment at one member epoch before a migrated wait fails
#: (a revocation takes a rebalance callback and a poll; the broker's own bound is the member's rebalance
#: timeout, max.poll.interval.ms, 5 minutes by default, after which it fences the member)
RECONCILE_LIMIT_S = 120.0


class TaskLog(Protocol):
    """What the waits and the migration steps log through: a task's logger, the Task SDK's (structlog) or a
    stdlib ``logging.Logger``; only these two calls, positional, so either fits."""

    def info(self, msg: str, /, *args: object) -> object: ...

    def warning(self, msg: str, /, *args: object) -> object: ...


@dataclass(frozen=True)
class GroupCondition:
    """``kind`` and its arguments:

    * ``state``: the group is in one of ``states`` (``Empty``, ``Stable``, ...; ``Dead`` also
      matches a group that does not exist);
    * ``type``: the group's type is ``group_type`` (classic, consumer, streams);
    * ``migrated``: the group is of type ``group_type`` (consumer or streams), has at least
      ``min_members`` *live* members (the instances the application should run) and none of them
      still speaks the classic protocol. A member that left (a static member that shut down stays
      listed with member epoch -2 until its session expires) is not counted. With ``liveness_s`` > 0,
      every listed member must also *prove* it is alive (see :func:`follow`): a crashed member stays
      listed, Stable and with its epoch unchanged, until its session times out. The group must also be
      Stable with every member *reconciled* (:func:`reconciled`: in a consumer or streams group, its member
      epoch at the group's assignment epoch and its partitions or tasks the target ones, as
      ``kafka-consumer-groups --describe --members --verbose`` shows them); a member behind at the same
      epoch for ``reconcile_s`` seconds fails the wait (:class:`MemberNotReconciled`);
    * ``lag``: the group has caught up (:mod:`~airflow_provider_kip848.kafka.rules.lag`): with ``max_lag``, the
      absolute override (total lag at most ``max_lag``); else its lag back at the level before the change
      (``baseline``: each partition's lag then, from the run's offsets snapshot, plus the margin
      ``margin_fraction`` x it + ``margin_records``), or not growing over ``window_s`` seconds while the group
      commits where records arrive (the only rule without a baseline). No partition above
      ``max_partition_lag`` when given; a lag that cannot be known is never caught up;
    * ``empty``: the group has no members, and has had none for ``settle_s`` seconds: a member that is
      still running rejoins within a heartbeat or two of leaving (or of being forced out), so a momentary
      Empty is not proof that the application stopped. A group that does not exist is empty only when it
      existed earlier in the same wait (the coordinator deletes an Empty group without committed offsets) or
      with ``allow_absent`` (the caller saw it before the wait: an offline migration's snapshot before the
      stop). An id the cluster never listed since the wait began fails the wait (:class:`GroupNotFound`,
      naming similar ids): a mistyped id would otherwise be "Empty" at once while the real group keeps its
      members. Two bounds the caller derives from the group's real configs
      (:func:`~airflow_provider_kip848.hooks.instances.empty_bounds`): ``expiry_s``, the longest a member that
      stopped heartbeating stays listed (one listed longer under the same member id is alive: the wait fails,
      naming it); ``rejoin_s``, how long a live member forced out takes to be back (its session and its rebalance
      timeout): after a forced removal the wait does not hold before that long has passed since the removal, and
      a member back in the meantime fails it. ``removal_s``: the caller forces out a member whose instance the
      platform shows stopped or gone only once it is listed this long (its session: until then the broker drops
      one that stopped heartbeating by itself). ``unaccounted``: the members the platform did not account for
      when the wait decided whom to force out (never forced out; named while they are listed).
    """

    kind: str
    states: tuple[GroupState, ...] = ()
    group_type: str | None = None
    min_members: int = 1
    max_lag: int | None = None
    max_partition_lag: int | None = None
    settle_s: float = 0.0
    liveness_s: float = 0.0
    reconcile_s: float = RECONCILE_LIMIT_S
    allow_absent: bool = False
    expiry_s: float = 0.0
    rejoin_s: float = 0.0
    removal_s: float = 0.0
    unaccounted: tuple[dict[str, Any], ...] = ()  # Any: member facts and why (JSON)
    baseline: dict[str, int | None] | None = None
    margin_fraction: float = MARGIN_FRACTION
    margin_records: int = MARGIN_RECORDS
    window_s: float = WINDOW_SECONDS

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidArgument(f"unknown condition kind {self.kind!r}", remedy=f"Use one of {', '.join(KINDS)}.")
        object.__setattr__(self, "states", tuple(GroupState.parse(s, strict=True) for s in self.states))
        if self.kind == "state" and not self.states:
            raise InvalidArgument("a state condition needs at least one state", remedy="Pass e.g. states=['Empty'].")
        if self.kind in ("type", "migrated") and GroupType.parse(self.group_type) is GroupType.UNKNOWN:
            raise InvalidArgument(f"group_type {self.group_type!r} is not classic, consumer, streams or share")
        if self.kind == "migrated" and GroupType.parse(self.group_type) is GroupType.SHARE:
            raise InvalidArgument("a migrated condition takes group_type classic, consumer or streams, not share")
        for name in ("max_lag", "max_partition_lag"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidArgument(f"{name} must be a whole number >= 0 or None, not {value!r}")
        LagMargin(self.margin_fraction, self.margin_records)  # refuses a bad margin, naming it
        if isinstance(self.window_s, bool) or not isinstance(self.window_s, (int, float)) or self.window_s <= 0:
            raise InvalidArgument(f"the lag wait's window must be a number of seconds > 0, not {self.window_s!r}")
        if self.baseline is not None and (not isinstance(self.baseline, dict) or any(
                not isinstance(k, str) or (v is not None and (isinstance(v, bool) or not isinstance(v, int)))
                for k, v in self.baseline.items())):
            raise InvalidArgument("a lag baseline maps 'topic:partition' to the lag before the change (a whole "
                                  "number, or None where it was unknown)")
        if isinstance(self.min_members, bool) or not isinstance(self.min_members, int) or self.min_members < 1:
            raise InvalidArgument(f"the expected number of members must be a whole number >= 1, not "
                                  f"{self.min_members!r}", remedy="Pass the number of instances the application runs.")
        if isinstance(self.settle_s, bool) or not isinstance(self.settle_s, (int, float)) or self.settle_s < 0:
            raise InvalidArgument(f"settle_s must be a number of seconds >= 0, not {self.settle_s!r}")
        if isinstance(self.liveness_s, bool) or not isinstance(self.liveness_s, (int, float)) or self.liveness_s < 0:
            raise InvalidArgument(f"liveness_s must be a number of seconds >= 0, not {self.liveness_s!r}")
        if (isinstance(self.reconcile_s, bool) or not isinstance(self.reconcile_s, (int, float))
                or self.reconcile_s <= 0):
            raise InvalidArgument(f"reconcile_s must be a number of seconds > 0, not {self.reconcile_s!r}")
        if not isinstance(self.allow_absent, bool):
            raise InvalidArgument(f"allow_absent must be a bool, not {self.allow_absent!r}")
        self._check_empty_bounds()

    def _check_empty_bounds(self) -> None:
        """The Empty wait's bounds (finite seconds >= 0) and its unaccounted members (each with its member id)."""
        for name in ("expiry_s", "rejoin_s", "removal_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise InvalidArgument(f"{name} must be a finite number of seconds >= 0, not {value!r}")
        if not isinstance(self.unaccounted, (tuple, list)) or any(
                not isinstance(m, dict) or not isinstance(m.get("member_id"), str) for m in self.unaccounted):
            raise InvalidArgument("unaccounted must be a list of members, each with its member_id")
        object.__setattr__(self, "unaccounted", tuple(dict(m) for m in self.unaccounted))

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "states": [s.value for s in self.states],
                "unaccounted": [dict(m) for m in self.unaccounted]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupCondition:  # Any: JSON read back (XCom, a file, a response)
        return cls(**{**data, "states": tuple(data.get("states") or ()),
                      "unaccounted": tuple(data.get("unaccounted") or ())})

    def describe(self) -> str:
        if self.kind == "state":
            return f"state in {{{', '.join(self.states)}}}"
        if self.kind == "type":
            return f"type {self.group_type}"
        if self.kind == "migrated":
            live = (f", each proven alive (progress, or listed through a {self.liveness_s:g} s liveness window)"
                    if self.liveness_s else "")
            return (f"type {self.group_type}, Stable, {self.min_members}+ live member(s), each reconciled, none on "
                    f"the {'consumer' if self.group_type == 'classic' else 'classic'} protocol{live}")
        if self.kind == "lag":
            cap = f", each partition <= {self.max_partition_lag}" if self.max_partition_lag is not None else ""
            if self.max_lag is not None:
                return f"total lag <= {self.max_lag}{cap} (max_lag, the absolute override)"
            margin = LagMargin(self.margin_fraction, self.margin_records).describe()
            growing = (f"lag not growing over {self.window_s:g} s (beyond {margin}) while the group commits where "
                       f"records arrive")
            if self.baseline is None:
                return f"{growing}{cap} (no baseline: no offsets snapshot before the change)"
            return (f"lag back at the level before the change ({len(self.baseline)} partition(s), total "
                    f"{sum(v or 0 for v in self.baseline.values())}) plus {margin}, or {growing}{cap}")
        absent = " (or gone)" if self.allow_absent else ""
        out = f"no members{absent} for {self.settle_s:g} s" if self.settle_s else f"no members{absent}"
        if self.rejoin_s:
            out += f", and for {self.rejoin_s:g} s after a forced removal (a live member forced out is back by then)"
        if self.expiry_s:
            out += f"; a member listed over {self.expiry_s:g} s is alive"
        return out


@dataclass(frozen=True)
class ConditionResult:
    met: bool
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)  # Any: JSON of several shapes

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def judge(condition: GroupCondition, *, description: GroupDescription | None = None,
          offsets: GroupOffsets | None = None) -> ConditionResult:
    """Whether ``condition`` holds: over ``offsets`` for a lag condition, else over the group's
    ``description`` (None: the group does not exist)."""
    kind = condition.kind
    if kind == "lag":
        if offsets is None:
            raise InvalidArgument("a lag condition is judged over the group's offsets")
        if condition.max_lag is None:  # judged over several polls: follow_lag
            unknown_tps = [f"{p.topic}:{p.partition}" for p in offsets.uncommitted_with_records]
            return ConditionResult(False, f"total lag {offsets.total_lag}",
                                   {"total_lag": offsets.total_lag, "uncommitted": unknown_tps,
                                    "sample": sample_of(offsets)})
        worst = max((p.lag or 0 for p in offsets.partitions), default=0)
        max_lag = condition.max_lag if condition.max_lag is not None else 0
        unknown = offsets.uncommitted_with_records
        met = not unknown and offsets.total_lag <= max_lag and (
            condition.max_partition_lag is None or worst <= condition.max_partition_lag)
        summary = f"total lag {offsets.total_lag}, worst partition {worst}"
        if unknown:  # a lag cannot be 0 where nothing was committed: unknown, so not met
            summary += (f"; lag unknown on {len(unknown)} partition(s) with records and no commit yet "
                        f"({', '.join(f'{p.topic}:{p.partition}' for p in unknown[:5])})")
        if met:
            summary += f": within max_lag {max_lag} (the absolute override)"
        return ConditionResult(met, summary,
                               {"rule": "max_lag" if met else None, "total_lag": offsets.total_lag,
                                "max_partition_lag": worst,
                                "uncommitted": [f"{p.topic}:{p.partition}" for p in unknown],
                                "lag": {f"{p.topic}:{p.partition}": p.lag for p in offsets.partitions}})
    desc = description
    if desc is None:
        met = (kind == "empty" and condition.allow_absent) or (kind == "state" and GroupState.DEAD in condition.states)
        return ConditionResult(met, "the group does not exist", {"exists": False})
    detail = _detail(desc)
    if offsets is not None:  # a migrated wait's liveness: progress is committed offsets advancing
        detail["committed"] = {str(tp): offset for tp, offset in offsets.committed.items()}
    if kind == "state":
        return ConditionResult(desc.state in condition.states, f"state {desc.state.value}", detail)
    if kind == "empty":
        return ConditionResult(desc.is_empty, f"{len(desc.members)} member(s), state {desc.state.value}", detail)
    if kind == "type":
        return ConditionResult(desc.type.value == condition.group_type, f"type {desc.type.value}", detail)
    # migrated: count the live members only, each on the group type's own protocol (a classic member
    # left in a consumer group, or the other way round, means the move is not finished)
    live = [m for m in desc.members if is_live(m)]
    target = MemberProtocol(GroupType.parse(condition.group_type).value)  # share is refused at parse time
    behind = [m for m in live if m.protocol is not target]
    departed = len(desc.members) - len(live)
    reconciling = [m for m in detail["members"] if m["live"] and m["reconciled"] is not True]
    stable = desc.state is GroupState.STABLE
    met = (desc.type.value == condition.group_type and not behind and len(live) >= condition.min_members
           and stable and not reconciling)
    summary = (f"type {desc.type.value}, {len(live) - len(behind)} of {len(live)} live member(s) on the new "
               f"protocol, {condition.min_members} expected")
    if departed:
        summary += f" ({departed} departed member(s) not counted)"
    if not stable:
        summary += f"; state {desc.state.value}, not Stable"
    if reconciling:
        summary += f"; not reconciled: {describe_reconciling(reconciling, detail.get('assignment_epoch'))}"
    return ConditionResult(met, summary, detail)


def reconciled(member: ConsumerGroupMember | StreamsGroupMember, desc: GroupDescription) -> bool | None:
    """Whether a live member has caught up with its group's assignment: in a consumer or streams group, its
    member epoch is the group's assignment epoch and what it owns is its target (partitions; a streams
    member's active, standby and warm-up tasks). True for a classic group (no epochs) and for a classic
    member of a consumer group (it is judged as not on the new protocol); None when the description does not
    carry the epochs (unknown: never taken as reconciled)."""
    if desc.type is GroupType.CLASSIC or member.protocol is MemberProtocol.CLASSIC:
        return True
    if member.member_epoch is None or desc.target_assignment_epoch is None or member.target_assignment is None:
        return None
    if member.member_epoch != desc.target_assignment_epoch:
        return False
    if isinstance(member, StreamsGroupMember):
        mine, goal = member.assignment, member.target_assignment
        return all(set(getattr(mine, k)) == set(getattr(goal, k)) for k in ("active", "standby", "warmup"))
    return set(member.assignment) == set(member.target_assignment)


def describe_reconciling(  # Any: JSON of several shapes (XCom, reports)
        members: list[dict[str, Any]], assignment_epoch: int | None) -> str:
    """Members behind their group's assignment, with both epochs (as a person compares them in the CLI)."""
    out = []
    for m in members:
        if m.get("reconciled") is None:
            out.append(f"{m.get('client_id') or m['member_id']} (epochs unknown)")
            continue
        owns = "" if m.get("owned") == m.get("target") else f", owns {len(m.get('owned') or [])} of " \
                                                              f"{len(m.get('target') or [])} target"
        out.append(f"{m.get('client_id') or m['member_id']} on {m.get('host') or '?'} (member epoch "
                   f"{m.get('member_epoch')}, assignment epoch {assignment_epoch}{owns})")
    return ", ".join(out)


def is_live(member: ConsumerGroupMember | StreamsGroupMember) -> bool:
    """A member that is in the group now: a negative member epoch is one that left (-1) or a static
    member that shut down and waits for its session to expire (-2)."""
    return member.member_epoch is None or member.member_epoch >= 0


def _owned(member: ConsumerGroupMember | StreamsGroupMember, target: bool) -> list[str] | None:
    held = member.target_assignment if target else member.assignment
    if held is None:
        return None
    if isinstance(held, TaskAssignment):
        return sorted(f"{k}:{t}" for k in ("active", "standby", "warmup") for t in getattr(held, k))
    return sorted(str(tp) for tp in held)


def _detail(desc: GroupDescription) -> dict[str, Any]:
    members = [
        {"member_id": m.member_id, "client_id": m.client_id, "host": getattr(m, "host", ""),
         "instance_id": m.instance_id, "member_epoch": m.member_epoch, "protocol": m.protocol.value,
         "live": is_live(m), "reconciled": reconciled(m, desc),
         "owned": _owned(m, target=False), "target": _owned(m, target=True),
         "partitions": [str(tp) for tp in m.assignment] if isinstance(m, ConsumerGroupMember) else []}
        for m in desc.members
    ]
    return {"exists": True, "type": desc.type.value, "state": desc.state.value, "members": members,
            "group_epoch": desc.group_epoch, "assignment_epoch": desc.target_assignment_epoch,
            "coordinator": desc.coordinator_id,
            "classic_members": sum(m["protocol"] == "classic" for m in members)}


def is_retriable(exc: BaseException) -> bool:
    """Errors a waiting sensor should ride out (a broker restarting), not fail on."""
    return isinstance(exc, Kip848Error) and exc.retriable


# -- what a wait remembers between polls -----------------------------------------------------------


@dataclass
class WaitState:
    """JSON-able memory of one wait (it travels with a deferred trigger and back to the sensor).

    ``empty_since``: when the group was first seen empty in the current run of empty polls.
    ``emptied_at``: when it was first seen empty at all (a member after that is an instance still running).
    ``removed``: the members this wait forced out (member id, client id, host, instance id).
    ``unavailable_since``: when the coordinator first failed in the current run of failures.
    ``members``: a migrated wait's members, by member id: when each was first seen, and the committed
    offsets of its partitions then (what its progress is measured from).
    ``reconciling``: a migrated wait's members behind the group's assignment, by member id: since when at
    which member epoch (a member that moves to another epoch is progressing: its clock starts again).
    ``seen_at``: when an Empty wait first saw the group exist (gone after that: deleted, so empty).
    ``lag_samples``: a lag wait's earlier polls (``{"at", "offsets"}``, oldest first, the window's reference
    first: :func:`~airflow_provider_kip848.kafka.rules.lag.keep_samples`).
    ``listed``: an Empty wait's members by member id, since when each is listed (its clock starts again when
    the coordinator changed or a poll failed: a coordinator that loads the group times every session afresh).
    ``coordinator``: the node that answered the last poll. ``last_failure``: when the last poll failed, until
    the next one answers.
    """

    empty_since: float | None = None
    removed: list[dict[str, Any]] = field(default_factory=list)  # Any: JSON of several shapes
    unavailable_since: float | None = None
    emptied_at: float | None = None
    members: dict[str, dict[str, Any]] = field(default_factory=dict)  # Any: JSON of several shapes
    reconciling: dict[str, dict[str, Any]] = field(default_factory=dict)  # Any: JSON of several shapes
    seen_at: float | None = None
    lag_samples: list[dict[str, Any]] = field(default_factory=list)  # Any: JSON of several shapes
    listed: dict[str, dict[str, Any]] = field(default_factory=dict)  # Any: JSON of several shapes
    coordinator: int | None = None
    last_failure: float | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> WaitState:  # Any: JSON read back (XCom, a file, a response)
        data = data or {}
        return cls(empty_since=data.get("empty_since"), removed=list(data.get("removed") or []),
                   unavailable_since=data.get("unavailable_since"), emptied_at=data.get("emptied_at"),
                   members={str(k): dict(v) for k, v in (data.get("members") or {}).items()},
                   reconciling={str(k): dict(v) for k, v in (data.get("reconciling") or {}).items()},
                   seen_at=data.get("seen_at"), lag_samples=[dict(s) for s in data.get("lag_samples") or []],
                   listed={str(k): dict(v) for k, v in (data.get("listed") or {}).items()},
                   coordinator=data.get("coordinator"), last_failure=data.get("last_failure"))


def member_names(members: list[dict[str, Any]]) -> str:  # Any: JSON of several shapes (XCom, reports)
    """Members as a person looks for them: client id, host and static id."""
    return ", ".join(f"{m.get('client_id') or m.get('member_id')} on {m.get('host') or '?'}"
                     + (f" (group.instance.id {m['instance_id']})" if m.get("instance_id") else "")
                     for m in members)


def follow(condition: GroupCondition, result: ConditionResult, state: WaitState, now: float) -> ConditionResult:
    """The verdict of one poll given what the wait saw before (``state`` is updated in place).

    For ``empty``: met only after ``settle_s`` seconds of consecutive empty polls. A member seen after the
    group was empty, or after this wait forced members out, means an instance is still running (a slow
    consumer's next poll, a process the controller did not stop): the wait fails, naming it.

    For ``migrated`` with ``liveness_s``: :func:`follow_liveness`. For ``lag`` without ``max_lag``:
    :func:`follow_lag`.
    """
    state.unavailable_since = None
    if condition.kind == "lag" and condition.max_lag is None:
        return follow_lag(condition, result, state, now)
    if condition.kind == "migrated":
        follow_reconciliation(condition, result, state, now)
    if condition.kind == "migrated" and condition.liveness_s > 0:
        return follow_liveness(condition, result, state, now)
    if condition.kind != "empty":
        return result
    return follow_empty(condition, result, state, now)


def _track_listed(result: ConditionResult, members: list[dict[str, Any]], state: WaitState,
                  now: float) -> dict[str, dict[str, Any]]:
    """Remember since when each member id is listed (``state.listed``; the ids listed at the poll before are
    returned). A member's clock starts again when the group's coordinator changed or a poll failed since: a
    coordinator that loads the group starts every member's session timer afresh. A member this wait forced out
    that is no longer listed is marked gone (``gone_at`` of its removal record)."""
    before = dict(state.listed)
    moved = _sessions_restarted(result, state)
    listed = {str(m.get("member_id")) for m in members}
    state.listed = {mid: ({**before[mid], "since": now} if moved else before[mid]) if mid in before else {"since": now}
                    for mid in listed}
    if result.detail.get("exists", True):
        for record in state.removed:
            if record.get("member_id") not in listed and record.get("gone_at") is None:
                record["gone_at"] = now
    return before


def follow_empty(condition: GroupCondition, result: ConditionResult, state: WaitState,
                 now: float) -> ConditionResult:
    """An Empty wait's verdict over this poll and the earlier ones.

    * A member this wait forced out that is listed again fails the wait (it is back: its instance runs), except a
      classic one still listed under its member id since the removal, never seen gone: the removal has not shown
      yet (a coordinator failing over); a classic member that rejoins gets a new member id.
    * After a forced removal, or once the group was seen empty, a member that was not listed at the poll before
      (it joined since) fails the wait. One listed all along (not forced out: the platform does not account for
      it, or nothing confirmed its instance gone) is waited for: it leaves, or the broker expires it.
    * A member listed under the same member id for longer than ``expiry_s`` is alive (a member that stopped
      heartbeating is gone by then): the wait fails, naming it.
    * Empty holds after ``settle_s`` seconds of empty polls, and not before ``rejoin_s`` seconds after the last
      forced removal: a live member forced out learns it at its next heartbeat and rejoins at its next poll.
    """
    result = _absent_or_gone(condition, result, state, now)
    members = [] if result.met else list(result.detail.get("members") or [])
    before = _track_listed(result, members, state, now)
    if not result.met:
        state.empty_since = None
        forced = {r.get("member_id"): r for r in state.removed}
        back: list[dict[str, Any]] = []
        not_shown: list[dict[str, Any]] = []
        waited: list[dict[str, Any]] = []
        for m in members:
            record = forced.get(m.get("member_id"))
            if record is not None:
                classic_still = m.get("protocol") == "classic" and record.get("gone_at") is None
                (not_shown if classic_still and state.emptied_at is None else back).append(m)
            elif (state.removed or state.emptied_at is not None) and m.get("member_id") not in before:
                back.append(m)
            else:
                waited.append(m)
        if back:
            why = ("after the members left behind were forced out" if state.removed else
                   f"{now - (state.emptied_at if state.emptied_at is not None else now):.1f} s after the group "
                   "was empty")
            error = GroupNotEmpty(
                f"A member came back {why}: {member_names(back)}. An instance of the application is still "
                "running (a forced-out or slow member rejoins at its next heartbeat or poll)",
                remedy="Stop that instance (check the application controller and the host named), then rerun; "
                       "starting the new application now would fail or split the group.")
            error.members = back  # type: ignore[attr-defined]  # who: the caller may name their instances
            raise error
        _fail_alive(condition, members, state, now)
        summary = result.summary
        if not_shown:
            # the very classic members this wait forced out, never seen gone since: the removal has not shown yet
            # (its LeaveGroup answered by a coordinator killed before it replicated, or a read from before it),
            # which is no sign of a live instance: a classic member that rejoins gets a new member id, and the
            # removal was made on the platform's word that their instances are stopped. They go when they leave or
            # expire. (A consumer-protocol member keeps its client-made id when it rejoins: seen again, it is back.)
            summary += (f"; the member(s) forced out are still listed ({member_names(not_shown)}): the removal has "
                        "not shown yet (a coordinator failing over); waiting for them to go")
        foreign = {str(u.get("member_id")): u for u in condition.unaccounted}
        named = [m for m in waited if str(m.get("member_id")) in foreign]
        if named:
            summary += "; not forced out, waiting for the broker to expire them: " + "; ".join(
                f"{member_names([m])} (member id {m.get('member_id')}, listed since "
                f"{_clock(state.listed[str(m.get('member_id'))]['since'])}): "
                f"{foreign[str(m.get('member_id'))].get('why') or 'not accounted for by the platform'}"
                for m in named)
        return ConditionResult(False, summary, result.detail)
    if state.emptied_at is None:
        state.emptied_at = now
    if state.empty_since is None:
        state.empty_since = now
    empty_for = now - state.empty_since
    detail = {**result.detail, "empty_for_s": round(empty_for, 3)}
    removed_at = max((float(r["at"]) for r in state.removed if isinstance(r.get("at"), (int, float))), default=None)
    watched = None if removed_at is None or not condition.rejoin_s else now - removed_at
    if watched is not None and watched < condition.rejoin_s:
        return ConditionResult(False, f"{result.summary}, empty for {empty_for:.1f} s; the {len(state.removed)} "
                                      f"member(s) forced out not back for {watched:.1f} of {condition.rejoin_s:g} s "
                                      "(the rejoin bound)", detail)
    if empty_for >= condition.settle_s:
        summary = result.summary + (f", empty for {empty_for:.1f} s (settle window {condition.settle_s:g} s)"
                                    if condition.settle_s else "")
        if watched is not None:
            summary += (f"; the {len(state.removed)} member(s) forced out not back {watched:.1f} s after their "
                        f"removal (rejoin bound {condition.rejoin_s:g} s)")
        return ConditionResult(True, summary, detail)
    return ConditionResult(False, f"{result.summary}, empty for {empty_for:.1f} of {condition.settle_s:g} s", detail)


def _sessions_restarted(result: ConditionResult, state: WaitState) -> bool:
    """Whether the coordinator may have timed every member's session afresh since the poll before: the group's
    coordinator is another node now, or a poll failed in between (a coordinator failing over, or paused and
    fenced, loads the group and starts every session timer again). Remembers the coordinator of this poll."""
    coordinator = result.detail.get("coordinator")
    moved = state.last_failure is not None or (
        coordinator is not None and state.coordinator is not None and coordinator != state.coordinator)
    state.last_failure = None
    if coordinator is not None:
        state.coordinator = coordinator
    return moved


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%SZ", time.gmtime(at))


def _fail_alive(condition: GroupCondition, members: list[dict[str, Any]], state: WaitState, now: float) -> None:
    """Fail an Empty wait whose member stayed listed, under one member id, longer than ``condition.expiry_s``: a
    member that stopped heartbeating is gone by then, so it heartbeats (:class:`GroupNotEmpty`, naming it)."""
    if not condition.expiry_s:
        return
    alive = [m for m in members if now - float(state.listed[str(m.get("member_id"))]["since"]) >= condition.expiry_s]
    if not alive:
        return
    foreign = {str(u.get("member_id")): u.get("why") for u in condition.unaccounted}
    whose = "; ".join(f"{member_names([m])}, member id {m.get('member_id')}, listed since "
                      f"{_clock(state.listed[str(m.get('member_id'))]['since'])}"
                      + (f" (not accounted for by the platform: {foreign[str(m.get('member_id'))]})"
                         if str(m.get("member_id")) in foreign else "") for m in alive)
    error = GroupNotEmpty(
        f"A member stayed listed longer than the {condition.expiry_s:g} s within which the broker drops a member that "
        f"stopped heartbeating, so it is alive: {whose}. A process still runs as a member of the group (an instance "
        "the stop missed, another deployment, a consumer started by hand)",
        remedy="Find and stop that consumer (its client id and host are named), then rerun; a member the platform "
               "does not run is never forced out on its word.")
    error.members = alive  # type: ignore[attr-defined]  # who: the caller may name their instances
    raise error


def follow_lag(condition: GroupCondition, result: ConditionResult, state: WaitState, now: float) -> ConditionResult:
    """A lag wait's verdict over this poll and the earlier ones (``state.lag_samples``): the baseline rule, else
    the not-growing rule (:func:`~airflow_provider_kip848.kafka.rules.lag.judge_caught_up`); the verdict's
    detail names the rule that held (``rule``)."""
    sample = result.detail.get("sample") or {}
    verdict = judge_caught_up(now, sample, state.lag_samples, baseline=condition.baseline,
                              margin=LagMargin(condition.margin_fraction, condition.margin_records),
                              window_s=condition.window_s, max_partition_lag=condition.max_partition_lag,
                              unknown_in_offsets=list(result.detail.get("uncommitted") or []))
    state.lag_samples = keep_samples([*state.lag_samples, {"at": now, "offsets": sample}], now, condition.window_s)
    return ConditionResult(verdict.met, verdict.summary, verdict.detail)


def absent_group_error(group_id: str, similar: list[str]) -> GroupNotFound:
    """The error of an Empty wait on an id the cluster has not listed since the wait began."""
    return GroupNotFound(
        f"Group {show_id(group_id)} does not exist on this cluster, and has not since this wait began"
        + (f"; {describe_similar(group_id, similar)}" if similar else "")
        + ". A wait for Empty on it would pass at once while the real group keeps its members",
        remedy="Fix the group id. If the group is meant to be absent (seen earlier and deleted by the coordinator "
               "as an Empty group without committed offsets), wait with allow_absent=True.")


def _absent_or_gone(condition: GroupCondition, result: ConditionResult, state: WaitState,
                    now: float) -> ConditionResult:
    """An Empty wait's verdict on whether the group exists: seen now (remembered), gone after it was seen
    (deleted: empty), or never seen since the wait began (:class:`GroupNotFound`, unless ``allow_absent``)."""
    if result.detail.get("exists", True):
        if state.seen_at is None:
            state.seen_at = now
        return result
    if result.met:  # allow_absent
        return result
    if state.seen_at is not None:
        return ConditionResult(True, "the group no longer exists (deleted since this wait saw it)", result.detail)
    raise absent_group_error(str(result.detail.get("group_id") or "?"), list(result.detail.get("similar") or []))


def who_holds_up(  # Any: JSON of several shapes (XCom, reports)
        members: list[dict[str, Any]], assignment_epoch: int | None) -> tuple[str, list[dict[str, Any]]]:
    """Which members not reconciled hold the others up, by KIP-848's reconciliation (the coordinator's
    ``CurrentAssignmentBuilder``): a member that must give partitions up stays at its member epoch, *behind* the
    group's assignment epoch (``UNREVOKED_PARTITIONS``), until its heartbeat no longer reports them owned; a member
    whose target holds a partition another member has not released moves to the assignment epoch but does not get
    that partition (``UNRELEASED_PARTITIONS``): it *waits*. The describe gives neither state nor the partitions
    pending revocation (its assignment is what the member keeps), so the member behind the epoch is the one to look
    at, and a waiting member's missing partitions are those the member(s) behind still hold. Returns the words and
    the members behind (first) then the waiting ones."""
    unreconciled = [m for m in members if m.get("live") and m.get("reconciled") is False]
    behind = [m for m in unreconciled if assignment_epoch is not None and m.get("member_epoch") is not None
              and m["member_epoch"] < assignment_epoch]
    waiting = [m for m in unreconciled if m not in behind]
    owners = {p: m for m in members for p in (m.get("owned") or [])}
    names = ", ".join(_name(m) for m in behind)
    pending_by = (f"the member behind, {names}" if len(behind) == 1 else f"one of the members behind ({names})"
                  if behind else "no member listed (one that left holds them until its session expires)")
    parts = []
    if behind:
        parts.append(f"look at {describe_reconciling(behind, assignment_epoch)}: behind the group's assignment epoch, "
                     "it has not acknowledged giving up the partitions its new target gives to others (a rebalance "
                     "callback that does not return, a poll loop that stopped)")
    for m in waiting:
        holders: dict[str, list[str]] = {}
        for p in sorted(set(m.get("target") or []) - set(m.get("owned") or [])):
            holder = owners.get(p)
            who = pending_by if holder is None or holder is m else \
                f"the member behind, {_name(holder)}" if holder in behind else _name(holder)
            holders.setdefault(who, []).append(p)
        waits = "; ".join(f"waits for {', '.join(ps)}, held by {who}" for who, ps in holders.items())
        parts.append(f"{describe_reconciling([m], assignment_epoch)}{' ' + waits if waits else ''}")
    return "; ".join(parts), behind + waiting


def _name(member: dict[str, Any]) -> str:  # Any: JSON of several shapes (XCom, reports)
    return str(member.get("client_id") or member["member_id"])


def follow_reconciliation(condition: GroupCondition, result: ConditionResult, state: WaitState, now: float) -> None:
    """Fail a migrated wait whose member stays behind its group's assignment at one member epoch for
    ``condition.reconcile_s`` (:class:`MemberNotReconciled`): the message names the member behind the assignment
    epoch as the one to look at, with both epochs, and the others as waiting for the partitions it holds
    (:func:`who_holds_up`). A member that reconciles, leaves, or moves to another epoch (progress through
    several assignments) starts afresh."""
    behind = {m["member_id"]: m for m in result.detail.get("members") or []
              if m.get("live") and m.get("reconciled") is False}
    for gone in set(state.reconciling) - set(behind):
        del state.reconciling[gone]
    stuck = []
    for member_id, m in behind.items():
        seen = state.reconciling.get(member_id)
        if seen is None or seen.get("member_epoch") != m.get("member_epoch"):
            state.reconciling[member_id] = seen = {"since": now, "member_epoch": m.get("member_epoch")}
        if now - float(seen["since"]) >= condition.reconcile_s:
            stuck.append(m)
    if stuck:
        words, ordered = who_holds_up(list(result.detail.get("members") or []), result.detail.get("assignment_epoch"))
        error = MemberNotReconciled(
            f"Not reconciled for {condition.reconcile_s:g} s or more at the same member epoch: {words}; the group is "
            f"{result.detail.get('state')} at group epoch {result.detail.get('group_epoch')}")
        error.members = ordered  # type: ignore[attr-defined]  # who (behind first): the caller may name instances
        raise error


def follow_liveness(condition: GroupCondition, result: ConditionResult, state: WaitState,
                    now: float) -> ConditionResult:
    """A migrated verdict that holds only when every listed live member has proven it is alive.

    The coordinator lists a member until its session times out, whether its process runs or crashed a
    second after joining. So a member counts once it either *made progress* (a committed offset of one of
    its partitions advanced since it was first seen: only a live member commits) or stayed listed, under
    the same member id, for ``liveness_s`` (the group's session timeout plus a heartbeat interval, derived
    by the caller): a member that stopped heartbeating is removed by then. Members are remembered across
    polls in ``state.members``; one that left is forgotten (a new incarnation joins with a new member id). A
    coordinator that loads the group (another node, or after a failed poll) times every session afresh, so the
    window of a member not proven yet starts again then: a crashed member stays listed a whole session past the
    failover.
    """
    members = [m for m in result.detail.get("members") or [] if m.get("live")]
    committed = result.detail.get("committed") or {}
    listed = {m["member_id"] for m in members}
    for gone in set(state.members) - listed:
        del state.members[gone]
    if _sessions_restarted(result, state):  # a member not proven yet: its window starts with the new session timer
        for record in state.members.values():
            if now - float(record["since"]) < condition.liveness_s:
                record["since"] = now
    proven_by: dict[str, str] = {}
    for m in members:
        record = state.members.setdefault(
            m["member_id"], {"since": now, "client_id": m.get("client_id"), "host": m.get("host"),
                             "instance_id": m.get("instance_id"),
                             "offsets": {tp: committed.get(tp) for tp in m.get("partitions") or []}})
        held = m.get("partitions") or []
        # a partition it no longer holds is forgotten: if it comes back, its progress counts from then
        record["offsets"] = {tp: record["offsets"][tp] if tp in record["offsets"] else committed.get(tp)
                             for tp in held}
        starts = record["offsets"]
        if any(committed.get(tp) is not None and (starts.get(tp) is None or committed[tp] > starts[tp])
               for tp in m.get("partitions") or []):  # its partitions now: a partition it handed over proves nothing
            proven_by[m["member_id"]] = "progress"
        elif now - float(record["since"]) >= condition.liveness_s:
            proven_by[m["member_id"]] = "window"
    unproven = [state.members[mid] for mid in listed if mid not in proven_by]
    detail = {**result.detail, "proven": proven_by,
              "unproven": [{k: v for k, v in r.items() if k != "offsets"} for r in unproven]}
    if not result.met:
        return ConditionResult(False, result.summary, detail)
    if unproven:
        waits = ", ".join(f"{r.get('client_id') or '?'} ({now - float(r['since']):.1f} of {condition.liveness_s:g} s)"
                          for r in unproven)
        return ConditionResult(False, f"{result.summary}; not yet proven alive: {waits}", detail)
    by_progress = sum(1 for v in proven_by.values() if v == "progress")
    return ConditionResult(True, f"{result.summary}; every member proven alive ({by_progress} by progress, "
                                 f"{len(proven_by) - by_progress} through the {condition.liveness_s:g} s window)",
                           detail)


def follow_failure(exc: BaseException, state: WaitState, now: float, unavailable_limit_s: float) -> None:
    """Decide on a failed poll: return to poll again, or raise.

    Non-retriable errors are raised. A coordinator that stays unavailable (a partition that never
    loads) is raised once it has failed for ``unavailable_limit_s`` seconds in a row; other
    retriable errors (a broker restarting) are ridden out until the wait's own timeout.
    """
    if not is_retriable(exc):
        raise exc
    state.last_failure = now
    if isinstance(exc, CoordinatorUnavailable):
        if state.unavailable_since is None:
            state.unavailable_since = now
        if now - state.unavailable_since >= unavailable_limit_s:
            raise CoordinatorUnavailable(
                f"{exc.what}; it has been unavailable for {now - state.unavailable_since:.0f} s in a row "
                f"(limit {unavailable_limit_s:g} s)",
                remedy=exc.remedy, group_id=exc.group_id, partition=exc.partition, leader=exc.leader,
                error=exc.error) from exc
    else:
        state.unavailable_since = None


# -- several conditions in a row, for several groups (one trigger follows an application's move) ---------


def staged_wait(group_id: str, conditions: list[tuple[str, GroupCondition, float]], *, started: float,
                wait: dict[str, Any] | None = None) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
    """One group's entry of the ``waits`` of ``triggers.move.KafkaMoveTrigger``: its ``(step, condition, timeout_s)`` in
    order, the first starting at ``started`` (epoch s); ``wait`` the first condition's memory so far."""
    return {"group_id": group_id, "position": 0, "step_started": started, "wait": dict(wait or {}), "met": [],
            "steps": [{"step": step, "condition": condition.to_dict(), "timeout_s": float(timeout_s)}
                      for step, condition, timeout_s in conditions]}


def pending_condition(entry: dict[str, Any]) -> dict[str, Any] | None:  # Any: JSON of several shapes (XCom, reports)
    """The condition a group's entry waits for now (None: it passed all of them)."""
    steps = entry["steps"]
    return steps[entry["position"]] if entry["position"] < len(steps) else None


def advance_staged(entry: dict[str, Any], evaluate: Callable[[str, GroupCondition], ConditionResult],
                   # Any: JSON of several shapes (XCom, reports)
                   unavailable_limit_s: float, log: TaskLog, now: Callable[[], float]) -> str | Exception:
    """Poll ``entry``'s group (a :func:`staged_wait`) through as many of its conditions as hold now, with
    ``evaluate(group_id, condition)`` (the cluster's facts). Each condition that holds is appended to the
    entry's ``met`` (``{step, started_at, ended_at, summary}``) and the next one starts at once, with a fresh
    memory. Returns ``"waiting"`` (a condition does not hold yet, or all did), ``"broken"`` (a retriable
    failure: poll again, with a new client) or the fatal error that ends the wait (not raised)."""
    while (spec := pending_condition(entry)) is not None:
        condition = GroupCondition.from_dict(spec["condition"])
        state = WaitState.from_dict(entry["wait"])
        try:
            result = follow(condition, evaluate(entry["group_id"], condition), state, now())
        except Exception as exc:  # noqa: BLE001 - decided by follow_failure
            try:
                follow_failure(exc, state, now(), unavailable_limit_s)
            except Exception as fatal:  # noqa: BLE001 - handed back: it ends the wait
                entry["wait"] = state.to_dict()
                return fatal
            entry["wait"] = state.to_dict()
            log.warning("Group %s: %s Polling again with a new client.", entry["group_id"], exc)
            return "broken"
        entry["wait"] = state.to_dict()
        if not result.met:
            if result.summary != entry.get("last"):
                log.info("Group %s: %s (waiting for %s: %s)", entry["group_id"], result.summary, spec["step"],
                         condition.describe())
            entry["last"] = result.summary
            return "waiting"
        at = now()
        entry["met"].append({"step": spec["step"], "started_at": entry["step_started"], "ended_at": at,
                             "summary": result.summary})
        log.info("Group %s: %s holds (%s)", entry["group_id"], spec["step"], result.summary)
        entry.update(position=entry["position"] + 1, step_started=at, wait={}, last="")
    return "waiting"

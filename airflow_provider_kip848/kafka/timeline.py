"""A group's timeline through a migration: what the operator is asked after every change window.

A migration's cost is the time its application stops processing, and how long
the group takes to settle on the new protocol. The broker tells both if the
group is watched through the change: each :class:`GroupObservation` is one look
(type, state, live members by protocol, group epoch, committed offsets and log
ends per partition); a :class:`Timeline` folds the looks as they come, keeping
only what the report needs, so a watch of an hour over hundreds of partitions
stays small enough to travel in a trigger event:

* **per-partition processing gaps** (:class:`GapTracker`): the longest time a
  partition's committed offset did not move *while records were waiting* on it
  (lag > 0). A partition with nothing to read is not stalled. This is the gap
  measured from committed offsets, for applications without an output topic;
  the validation job measures it from output records where there is one.
* **settling**: when the first member left, when the group was first Empty,
  and when it was first Stable on the target type with every member on the
  target protocol.
* **rebalances seen**: consumer and streams groups count group-epoch bumps
  (each is one new target assignment); classic groups have no epoch in
  DescribeGroups, so entries into PreparingRebalance are counted, a lower
  bound (a rebalance shorter than the look interval is missed, and the
  summary says so); a change of group type counts once.
* a downsampled **series** for the plot (members by protocol, lag, committed
  records per second, state).

A look that failed (coordinator moving, broker paused) is kept as *unknown*:
it never counts as a state, a member count or progress. A gap that spans
unknown looks is reported with the resolution the known looks allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.model.groups import GroupState, GroupType

#: at most this many points per plotted series (older points are merged, pairwise)
MAX_SERIES_POINTS = 600
#: group states that mean "a rebalance is in progress" for a classic group
_CLASSIC_REBALANCING = (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


@dataclass(frozen=True)
class GroupObservation:
    """One look at a group. ``error`` set means the look failed: every other field is then unknown.

    ``members`` counts live members by protocol (``classic``, ``consumer``,
    ``streams``); ``committed`` and ``log_end`` are keyed ``topic:partition``.
    A partition missing from ``log_end`` has an unknown lag.
    """

    at: float
    type: GroupType | None = None
    state: GroupState | None = None
    members: Mapping[str, int] = field(default_factory=dict)
    group_epoch: int | None = None
    committed: Mapping[str, int] = field(default_factory=dict)
    log_end: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None

    @property
    def known(self) -> bool:
        return self.error is None and self.type is not None and self.state is not None

    @property
    def member_count(self) -> int:
        return sum(self.members.values())

    @classmethod
    def unknown(cls, at: float, error: str) -> GroupObservation:
        return cls(at=at, error=error or "unknown")


@dataclass
class PartitionGap:
    """A partition's longest stall: from its last progress (or the moment records started waiting) to its next
    progress. ``open`` when the partition had not progressed again by the last look (``ended_at`` is then that
    look, and the gap is at least ``seconds``)."""

    partition: str
    seconds: float
    started_at: float
    ended_at: float
    open: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "seconds": round(self.seconds, 3), "started_at": self.started_at,
                "ended_at": self.ended_at, "open": self.open}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionGap:
        return cls(partition=str(data["partition"]), seconds=float(data["seconds"]),
                   started_at=float(data["started_at"]), ended_at=float(data["ended_at"]),
                   open=bool(data.get("open", False)))


@dataclass
class _PartitionState:
    committed: int | None = None
    #: since when records have been waiting without progress (None: caught up, or never seen waiting)
    waiting_since: float | None = None
    longest: PartitionGap | None = None


class GapTracker:
    """Per partition, the longest interval without committed progress while records waited.

    Fed known looks in time order. A stall starts at the last look that saw the
    committed offset move, or at the first look that saw records waiting after
    the partition was caught up; it ends at the first look that sees the offset
    move again. Looks are discrete: the true gap lies within one look interval
    of the measured one (``resolution_s`` of the summary).
    """

    def __init__(self) -> None:
        self._parts: dict[str, _PartitionState] = {}
        self._last_at: float | None = None

    def add(self, obs: GroupObservation) -> None:
        if not obs.known:
            return
        for tp, committed in obs.committed.items():
            part = self._parts.setdefault(tp, _PartitionState())
            end = obs.log_end.get(tp)
            waiting = end is not None and end > committed
            if part.committed is not None and committed < part.committed:
                # moved back (a reset or restore): not processing; start again from here
                part.waiting_since = obs.at if waiting else None
                part.committed = committed
                continue
            moved = part.committed is not None and committed > part.committed
            if moved and part.waiting_since is not None:
                self._close(tp, part, obs.at)
            if moved or part.committed is None:
                part.waiting_since = obs.at if waiting else None
            elif waiting and part.waiting_since is None:
                part.waiting_since = obs.at
            elif not waiting:
                part.waiting_since = None
            part.committed = committed
        self._last_at = obs.at

    @staticmethod
    def _close(tp: str, part: _PartitionState, at: float, *, still_open: bool = False) -> None:
        since = part.waiting_since
        if since is None:
            return
        seconds = at - since
        if part.longest is None or seconds > part.longest.seconds:
            part.longest = PartitionGap(tp, seconds, since, at, open=still_open)

    def gaps(self) -> dict[str, PartitionGap]:
        """Each partition's longest stall, counting one still open at the last look."""
        out: dict[str, PartitionGap] = {}
        for tp, part in self._parts.items():
            probe = _PartitionState(part.committed, part.waiting_since, part.longest)
            if probe.waiting_since is not None and self._last_at is not None:
                self._close(tp, probe, self._last_at, still_open=True)
            if probe.longest is not None:
                out[tp] = probe.longest
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"last_at": self._last_at, "partitions": {
            tp: {"committed": p.committed, "waiting_since": p.waiting_since,
                 "longest": None if p.longest is None else p.longest.to_dict()}
            for tp, p in self._parts.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GapTracker:
        tracker = cls()
        tracker._last_at = data.get("last_at")
        for tp, p in (data.get("partitions") or {}).items():
            longest = p.get("longest")
            tracker._parts[tp] = _PartitionState(p.get("committed"), p.get("waiting_since"),
                                                 None if longest is None else PartitionGap.from_dict(longest))
        return tracker


@dataclass
class TimelineSummary:
    """What a migration report shows about the group. Times are epoch seconds; None is "not seen"."""

    looks: int
    unknown_looks: int
    first_at: float | None
    last_at: float | None
    #: the longest interval between two consecutive known looks (the precision of every time below)
    resolution_s: float | None
    first_member_left_at: float | None
    empty_at: float | None
    stable_on_target_at: float | None
    #: first member left -> Stable on the target with every member on the target protocol
    settle_s: float | None
    rebalances_seen: int
    #: True when the count is exact (group epochs of consumer/streams groups); False for classic groups,
    #: whose rebalances are counted from states seen (a lower bound)
    rebalances_exact: bool
    type_changes: int
    longest_gap: PartitionGap | None
    gaps: dict[str, PartitionGap]

    def to_dict(self) -> dict[str, Any]:
        return {
            "looks": self.looks, "unknown_looks": self.unknown_looks, "first_at": self.first_at,
            "last_at": self.last_at, "resolution_s": _round(self.resolution_s),
            "first_member_left_at": self.first_member_left_at, "empty_at": self.empty_at,
            "stable_on_target_at": self.stable_on_target_at, "settle_s": _round(self.settle_s),
            "rebalances_seen": self.rebalances_seen, "rebalances_exact": self.rebalances_exact,
            "type_changes": self.type_changes,
            "longest_gap": None if self.longest_gap is None else self.longest_gap.to_dict(),
            "gaps": {tp: g.to_dict() for tp, g in sorted(self.gaps.items())},
        }


class Timeline:
    """Folds looks at one group (in time order) into a :class:`TimelineSummary` and a plot series.

    ``target_type`` is the type the migration moves the group to (``consumer``
    or ``streams``; ``classic`` for a way back): "settled" means Stable on that
    type with at least one member and every member on its protocol (and, when
    ``expected_members`` is given, at least that many).
    """

    def __init__(self, *, target_type: GroupType, expected_members: int | None = None) -> None:
        if target_type not in (GroupType.CLASSIC, GroupType.CONSUMER, GroupType.STREAMS):
            raise InvalidArgument(f"target_type must be classic, consumer or streams, not {target_type!r}.")
        if expected_members is not None and expected_members < 1:
            raise InvalidArgument(f"expected_members must be at least 1, not {expected_members!r}.")
        self.target_type = target_type
        self.expected_members = expected_members
        self.gap_tracker = GapTracker()
        self.looks = 0
        self.unknown_looks = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.resolution_s: float | None = None
        self.first_member_left_at: float | None = None
        self.empty_at: float | None = None
        self.stable_on_target_at: float | None = None
        self.rebalances_seen = 0
        self.rebalances_exact = True
        self.type_changes = 0
        self._last_known: dict[str, Any] | None = None
        #: plotted points: [at, members by protocol, lag, committed total, state]
        self.points: list[list[Any]] = []

    # -- folding --------------------------------------------------------------------------------

    def add(self, obs: GroupObservation) -> None:
        if self.last_at is not None and obs.at < self.last_at:
            raise InvalidArgument(f"Looks must come in time order ({obs.at} after {self.last_at}).")
        self.looks += 1
        self.first_at = obs.at if self.first_at is None else self.first_at
        self.last_at = obs.at
        if not obs.known:
            self.unknown_looks += 1
            self._point(obs.at, None, None, None, None)
            return
        assert obs.type is not None and obs.state is not None  # known
        last = self._last_known
        if last is not None:
            interval = obs.at - last["at"]
            self.resolution_s = interval if self.resolution_s is None else max(self.resolution_s, interval)
            self._count_rebalances(last, obs)
            if self.first_member_left_at is None and obs.member_count < last["members"]:
                self.first_member_left_at = obs.at
        if self.empty_at is None and obs.member_count == 0 and self.first_member_left_at is not None:
            self.empty_at = obs.at
        if self.stable_on_target_at is None and self.first_member_left_at is not None and self._settled(obs):
            self.stable_on_target_at = obs.at
        self.gap_tracker.add(obs)
        lag = _lag(obs)
        self._point(obs.at, dict(obs.members), lag, sum(obs.committed.values()) if obs.committed else None,
                    obs.state.value)
        settled_on = obs.type.value if _all_on_own_protocol(obs) else None
        since = (last.get("settled_since") if last is not None and last.get("settled_on") == settled_on
                 and settled_on is not None else (obs.at if settled_on is not None else None))
        self._last_known = {"at": obs.at, "type": obs.type.value, "state": obs.state.value,
                            "epoch": obs.group_epoch, "members": obs.member_count,
                            "settled": self._settled(obs), "settled_on": settled_on, "settled_since": since}

    def _count_rebalances(self, last: Mapping[str, Any], obs: GroupObservation) -> None:
        assert obs.type is not None
        if obs.type.value != last["type"]:
            # a converted group starts over: a consumer or streams group's epoch counts its rebalances since
            # the conversion (at least the conversion itself); a classic one has no epoch
            self.type_changes += 1
            self.rebalances_seen += max(1, obs.group_epoch or 0) if obs.type is not GroupType.CLASSIC else 1
            if obs.type is GroupType.CLASSIC:
                self.rebalances_exact = False
            return
        if obs.type is GroupType.CLASSIC:
            self.rebalances_exact = False
            entered = obs.state in _CLASSIC_REBALANCING and GroupState(last["state"]) not in _CLASSIC_REBALANCING
            self.rebalances_seen += int(entered)
        elif obs.group_epoch is not None and last["epoch"] is not None and obs.group_epoch > last["epoch"]:
            self.rebalances_seen += obs.group_epoch - last["epoch"]

    def _settled(self, obs: GroupObservation) -> bool:
        on_target = obs.members.get(self.target_type.value, 0)
        return (obs.type is self.target_type and obs.state is GroupState.STABLE and on_target > 0
                and on_target == obs.member_count
                and (self.expected_members is None or on_target >= self.expected_members))

    def _point(self, at: float, members: dict[str, int] | None, lag: int | None, committed: int | None,
               state: str | None) -> None:
        self.points.append([at, members, lag, committed, state])
        if len(self.points) > MAX_SERIES_POINTS:
            self.points = _halve(self.points)

    # -- results --------------------------------------------------------------------------------

    def last_state_is_stable_on_target(self) -> bool:
        """True when the latest known look saw the group settled on the target (see the class docstring)."""
        return bool(self._last_known and self._last_known.get("settled"))

    def settled_on(self) -> tuple[str | None, float | None]:
        """The type the latest known look saw the group Stable on, with every member on its protocol, and since
        when (consecutive known looks); (None, None) when it was not."""
        last = self._last_known or {}
        return last.get("settled_on"), last.get("settled_since")

    def summary(self) -> TimelineSummary:
        gaps = self.gap_tracker.gaps()
        longest = max(gaps.values(), key=lambda g: g.seconds, default=None)
        settle = (None if self.first_member_left_at is None or self.stable_on_target_at is None
                  else self.stable_on_target_at - self.first_member_left_at)
        return TimelineSummary(
            looks=self.looks, unknown_looks=self.unknown_looks, first_at=self.first_at, last_at=self.last_at,
            resolution_s=self.resolution_s, first_member_left_at=self.first_member_left_at,
            empty_at=self.empty_at, stable_on_target_at=self.stable_on_target_at, settle_s=settle,
            rebalances_seen=self.rebalances_seen, rebalances_exact=self.rebalances_exact,
            type_changes=self.type_changes, longest_gap=longest, gaps=gaps)

    def series(self) -> dict[str, list[tuple[float, float | None]]]:
        """Plot series over seconds since the first look: live members per protocol, total lag, committed
        records per second. An unknown look is a break in every line (never drawn as 0)."""
        if not self.points:
            return {}
        t0 = self.points[0][0]
        protocols = sorted({p for pt in self.points if pt[1] for p in pt[1]})
        out: dict[str, list[tuple[float, float | None]]] = {f"{p} members": [] for p in protocols}
        out["lag (records)"] = []
        out["committed records/s"] = []
        previous: list[Any] | None = None
        for at, members, lag, committed, _state in self.points:
            x = at - t0
            for p in protocols:
                out[f"{p} members"].append((x, None if members is None else float(members.get(p, 0))))
            out["lag (records)"].append((x, None if lag is None else float(lag)))
            rate = None
            if committed is not None and previous is not None and previous[3] is not None and at > previous[0]:
                rate = max(0.0, (committed - previous[3]) / (at - previous[0]))
            out["committed records/s"].append((x, rate))
            previous = [at, members, lag, committed] if committed is not None else None
        return out

    def states(self) -> list[tuple[float, str | None]]:
        """(seconds since the first look, state) at each plotted point; None for an unknown look."""
        if not self.points:
            return []
        t0 = self.points[0][0]
        return [(pt[0] - t0, pt[4]) for pt in self.points]

    # -- serialisation (a trigger hands its timeline over between polls and in its event) -------

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_type": self.target_type.value, "expected_members": self.expected_members,
            "looks": self.looks, "unknown_looks": self.unknown_looks, "first_at": self.first_at,
            "last_at": self.last_at, "resolution_s": self.resolution_s,
            "first_member_left_at": self.first_member_left_at, "empty_at": self.empty_at,
            "stable_on_target_at": self.stable_on_target_at, "rebalances_seen": self.rebalances_seen,
            "rebalances_exact": self.rebalances_exact, "type_changes": self.type_changes,
            "last_known": self._last_known, "points": self.points, "gaps": self.gap_tracker.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Timeline:
        try:
            timeline = cls(target_type=GroupType(data["target_type"]), expected_members=data.get("expected_members"))
            for name in ("looks", "unknown_looks", "rebalances_seen", "type_changes"):
                setattr(timeline, name, int(data[name]))
            for name in ("first_at", "last_at", "resolution_s", "first_member_left_at", "empty_at",
                         "stable_on_target_at"):
                value = data.get(name)
                setattr(timeline, name, None if value is None else float(value))
            timeline.rebalances_exact = bool(data["rebalances_exact"])
            timeline._last_known = data.get("last_known")
            timeline.points = [list(p) for p in data.get("points") or []]
            timeline.gap_tracker = GapTracker.from_dict(data.get("gaps") or {})
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"Not a group timeline: {exc!r}.") from exc
        return timeline


def fold(looks: Iterable[GroupObservation], *, target_type: GroupType,
         expected_members: int | None = None) -> Timeline:
    """A timeline of ``looks`` (in time order)."""
    timeline = Timeline(target_type=target_type, expected_members=expected_members)
    for obs in looks:
        timeline.add(obs)
    return timeline


def _all_on_own_protocol(obs: GroupObservation) -> bool:
    """Stable, with members, every one of them on the protocol of the group's type."""
    assert obs.type is not None
    on = obs.members.get(obs.type.value, 0)
    return obs.state is GroupState.STABLE and on > 0 and on == obs.member_count


def _lag(obs: GroupObservation) -> int | None:
    """Total lag over the committed partitions; None when a committed partition's log end is unknown."""
    total = 0
    for tp, committed in obs.committed.items():
        end = obs.log_end.get(tp)
        if end is None:
            return None
        total += max(0, end - committed)
    return total


def _halve(points: list[list[Any]]) -> list[list[Any]]:
    """Every other point of the older half, so the series stays bounded and the recent half keeps full detail;
    an unknown point is kept (a gap in knowledge is never smoothed away)."""
    half = len(points) // 2
    older = [p for i, p in enumerate(points[:half]) if i % 2 == 0 or p[1] is None]
    return older + points[half:]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)

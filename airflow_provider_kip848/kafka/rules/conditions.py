"""What a migration waits for, as data: a group condition that sensors poke and triggers poll.

A condition is a small JSON-able value (so a trigger can be serialised and
resumed by the triggerer) evaluated against the cluster by one function,
:func:`judge`, over facts that :func:`~airflow_provider_kip848.kafka.api.evaluate_condition`
reads; both the non-deferrable ``poke`` and the deferrable trigger call that.
There is one source of truth for "is the group there yet".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.kafka.model import (
    GroupDescription,
    GroupOffsets,
    GroupState,
    GroupType,
    MemberProtocol,
)

KINDS = ("state", "type", "migrated", "lag", "empty")


@dataclass(frozen=True)
class GroupCondition:
    """``kind`` and its arguments:

    * ``state``: the group is in one of ``states`` (``Empty``, ``Stable``, ...; ``Dead`` also
      matches a group that does not exist);
    * ``type``: the group's type is ``group_type`` (classic, consumer, streams);
    * ``migrated``: the group is of type ``group_type`` (consumer or streams), has at least
      ``min_members`` members and none of them still speaks the classic protocol;
    * ``lag``: the group's total lag is at most ``max_lag`` (and no partition above
      ``max_partition_lag`` when given);
    * ``empty``: the group has no members (a group that does not exist is empty).
    """

    kind: str
    states: tuple[GroupState, ...] = ()
    group_type: str | None = None
    min_members: int = 1
    max_lag: int | None = None
    max_partition_lag: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidArgument(f"unknown condition kind {self.kind!r}", remedy=f"Use one of {', '.join(KINDS)}.")
        object.__setattr__(self, "states", tuple(GroupState.parse(s, strict=True) for s in self.states))
        if self.kind == "state" and not self.states:
            raise InvalidArgument("a state condition needs at least one state", remedy="Pass e.g. states=['Empty'].")
        if self.kind in ("type", "migrated") and GroupType.parse(self.group_type) is GroupType.UNKNOWN:
            raise InvalidArgument(f"group_type {self.group_type!r} is not classic, consumer, streams or share")
        if self.kind == "lag" and self.max_lag is None:
            raise InvalidArgument("a lag condition needs max_lag", remedy="Pass max_lag (e.g. 0).")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "states": [s.value for s in self.states]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupCondition:
        return cls(**{**data, "states": tuple(data.get("states") or ())})

    def describe(self) -> str:
        if self.kind == "state":
            return f"state in {{{', '.join(self.states)}}}"
        if self.kind == "type":
            return f"type {self.group_type}"
        if self.kind == "migrated":
            return f"type {self.group_type} with no classic member left"
        if self.kind == "lag":
            return f"total lag <= {self.max_lag}"
        return "no members"


@dataclass(frozen=True)
class ConditionResult:
    met: bool
    summary: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(condition: GroupCondition, *, description: GroupDescription | None = None,
          offsets: GroupOffsets | None = None) -> ConditionResult:
    """Whether ``condition`` holds: over ``offsets`` for a lag condition, else over the group's
    ``description`` (None: the group does not exist)."""
    kind = condition.kind
    if kind == "lag":
        if offsets is None:
            raise InvalidArgument("a lag condition is judged over the group's offsets")
        worst = max((p.lag or 0 for p in offsets.partitions), default=0)
        max_lag = condition.max_lag if condition.max_lag is not None else 0
        met = offsets.total_lag <= max_lag and (
            condition.max_partition_lag is None or worst <= condition.max_partition_lag)
        return ConditionResult(met, f"total lag {offsets.total_lag}, worst partition {worst}",
                               {"total_lag": offsets.total_lag, "max_partition_lag": worst,
                                "lag": {f"{p.topic}:{p.partition}": p.lag for p in offsets.partitions}})
    desc = description
    if desc is None:
        met = kind == "empty" or (kind == "state" and GroupState.DEAD in condition.states)
        return ConditionResult(met, "the group does not exist", {"exists": False})
    detail = _detail(desc)
    if kind == "state":
        return ConditionResult(desc.state in condition.states, f"state {desc.state.value}", detail)
    if kind == "empty":
        return ConditionResult(desc.is_empty, f"{len(desc.members)} member(s), state {desc.state.value}", detail)
    if kind == "type":
        return ConditionResult(desc.type.value == condition.group_type, f"type {desc.type.value}", detail)
    # migrated
    classic = [m for m in desc.members if m.protocol is MemberProtocol.CLASSIC]
    met = (desc.type.value == condition.group_type and not classic
           and len(desc.members) >= condition.min_members)
    upgraded = len(desc.members) - len(classic)
    return ConditionResult(
        met, f"type {desc.type.value}, {upgraded} of {len(desc.members)} member(s) on the new protocol", detail)


def _detail(desc: GroupDescription) -> dict[str, Any]:
    members = [
        {"member_id": m.member_id, "client_id": m.client_id, "protocol": m.protocol.value}
        for m in desc.members
    ]
    return {"exists": True, "type": desc.type.value, "state": desc.state.value, "members": members,
            "classic_members": sum(m["protocol"] == "classic" for m in members)}


def is_retriable(exc: BaseException) -> bool:
    """Errors a waiting sensor should ride out (a broker restarting), not fail on."""
    return isinstance(exc, Kip848Error) and exc.retriable

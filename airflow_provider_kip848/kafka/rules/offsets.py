"""Rules for changing committed offsets, shared by both backends.

Committed offsets are the only state that survives a protocol switch, so a
restore must never race live members (the broker would refuse, or a member
would immediately commit over it) and must never point outside the log (the
consumer would reset by ``auto.offset.reset`` and silently skip or replay).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from airflow_provider_kip848.kafka.errors import (
    GroupNotEmpty,
    InvalidArgument,
    InvalidOffset,
    OffsetsNotConfirmed,
    WrongGroupType,
)
from airflow_provider_kip848.kafka.model import (
    GroupDescription,
    GroupOffsets,
    GroupType,
    OffsetSnapshot,
    TopicPartition,
)

#: why the CLI backend changes no streams group's offsets (seen on Kafka 4.3.1): ``kafka-consumer-groups
#: --reset-offsets`` (and ``--delete-offsets``) change a streams group's offsets without refusing it (KAFKA-20454),
#: and ``kafka-streams-groups --describe --state`` answers "has no active members" for an empty streams group, so
#: the tools cannot confirm the group is empty before a change (the native backend can)
STREAMS_OFFSETS_BY_TOOLS = (
    "the CLI backend does not change a streams group's offsets: kafka-consumer-groups --reset-offsets would change "
    "them without refusing a streams group (KAFKA-20454), and kafka-streams-groups cannot describe an empty streams "
    "group (\"has no active members\") to confirm that no member would commit over the change")
STREAMS_OFFSETS_REMEDY = ("Use the native backend (backend='native'), which commits a streams group's offsets while "
                          "it is empty, as the restore tasks do.")


def streams_group_refusal(group_id: str, why: str, remedy: str) -> WrongGroupType:
    """The error refusing an action on a streams group, saying ``why`` (what a backend cannot do to one: LeaveGroup,
    which the broker rejects; an offsets change through the tools)."""
    return WrongGroupType(f"Group {group_id!r} is a streams group: {why}.", remedy=remedy, actual=GroupType.STREAMS)


def refuse_offsets_change_by_tools(group_id: str, group_type: GroupType | None) -> None:
    """The CLI backend's refusal of an offsets change on a streams group (:data:`STREAMS_OFFSETS_BY_TOOLS`);
    ``group_type`` None: no such group (a commit creates a classic one)."""
    if group_type is GroupType.STREAMS:
        raise streams_group_refusal(group_id, STREAMS_OFFSETS_BY_TOOLS, STREAMS_OFFSETS_REMEDY)


def require_empty(desc: GroupDescription) -> None:
    """Refuse a group with members, naming each (client id, host) so the operator finds the instance."""
    if not desc.is_empty:
        names = ", ".join(f"{m.client_id or m.member_id} on {getattr(m, 'host', '') or '?'}" for m in desc.members[:10])
        raise GroupNotEmpty(
            f"Group {desc.group_id!r} has {len(desc.members)} active member(s) ({desc.state}): {names}. Committed "
            "offsets can only be changed while it is empty (and a new application started only then)."
        )


def require_offsets(offsets: object) -> dict[TopicPartition, int]:
    """``offsets`` as ``{TopicPartition: int}``; anything else (a string offset, a bare dict of text) is refused."""
    if not isinstance(offsets, Mapping):
        raise InvalidArgument(f"Offsets must be a mapping of topic-partition to offset, not {type(offsets).__name__}.")
    out = {}
    for tp, offset in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise InvalidArgument(f"{tp!r} is not a TopicPartition.",
                                  remedy="Key offsets by TopicPartition(topic, partition).")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidOffset(f"Offset {offset!r} for {tp} is not an integer.",
                                remedy="Pass each offset as an integer between the partition's log start and log end.")
        out[tp] = offset
    return out


def require_inside_log(
    offsets: Mapping[TopicPartition, int], bounds: Mapping[TopicPartition, tuple[int | None, int | None]]
) -> None:
    """Every offset within [log start, log end] of its partition (end included: "consume from the next record")."""
    for tp, offset in sorted(offsets.items()):
        lo, hi = bounds[tp]
        if (lo is not None and offset < lo) or (hi is not None and offset > hi):
            raise InvalidOffset(f"Offset {offset} for {tp} is outside the log ({lo}..{hi}).")


def require_read_back(group_id: str, written: Mapping[TopicPartition, int], after: GroupOffsets) -> None:
    """Every written offset shows in ``after`` (read after the write); :class:`OffsetsNotConfirmed` if not.

    Why: an acknowledged write is not yet a fact the next reader sees (a coordinator failing over right
    after it). "Restored" is only reported once a fresh read shows every partition at its offset.
    """
    now = after.committed
    missing = {str(tp): (offset, now.get(tp)) for tp, offset in sorted(written.items()) if now.get(tp) != offset}
    if missing:
        shown = ", ".join(f"{tp} wrote {o} reads {r}" for tp, (o, r) in list(missing.items())[:10])
        raise OffsetsNotConfirmed(
            f"Offsets written to group {group_id!r} do not read back on {len(missing)} partition(s): {shown}.")


# -- snapshots -------------------------------------------------------------------------

def snapshot_from(cluster_id: str, desc: GroupDescription, offsets: GroupOffsets,
                  taken_at: datetime | None = None) -> OffsetSnapshot:
    """A snapshot of ``offsets`` with the group's type and state, tied to ``cluster_id``."""
    return OffsetSnapshot(
        cluster_id=cluster_id,
        group_id=offsets.group_id,
        group_type=desc.type.value,
        group_state=desc.state.value,
        taken_at=(taken_at or datetime.now(UTC)).isoformat(timespec="seconds"),
        partitions=offsets.partitions,
    )


# -- comparing and restoring ---------------------------------------------------------------

STATUSES = ("equal", "advanced", "regressed", "missing", "new")


@dataclass(frozen=True)
class PartitionComparison:
    topic: str
    partition: int
    snapshot: int | None
    current: int | None
    status: str  # equal | advanced | regressed | missing (committed before, not now) | new


@dataclass(frozen=True)
class OffsetComparison:
    group_id: str
    partitions: tuple[PartitionComparison, ...]

    def by_status(self, status: str) -> tuple[PartitionComparison, ...]:
        return tuple(p for p in self.partitions if p.status == status)

    @property
    def counts(self) -> dict[str, int]:
        return {s: len(self.by_status(s)) for s in STATUSES}

    def lost(self) -> tuple[PartitionComparison, ...]:
        """Partitions whose progress is gone: the commit disappeared or moved backwards."""
        return self.by_status("regressed") + self.by_status("missing")

    def to_dict(self) -> dict[str, object]:
        return {
            "group_id": self.group_id,
            "counts": self.counts,
            "preserved": not self.lost(),
            "partitions": [asdict(p) for p in self.partitions],
        }


def compare(snapshot: OffsetSnapshot, current: GroupOffsets) -> OffsetComparison:
    before, now = snapshot.committed, current.committed
    rows = []
    for tp in sorted(set(before) | set(now)):
        b, n = before.get(tp), now.get(tp)
        if b is None:
            status = "new"
        elif n is None:
            status = "missing"
        elif n == b:
            status = "equal"
        elif n > b:
            status = "advanced"
        else:
            status = "regressed"
        rows.append(PartitionComparison(tp.topic, tp.partition, b, n, status))
    return OffsetComparison(current.group_id, tuple(rows))


def restore_plan(comparison: OffsetComparison) -> dict[TopicPartition, int]:
    """Offsets to commit so that every lost partition is back at its snapshot (nothing else is touched)."""
    return {TopicPartition(p.topic, p.partition): p.snapshot for p in comparison.lost() if p.snapshot is not None}


def topics_read(current: GroupOffsets) -> frozenset[str]:
    """The topics a group reads now, as far as the cluster shows it: those of its committed offsets and of its
    members' assignments (``GroupOffsets`` lists assigned partitions without a commit too).

    A restore runs on an Empty group, which has no subscription: what it reads is what it has committed
    offsets on. A group with none at all (every offset lost, or the group gone) shows nothing: empty.
    """
    return frozenset(p.topic for p in current.partitions)


def unread_topics(plan: Mapping[TopicPartition, int], reading: frozenset[str]) -> tuple[str, ...]:
    """The topics of a restore ``plan`` the group does not read (``reading``, from :func:`topics_read`): offsets
    committed there would be consumed by nobody. When the group shows no topic at all (everything was lost),
    nothing can be told and nothing is called unread: the restore of a lost group puts back what it had."""
    if not reading:
        return ()
    return tuple(sorted({tp.topic for tp in plan} - reading))

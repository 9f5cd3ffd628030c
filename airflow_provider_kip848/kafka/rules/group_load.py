"""Whether a group that came back to classic still loads: its coordinator's records replayed as Kafka replays them.

After a consumer -> classic downgrade the group's ``__consumer_offsets`` partition holds, in append order: the
classic group's ``GroupMetadata`` record(s) from before the upgrade, the upgrade's ``GroupMetadata`` tombstone
with the consumer group's records, the downgrade's tombstones of those records, and the classic group's new
``GroupMetadata``. A coordinator that loads the partition (a failover, a restart, a reassignment) replays them in
that order. Kafka 4.x before apache/kafka#23514 (open, KAFKA-21117) throws ``Group <id> is not a consumer group``
when a consumer-group record, positive or tombstone, reaches a group that is classic at that point of the replay,
and the whole partition then fails to load: every group on it answers NOT_COORDINATOR until it does.

Two verdicts come from the records, each with the offsets behind it:

* **unloadable**: the records as they stand already replay into that error: the next coordinator to load the
  partition fails (the coordinator serving it now built its state as it wrote them, so it still answers).
* **exposed**: the records replay cleanly, but the log cleaner may remove the upgrade's ``GroupMetadata``
  tombstone (a later ``GroupMetadata`` supersedes it) while a coordinator is reading the partition: it then sees
  the old classic record, no tombstone, and a consumer-group record after it, and fails. This is Kafka's own
  model of a load racing the cleaner (the "concurrent compaction" variants of
  ``GroupCoordinatorShardCompactionReplayTest``, apache/kafka#23220, whose two downgrade cases fail without
  #23514). It lasts until the cleaner has passed over those records once (the old classic record, the tombstone
  and the consumer records go in the same pass); records in the partition's active segment are never cleaned, so
  on a quiet partition that may take until ``segment.ms`` rolls it (7 days by default).
* **loads**: no consumer-group record follows a classic record of the group: nothing for the bug to meet.

Only the record types and the tombstone flags matter, so only those are judged (:class:`LoggedRecord`). Offset
commits are left out: an offset commit before any group record creates a "simple" classic group that Kafka
replaces (KAFKA-19862, KAFKA-20254), not this error. Pure: records in, verdict out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

#: ``CoordinatorRecordType`` ids (kafka-group-coordinator 4.3.1 / 4.4.0): the classic group's record
GROUP_METADATA = 2
#: the consumer group's records: ConsumerGroupMetadata (3, the group epoch: its tombstone removes the group),
#: PartitionMetadata (4), MemberMetadata (5), TargetAssignmentMetadata (6), TargetAssignmentMember (7),
#: CurrentMemberAssignment (8), RegularExpression (16)
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
#: the open fix and the bug it fixes, as the verdicts name them
FIX = "apache/kafka#23514 (KAFKA-21117, not merged: every 4.x release so far)"


class GroupLoad(StrEnum):
    """``loads``: nothing for the replay bug to meet; ``exposed``: loads as it stands, fails if a load races the
    log cleaner; ``unloadable``: the next load fails; ``unknown``: the records or the coordinator did not answer."""

    LOADS = "loads"
    EXPOSED = "exposed"
    UNLOADABLE = "unloadable"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class LoggedRecord:
    """One of the group's records in its ``__consumer_offsets`` partition: where (``offset``), which
    ``CoordinatorRecordType`` (``type``) and whether it is a tombstone."""

    offset: int
    type: int
    deleted: bool


@dataclass(frozen=True)
class LoadVerdict:
    status: GroupLoad
    evidence: str
    #: the offsets of the records behind the verdict (the classic record, the tombstone the cleaner may remove,
    #: the consumer-group record the replay fails on)
    offsets: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"status": self.status.value, "evidence": self.evidence, "offsets": list(self.offsets)}


def replay_failure(records: Sequence[LoggedRecord]) -> tuple[int, int] | None:
    """(the classic ``GroupMetadata``'s offset, the consumer-group record's offset) where Kafka's replay of
    ``records`` without #23514 throws "not a consumer group"; None when it replays cleanly.

    The replay, as ``GroupMetadataManager`` does it: a ``GroupMetadata`` makes the group classic, its tombstone
    removes a classic group; a positive consumer-group record creates the consumer group if there is none; a
    consumer-group tombstone on no group is ignored (KAFKA-17306), and the group epoch's tombstone removes it;
    any consumer-group record on a classic group throws."""
    classic_at: int | None = None
    kind: str | None = None
    for record in records:
        if record.type == GROUP_METADATA:
            if not record.deleted:
                kind, classic_at = "classic", record.offset
            elif kind == "classic":
                kind = None
        elif record.type in CONSUMER_GROUP_TYPES:
            if kind == "classic":
                assert classic_at is not None
                return classic_at, record.offset
            if not record.deleted:
                kind = "consumer"
            elif record.type == CONSUMER_GROUP_METADATA:
                kind = None
    return None


def race_failure(records: Sequence[LoggedRecord]) -> tuple[int, int, int] | None:
    """(classic record, the upgrade's tombstone the cleaner may remove, consumer-group record) offsets for a load
    racing the log cleaner: a classic ``GroupMetadata`` followed by a consumer-group record with only
    ``GroupMetadata`` tombstones in between that a later ``GroupMetadata`` supersedes (the cleaner removes a
    record whose key is written again later). None when no such triple exists."""
    last_metadata = max((r.offset for r in records if r.type == GROUP_METADATA), default=None)
    classic_at: int | None = None
    removable: int | None = None
    for record in records:
        if record.type == GROUP_METADATA:
            if not record.deleted:
                classic_at, removable = record.offset, None
            elif classic_at is not None and last_metadata is not None and record.offset < last_metadata:
                removable = record.offset  # superseded: the cleaner may take it while a load reads around it
            else:
                classic_at = removable = None  # a tombstone that stays: the replay removes the classic group
        elif record.type in CONSUMER_GROUP_TYPES and classic_at is not None and removable is not None:
            return classic_at, removable, record.offset
    return None


def judge_group_load(group_id: str, partition: int, records: Sequence[LoggedRecord]) -> LoadVerdict:
    """The verdict on ``group_id``'s records (all of them, in append order) in ``__consumer_offsets`` partition
    ``partition``; see the module."""
    where = f"__consumer_offsets partition {partition}"
    consumer = [r.offset for r in records if r.type in CONSUMER_GROUP_TYPES]
    failed = replay_failure(records)
    if failed is not None:
        return LoadVerdict(GroupLoad.UNLOADABLE,
                           f"replayed as a coordinator loads {where}, group {group_id}'s records fail: a "
                           f"consumer-group record at offset {failed[1]} reaches the classic group of offset "
                           f"{failed[0]} (\"Group {group_id} is not a consumer group\" on brokers without {FIX}); "
                           f"the next coordinator to load {where} fails, and every group on it with it",
                           failed)
    raced = race_failure(records)
    if raced is not None:
        return LoadVerdict(GroupLoad.EXPOSED,
                           f"{where} loads group {group_id} as its records stand, but {len(consumer)} "
                           f"consumer-group record(s) of the consumer group it was remain (offsets {consumer[0]}-"
                           f"{consumer[-1]}): a load racing the log cleaner that removes the GroupMetadata "
                           f"tombstone at offset {raced[1]} sees the classic record at offset {raced[0]}, then the "
                           f"consumer-group record at offset {raced[2]}, and fails on brokers without {FIX}. This "
                           "lasts until the cleaner has compacted those records once (never in the active "
                           "segment: after segment.ms rolls it, 7 days by default)", raced)
    if consumer:
        return LoadVerdict(GroupLoad.LOADS,
                           f"{where}: {len(consumer)} consumer-group record(s) of group {group_id} (offsets "
                           f"{consumer[0]}-{consumer[-1]}), none after a classic record the cleaner could expose")
    return LoadVerdict(GroupLoad.LOADS, f"{where}: no consumer-group record of group {group_id} left: a classic "
                                        "group only, nothing for the replay bug to meet")


__all__ = ["CONSUMER_GROUP_TYPES", "FIX", "GROUP_METADATA", "GroupLoad", "LoadVerdict", "LoggedRecord",
           "judge_group_load", "race_failure", "replay_failure"]

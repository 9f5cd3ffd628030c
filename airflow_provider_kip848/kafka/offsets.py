"""Rules for changing committed offsets, shared by both backends.

Committed offsets are the only state that survives a protocol switch, so a
restore must never race live members (the broker would refuse, or a member
would immediately commit over it) and must never point outside the log (the
consumer would reset by ``auto.offset.reset`` and silently skip or replay).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from airflow_provider_kip848.kafka.errors import GroupNotEmpty, InvalidArgument, InvalidOffset, Kip848Error
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    GroupOffsets,
    PartitionOffsets,
    StreamsGroupDescription,
    TopicPartition,
)


def require_empty(desc: ConsumerGroupDescription | StreamsGroupDescription) -> None:
    if not desc.is_empty:
        raise GroupNotEmpty(
            f"Group {desc.group_id!r} has {len(desc.members)} active member(s) ({desc.state}); committed offsets "
            "can only be changed while it is empty."
        )


def require_offsets(offsets: object) -> dict[TopicPartition, int]:
    """``offsets`` as ``{TopicPartition: int}``; anything else (a string offset, a bare dict of text) is refused."""
    if not isinstance(offsets, Mapping):
        raise InvalidArgument(f"Offsets must be a mapping of topic-partition to offset, not {type(offsets).__name__}.")
    out = {}
    for tp, offset in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise InvalidArgument(f"{tp!r} is not a TopicPartition.", remedy="Key offsets by TopicPartition(topic, partition).")
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


# -- snapshots -------------------------------------------------------------------------

SNAPSHOT_FORMAT = "airflow-provider-kip848/group-offsets-snapshot"
SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class OffsetSnapshot:
    """A group's committed offsets (with each partition's log start/end) at one moment, tied to one cluster.

    Written before anything destructive, so that a conversion that lost the
    offsets can be detected (:func:`compare`) and undone (:func:`restore_plan`).
    The JSON is versioned and self-describing; :meth:`from_json` refuses
    anything else with the reason.
    """

    cluster_id: str
    group_id: str
    group_type: str
    group_state: str
    taken_at: str
    partitions: tuple[PartitionOffsets, ...]

    @property
    def committed(self) -> dict[TopicPartition, int]:
        return {TopicPartition(p.topic, p.partition): p.committed for p in self.partitions if p.committed is not None}

    def to_dict(self) -> dict:
        return {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "cluster_id": self.cluster_id,
            "group_id": self.group_id,
            "group_type": self.group_type,
            "group_state": self.group_state,
            "taken_at": self.taken_at,
            "partitions": [
                {"topic": p.topic, "partition": p.partition, "committed": p.committed,
                 "log_start": p.log_start, "log_end": p.log_end, "leader_epoch": p.leader_epoch}
                for p in self.partitions
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str, *, source: str = "snapshot") -> "OffsetSnapshot":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SnapshotInvalid(f"{source} is not JSON ({exc}).") from exc
        if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
            raise SnapshotInvalid(f"{source} is not an offsets snapshot of this provider (format {SNAPSHOT_FORMAT!r}).")
        if data.get("version") != SNAPSHOT_VERSION:
            raise SnapshotInvalid(f"{source} has snapshot version {data.get('version')!r}; this provider reads "
                                  f"version {SNAPSHOT_VERSION}.")
        try:
            parts = tuple(
                PartitionOffsets(topic=str(p["topic"]), partition=int(p["partition"]),
                                 committed=_opt_int(p.get("committed")), log_start=_opt_int(p.get("log_start")),
                                 log_end=_opt_int(p.get("log_end")), leader_epoch=_opt_int(p.get("leader_epoch")))
                for p in data["partitions"]
            )
            return cls(cluster_id=str(data["cluster_id"]), group_id=str(data["group_id"]),
                       group_type=str(data["group_type"]), group_state=str(data["group_state"]),
                       taken_at=str(data["taken_at"]), partitions=parts)
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotInvalid(f"{source} is missing or has a malformed field: {exc!r}.") from exc


class SnapshotInvalid(Kip848Error):
    remedy = "Point the task at a snapshot written by SnapshotGroupOffsetsOperator (or take a new one)."


class SnapshotConflict(Kip848Error):
    remedy = "Use another path (the default includes the run id), or delete the old snapshot if it is obsolete."


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an offset")
    return int(value)


def snapshot_from(cluster_id: str, desc, offsets: GroupOffsets, taken_at: datetime | None = None) -> OffsetSnapshot:
    return OffsetSnapshot(
        cluster_id=cluster_id,
        group_id=offsets.group_id,
        group_type=desc.type.value,
        group_state=desc.state,
        taken_at=(taken_at or datetime.now(timezone.utc)).isoformat(timespec="seconds"),
        partitions=offsets.partitions,
    )


def take_snapshot(admin, group_id: str) -> OffsetSnapshot:
    """Describe the group and read its offsets with a native backend (``KafkaAdmin``)."""
    return snapshot_from(admin.describe_cluster().cluster_id, admin.describe_group(group_id),
                         admin.group_offsets(group_id))


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

    def to_dict(self) -> dict:
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

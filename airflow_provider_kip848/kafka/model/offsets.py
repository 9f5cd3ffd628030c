"""Topic-partitions and a group's committed offsets with each partition's log start and end."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from airflow_provider_kip848.kafka.errors import SnapshotInvalid


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"


def partitions(pairs: Iterable[tuple[str, int | str]]) -> tuple[TopicPartition, ...]:
    """Sorted, de-duplicated TopicPartitions from (topic, partition) pairs."""
    return tuple(sorted({TopicPartition(t, int(p)) for t, p in pairs}))



@dataclass(frozen=True)
class PartitionOffsets:
    """Committed offset of a group on one partition, with the partition's log start/end offsets."""

    topic: str
    partition: int
    committed: int | None
    log_start: int | None = None
    log_end: int | None = None
    leader_epoch: int | None = None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "lag": self.lag}


@dataclass(frozen=True)
class GroupOffsets:
    group_id: str
    partitions: tuple[PartitionOffsets, ...] = ()

    def __getitem__(self, key: tuple[str, int]) -> PartitionOffsets:
        for p in self.partitions:
            if (p.topic, p.partition) == tuple(key):
                return p
        raise KeyError(key)

    @property
    def committed(self) -> dict[TopicPartition, int]:
        return {TopicPartition(p.topic, p.partition): p.committed for p in self.partitions if p.committed is not None}

    @property
    def uncommitted_with_records(self) -> tuple[PartitionOffsets, ...]:
        """Partitions the group consumes (assigned) without a commit, whose log holds records: their lag is
        unknown (the whole log, or whatever ``auto.offset.reset`` decides), never 0."""
        return tuple(p for p in self.partitions if p.committed is None and p.log_end is not None
                     and p.log_end > (p.log_start or 0))

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    def to_dict(self) -> dict[str, object]:
        return {"group_id": self.group_id, "total_lag": self.total_lag,
                "partitions": [p.to_dict() for p in self.partitions]}


# -- snapshots ---------------------------------------------------------------------------

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

    def to_dict(self) -> dict[str, object]:
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
    def from_json(cls, text: str, *, source: str = "snapshot") -> OffsetSnapshot:
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


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{value!r} is not an offset")
    return int(value)

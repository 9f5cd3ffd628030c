"""The group coordinator's own records in ``__consumer_offsets``, decoded as far as a downtime report needs.

Why read them: they are the exact history of a group. Every offset commit is a
record with its broker append time; every completed classic rebalance writes
the group's metadata with its generation; every new epoch of a consumer or
streams group writes the group's metadata with that epoch; a member that joins
or leaves a consumer or streams group writes (or tombstones) its member record.
Looks taken while a migration runs can only bound these times; the records
give them to the millisecond, after the fact, without a watcher.

Record keys start with an ``int16`` record type, checked against
``CoordinatorRecordType`` in ``kafka-group-coordinator-4.3.1.jar``; the group
id (a non-flexible string) follows in every group record. Values start with
an ``int16`` version. Only the leading fields are read: an offset commit's
``offset`` (first in versions 0-4), a consumer or streams group's ``epoch``
(first), a classic group's ``generation`` and member count (after the protocol
type, in versions 0-4; flexible from 4). A record of a type not listed here
(share groups, assignments, topology) is skipped; one that does not parse is
an error, never a guess.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from airflow_provider_kip848.kafka.errors import Kip848Error


class RecordType(IntEnum):
    """``CoordinatorRecordType`` of Kafka 4.3.1 (the key's leading int16), the types read here."""

    LEGACY_OFFSET_COMMIT = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_MEMBER_METADATA = 5
    STREAMS_GROUP_METADATA = 16
    STREAMS_GROUP_MEMBER_METADATA = 17


#: record types whose key is (group id, member id)
_MEMBER_TYPES = (RecordType.CONSUMER_GROUP_MEMBER_METADATA, RecordType.STREAMS_GROUP_MEMBER_METADATA)
_KNOWN = {t.value for t in RecordType}
#: every group-record type of 4.3.1 (3..21), so a group's records can be told from other bytes
_GROUP_RECORD_TYPES = range(0, 22)


class GroupRecordUnreadable(Kip848Error):
    """A ``__consumer_offsets`` record of a known type that does not decode (a newer, incompatible format)."""

    remedy = "Report the Kafka version; the downtime figures that need these records stay unknown."


@dataclass(frozen=True)
class GroupRecord:
    """One decoded record. ``at``: the broker's append time (epoch seconds). ``deleted``: a tombstone (an
    offset deleted, a group deleted, a member gone)."""

    type: RecordType
    group_id: str
    at: float
    deleted: bool = False
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    epoch: int | None = None
    members: int | None = None
    member_id: str | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"needs {n} byte(s) at {self.pos}, has {len(self.data) - self.pos}")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def string(self, *, compact: bool = False, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if compact else self.int16()
        if n < 0:
            if nullable:
                return None
            raise ValueError("null string where one is required")
        return self.take(n).decode("utf-8")


def record_type(key: bytes | None) -> int | None:
    """The record type of a key, or None for bytes too short to have one."""
    if not key or len(key) < 2:
        return None
    return int(struct.unpack(">h", key[:2])[0])


def key_group(key: bytes | None) -> str | None:
    """The group id of a group record's key, without decoding its value (to filter a partition's records)."""
    kind = record_type(key)
    if kind is None or kind not in _GROUP_RECORD_TYPES or key is None:
        return None
    try:
        return _Reader(key[2:]).string()
    except (ValueError, UnicodeDecodeError):
        return None


def decode(key: bytes | None, value: bytes | None, at: float) -> GroupRecord | None:
    """The record, or None for a type this module does not read. :class:`GroupRecordUnreadable` when a
    known type does not decode."""
    kind = record_type(key)
    if kind is None or kind not in _KNOWN or key is None:
        return None
    rtype = RecordType(kind)
    try:
        k = _Reader(key[2:])
        group = k.string()
        assert group is not None
        if rtype in (RecordType.LEGACY_OFFSET_COMMIT, RecordType.OFFSET_COMMIT):
            topic, partition = k.string(), k.int32()
            offset = None if value is None else _offset(value)
            return GroupRecord(rtype, group, at, value is None, topic=topic, partition=partition, offset=offset)
        if rtype in _MEMBER_TYPES:
            return GroupRecord(rtype, group, at, value is None, member_id=k.string())
        if value is None:
            return GroupRecord(rtype, group, at, True)
        if rtype is RecordType.GROUP_METADATA:
            generation, members = _classic_generation(value)
            return GroupRecord(rtype, group, at, epoch=generation, members=members)
        v = _Reader(value)
        v.int16()  # version
        return GroupRecord(rtype, group, at, epoch=v.int32())
    except (ValueError, UnicodeDecodeError, AssertionError) as exc:
        raise GroupRecordUnreadable(f"A {rtype.name} record of __consumer_offsets does not decode: {exc}.") from exc


def _offset(value: bytes) -> int:
    v = _Reader(value)
    version = v.int16()
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue version {version} (this reader knows 0-4)")
    return v.int64()


def _classic_generation(value: bytes) -> tuple[int, int]:
    """(generation, member count) of a GroupMetadataValue, versions 0-4 (flexible from 4)."""
    v = _Reader(value)
    version = v.int16()
    if not 0 <= version <= 4:
        raise ValueError(f"GroupMetadataValue version {version} (this reader knows 0-4)")
    flexible = version >= 4
    v.string(compact=flexible)  # protocolType
    generation = v.int32()
    v.string(compact=flexible, nullable=True)  # protocol
    v.string(compact=flexible, nullable=True)  # leader
    if version >= 2:
        v.int64()  # currentStateTimestamp
    members = v.uvarint() - 1 if flexible else v.int32()
    if members < 0:
        raise ValueError("a null members array")
    return generation, members


@dataclass(frozen=True)
class CommitStall:
    """A partition's longest wait between its first unprocessed record and the commit that took it.

    ``started_at`` is when that record was appended (or the previous commit, if later: it was not waiting
    before being committed past); ``exact`` is False when the record's time could not be read and the
    previous commit's time stands in (an upper bound). ``open``: no commit took it by ``ended_at``.
    """

    partition: str
    seconds: float
    started_at: float
    ended_at: float
    exact: bool = True
    open: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"partition": self.partition, "seconds": round(self.seconds, 3), "started_at": self.started_at,
                "ended_at": self.ended_at, "exact": self.exact, "open": self.open}


def commit_stalls(records: list[GroupRecord], arrival: Callable[[str, int, int], float | None], *,
                  log_end: dict[tuple[str, int], int] | None = None, until: float | None = None,
                  ) -> dict[str, CommitStall]:
    """Each partition's longest commit stall from a group's offset-commit records (in append order).

    For consecutive commits where the offset moves from ``c`` (at ``t1``) past it (at ``t2``), the record at
    ``c`` waited from ``max(t1, arrival(topic, partition, c))`` to ``t2``. ``arrival`` reads that record's
    timestamp (None when it cannot); it is asked only for the candidates that could be the longest. With
    ``log_end`` and ``until``: a partition whose last commit is below its log end has an open stall to
    ``until``. Repeated commits of the same offset (auto-commit) do not end a stall; a commit that moves
    back (a reset) starts over.
    """
    commits: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for r in records:
        if r.type in (RecordType.OFFSET_COMMIT, RecordType.LEGACY_OFFSET_COMMIT) and not r.deleted \
                and r.topic is not None and r.partition is not None and r.offset is not None:
            commits.setdefault((r.topic, r.partition), []).append((r.at, r.offset))
    out: dict[str, CommitStall] = {}
    for (topic, partition), seq in commits.items():
        candidates: list[tuple[float, float, float, int, bool]] = []  # (upper bound, t2, t1, c, open)
        base_t, base_c = seq[0]
        for t, c in seq[1:]:
            if c < base_c:
                base_t, base_c = t, c
            elif c > base_c:
                candidates.append((t - base_t, t, base_t, base_c, False))
                base_t, base_c = t, c
        end = (log_end or {}).get((topic, partition))
        if until is not None and end is not None and end > base_c:
            candidates.append((until - base_t, until, base_t, base_c, True))
        best: CommitStall | None = None
        for upper, t2, t1, c, still_open in sorted(candidates, reverse=True):
            if best is not None and upper <= best.seconds:
                break
            came = arrival(topic, partition, c)
            start = t1 if came is None else max(t1, came)
            stall = CommitStall(f"{topic}:{partition}", t2 - start, start, t2, exact=came is not None,
                                open=still_open)
            if best is None or stall.seconds > best.seconds:
                best = stall
        if best is not None:
            out[best.partition] = best
    return out



@dataclass(frozen=True)
class GroupHistory:
    """What a group's records say about a change window: rebalances by the group's own counters, the group
    types it went through, and when the first member left. Times are append times (epoch s)."""

    records: int
    #: completed classic rebalances (new generations) and new consumer/streams epochs, each counted once
    rebalances: int
    #: the group types in the order the records show them (a conversion appears as a new type)
    types: tuple[str, ...]
    first_member_left_at: float | None
    #: a classic GroupMetadata record with no member (Empty), the first one after a member left
    classic_empty_at: float | None

    def to_dict(self) -> dict[str, object]:
        return {"records": self.records, "rebalances": self.rebalances, "types": list(self.types),
                "first_member_left_at": self.first_member_left_at, "classic_empty_at": self.classic_empty_at}


_TYPE_OF = {RecordType.GROUP_METADATA: "classic", RecordType.CONSUMER_GROUP_METADATA: "consumer",
            RecordType.CONSUMER_GROUP_MEMBER_METADATA: "consumer", RecordType.STREAMS_GROUP_METADATA: "streams",
            RecordType.STREAMS_GROUP_MEMBER_METADATA: "streams"}


def group_history(records: list[GroupRecord], *, members_before: int | None = None) -> GroupHistory:
    """Fold a group's records (append order) into its :class:`GroupHistory`.

    A classic rebalance is a GroupMetadata record with a new generation; a consumer or streams rebalance is a
    new group epoch (the first epoch record seen in the window counts once: what came before is outside it).
    The first member left is the first classic record with fewer members than the one before, or the first
    consumer/streams member tombstone. A group tombstone (the group deleted) ends a type. ``members_before``:
    the classic group's members when the window opened (its last generation may predate the window; a run
    that stops every member at once writes one record, already Empty).
    """
    rebalances = 0
    types: list[str] = []
    last_epoch: dict[str, int] = {}
    last_members: int | None = members_before
    first_left: float | None = None
    empty_at: float | None = None
    for r in records:
        kind = _TYPE_OF.get(r.type)
        if kind is None:
            continue
        if not types or types[-1] != kind:
            if r.deleted and r.type not in _MEMBER_TYPES:
                continue  # a deleted group of a type not current: nothing to follow
            types.append(kind)
        if r.type in _MEMBER_TYPES:
            if r.deleted and first_left is None:
                first_left = r.at
            continue
        if r.deleted:
            last_epoch.pop(kind, None)
            continue
        if r.epoch is not None and last_epoch.get(kind) != r.epoch:
            rebalances += 1 if kind not in last_epoch or r.epoch > last_epoch[kind] else 0
            last_epoch[kind] = r.epoch
        if r.type is RecordType.GROUP_METADATA and r.members is not None:
            if last_members is not None and r.members < last_members and first_left is None:
                first_left = r.at
            if r.members == 0 and first_left is not None and empty_at is None:
                empty_at = r.at
            last_members = r.members
    return GroupHistory(len(records), rebalances, tuple(types), first_left, empty_at)


@dataclass(frozen=True)
class GroupDowntime:
    """A group's history since a time, from its own records: rebalances and the first member leaving
    (:class:`GroupHistory`), each partition's longest :class:`CommitStall`, and notes on what was not exact."""

    since: float
    history: GroupHistory
    stalls: dict[str, CommitStall]
    notes: tuple[str, ...] = ()

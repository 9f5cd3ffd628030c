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

Why over 500 lines: one record format read in one place. The byte reader, the decoder of each record type
and version of ``__consumer_offsets`` and the fold of the decoded records into a group's history change
together (a new record version in Kafka is a new branch in the decoder and a new case in the fold); apart, the
fold would depend on the decoder's private shapes across a module boundary.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from airflow_provider_kip848.kafka.errors import Kip848Error


class RecordType(IntEnum):
    """``CoordinatorRecordType`` ids of Kafka 4.3.1 (the key's leading int16: each key class's ``apiKey``),
    the types read here. The ids are not the enum's ordinals: 9 and 18 are retired, so the streams types
    start at 17."""

    LEGACY_OFFSET_COMMIT = 0
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    STREAMS_GROUP_METADATA = 17
    STREAMS_GROUP_MEMBER_METADATA = 19
    STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA = 20
    STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT = 22


#: record types whose key is (group id, member id)
_MEMBER_TYPES = (RecordType.CONSUMER_GROUP_MEMBER_METADATA, RecordType.STREAMS_GROUP_MEMBER_METADATA)
_ASSIGNMENT_TYPES = (RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
                     RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT)
_TARGET_TYPES = (RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                 RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA)
_KNOWN = {t.value for t in RecordType}
#: every group-record type id of 4.3.1 (0..23), so a group's records can be told from other bytes
_GROUP_RECORD_TYPES = range(0, 24)
#: ``MemberState`` bytes meaning "reconciled" (``modern.MemberState.STABLE``, ``streams.MemberState.STABLE``)
_MEMBER_STABLE = {RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: 0,
                  RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: 1}


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
    #: a member's protocol (member metadata): "consumer", "classic" (a classic member of a consumer group,
    #: during an online upgrade) or "streams"
    protocol: str | None = None
    #: a current member assignment: whether the member is reconciled to ``epoch`` (its member epoch)
    reconciled: bool | None = None


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
            member = k.string()
            if value is None:
                return GroupRecord(rtype, group, at, True, member_id=member)
            protocol = "streams" if rtype is RecordType.STREAMS_GROUP_MEMBER_METADATA else _consumer_protocol(value)
            return GroupRecord(rtype, group, at, member_id=member, protocol=protocol)
        if rtype in _ASSIGNMENT_TYPES:
            member = k.string()
            if value is None:
                return GroupRecord(rtype, group, at, True, member_id=member)
            v = _Reader(value)
            _version(v, rtype, 0)
            epoch, _previous, state = v.int32(), v.int32(), v.take(1)[0]
            return GroupRecord(rtype, group, at, member_id=member, epoch=epoch,
                               reconciled=state == _MEMBER_STABLE[rtype])
        if value is None:
            return GroupRecord(rtype, group, at, True)
        if rtype is RecordType.GROUP_METADATA:
            generation, members = _classic_generation(value)
            return GroupRecord(rtype, group, at, epoch=generation, members=members)
        v = _Reader(value)
        _version(v, rtype, 0)
        return GroupRecord(rtype, group, at, epoch=v.int32())
    except (ValueError, UnicodeDecodeError, AssertionError) as exc:
        raise GroupRecordUnreadable(f"A {rtype.name} record of __consumer_offsets does not decode: {exc}.") from exc


def _version(v: _Reader, rtype: RecordType, highest: int) -> int:
    version = v.int16()
    if not 0 <= version <= highest:
        raise ValueError(f"{rtype.name} value version {version} (this reader knows 0-{highest})")
    return version


def _consumer_protocol(value: bytes) -> str:
    """"classic" when a ConsumerGroupMemberMetadataValue (v0, flexible) carries ClassicMemberMetadata (tagged
    field 0: the member joined with the classic protocol), else "consumer". 4.3.1 writes tag 0 for every
    member: its payload starts with a null marker (an unsigned varint, 0 for null: a consumer-protocol
    member; 1 then the struct: a classic member)."""
    v = _Reader(value)
    _version(v, RecordType.CONSUMER_GROUP_MEMBER_METADATA, 0)
    v.string(compact=True, nullable=True)  # instanceId
    v.string(compact=True, nullable=True)  # rackId
    v.string(compact=True)  # clientId
    v.string(compact=True)  # clientHost
    for _ in range(v.uvarint() - 1):  # subscribedTopicNames
        v.string(compact=True)
    v.string(compact=True, nullable=True)  # subscribedTopicRegex
    v.int32()  # rebalanceTimeoutMs
    v.string(compact=True, nullable=True)  # serverAssignor
    for _ in range(v.uvarint()):  # tagged fields
        tag, size = v.uvarint(), v.uvarint()
        payload = v.take(size)
        if tag == 0:
            marker = _Reader(payload).uvarint()
            if marker not in (0, 1):
                raise ValueError(f"ClassicMemberMetadata null marker {marker}")
            return "classic" if marker == 1 else "consumer"
    return "consumer"


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
class StatePoint:
    """The group as its records leave it at ``at``: its type, its state as the coordinator computes it, and
    its members by protocol. ``state`` or ``members`` None: not known from the records in the window (see
    :func:`group_history`), never guessed."""

    at: float
    type: str | None
    state: str | None
    members: dict[str, int] | None

    def to_dict(self) -> dict[str, object]:
        return {"at": self.at, "type": self.type, "state": self.state,
                "members": None if self.members is None else dict(self.members)}


@dataclass(frozen=True)
class GroupHistory:
    """What a group's records say about a change window: rebalances by the group's own counters, the group
    types it went through, when the first member left, and the group's state over time. Times are append
    times (epoch s)."""

    records: int
    #: completed classic rebalances (new generations) and new consumer/streams epochs, each counted once
    rebalances: int
    #: the group types in the order the records show them (a conversion appears as a new type)
    types: tuple[str, ...]
    first_member_left_at: float | None
    #: a classic GroupMetadata record with no member (Empty), the first one after a member left
    classic_empty_at: float | None
    #: the group after each instant its records changed it (records of one write share their time)
    states: tuple[StatePoint, ...] = ()
    #: the first instant after the first member left (or in the window, when none left) at which the group
    #: is of the target type, Stable, with every member on the target protocol
    stable_on_target_at: float | None = None

    @property
    def settle_s(self) -> float | None:
        """From the first member leaving to Stable on the target protocol."""
        if self.first_member_left_at is None or self.stable_on_target_at is None:
            return None
        return self.stable_on_target_at - self.first_member_left_at

    def to_dict(self) -> dict[str, object]:
        return {"records": self.records, "rebalances": self.rebalances, "types": list(self.types),
                "first_member_left_at": self.first_member_left_at, "classic_empty_at": self.classic_empty_at,
                "stable_on_target_at": self.stable_on_target_at, "states": [p.to_dict() for p in self.states]}


_TYPE_OF = {RecordType.GROUP_METADATA: "classic", RecordType.CONSUMER_GROUP_METADATA: "consumer",
            RecordType.CONSUMER_GROUP_MEMBER_METADATA: "consumer", RecordType.STREAMS_GROUP_METADATA: "streams",
            RecordType.STREAMS_GROUP_MEMBER_METADATA: "streams",
            RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: "consumer",
            RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: "consumer",
            RecordType.STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA: "streams",
            RecordType.STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT: "streams"}
#: the types whose records say how many members there are (the others follow them)
_METADATA = (RecordType.GROUP_METADATA, RecordType.CONSUMER_GROUP_METADATA, RecordType.STREAMS_GROUP_METADATA)


class _ModernGroup:
    """A consumer or streams group rebuilt from its records, to compute its state as the coordinator does
    (``ConsumerGroup``/``StreamsGroup.maybeUpdateGroupState``): no member -> Empty; a group epoch above the
    target assignment's -> Assigning; a member not reconciled to the target epoch (its member epoch differs,
    or its state is not STABLE) -> Reconciling; else Stable. Unknown until the records in the window show the
    group epoch, the target epoch and every member's assignment. ``complete``: the group was created in the
    window (after another type, or after its own deletion), so every member it has is in the records; a
    group that predates the window may have members the window never shows: its members and an Empty are
    unknown."""

    def __init__(self, complete: bool) -> None:
        self.complete = complete
        self.epoch: int | None = None
        self.target: int | None = None
        self.members: dict[str, str] = {}
        self.assignments: dict[str, tuple[int, bool]] = {}

    def apply(self, r: GroupRecord) -> None:
        if r.type in _METADATA:
            self.epoch = r.epoch
        elif r.type in _TARGET_TYPES:
            self.target = r.epoch
        elif r.type in _MEMBER_TYPES and r.member_id is not None:
            if r.deleted:
                self.members.pop(r.member_id, None)
            else:
                self.members[r.member_id] = r.protocol or _TYPE_OF[r.type]
        elif r.type in _ASSIGNMENT_TYPES and r.member_id is not None:
            if r.deleted or r.epoch is None:
                self.assignments.pop(r.member_id, None)
            else:
                self.assignments[r.member_id] = (r.epoch, bool(r.reconciled))

    def state(self) -> str | None:
        if not self.complete:
            return None
        if not self.members:
            return "Empty"
        if self.epoch is None or self.target is None:
            return None
        if self.epoch > self.target:
            return "Assigning"
        if any(m not in self.assignments for m in self.members):
            return None
        if all(self.assignments[m] == (self.target, True) for m in self.members):
            return "Stable"
        return "Reconciling"

    def by_protocol(self) -> dict[str, int] | None:
        if not self.complete:
            return None
        out: dict[str, int] = {}
        for protocol in self.members.values():
            out[protocol] = out.get(protocol, 0) + 1
        return out


class _HistoryFold:
    """The state :func:`group_history` carries from one record to the next."""

    def __init__(self, members_before: int | None, state_before: str | None) -> None:
        self.rebalances = 0
        self.types: list[str] = []
        self.last_epoch: dict[str, int] = {}
        self.last_members = members_before
        self.first_left: float | None = None
        self.empty_at: float | None = None
        #: the group did not exist, or was deleted in the window: what comes next is a new group, seen whole
        self.gone = state_before == "Dead"
        known = not self.gone and (members_before is not None or state_before is not None)
        self.current: str | None = "classic" if known else None
        if known:  # the group's type when the window opened (its conversion may be the window's first record)
            self.types.append("classic")
        self.classic: tuple[str | None, int | None] = (state_before, members_before)
        self.modern: _ModernGroup | None = None
        self.states: list[StatePoint] = []

    def apply(self, r: GroupRecord, kind: str) -> None:
        group_level = r.type in _METADATA
        if not self.types or self.types[-1] != kind:
            if r.deleted and group_level:
                return  # a deleted group of a type not current: nothing to follow
            self.types.append(kind)
        if r.deleted and group_level:  # the group itself deleted (converted, or gone)
            self.last_epoch.pop(kind, None)
            if self.current == kind:
                self.current, self.gone = None, True
        else:
            if kind != self.current and not r.deleted:  # a group of this type from here on
                complete = self.current is not None or self.gone  # born in the window, after what was known
                self.current = kind
                self.modern = None if kind == "classic" else _ModernGroup(complete)
            if self.modern is not None and kind == self.current:
                self.modern.apply(r)
            if r.type in _MEMBER_TYPES and r.deleted and self.first_left is None:
                self.first_left = r.at
            if group_level:
                self._metadata(r, kind)
        self._point(r.at)

    def _metadata(self, r: GroupRecord, kind: str) -> None:
        if r.epoch is not None and self.last_epoch.get(kind) != r.epoch:
            self.rebalances += 1 if kind not in self.last_epoch or r.epoch > self.last_epoch[kind] else 0
            self.last_epoch[kind] = r.epoch
        if r.type is RecordType.GROUP_METADATA and r.members is not None:
            if self.last_members is not None and r.members < self.last_members and self.first_left is None:
                self.first_left = r.at
            if r.members == 0 and self.first_left is not None and self.empty_at is None:
                self.empty_at = r.at
            self.last_members = r.members
            self.classic = ("Stable" if r.members else "Empty", r.members)

    def _point(self, at: float) -> None:
        if self.current == "classic":
            state, count = self.classic
            now = StatePoint(at, "classic", state, None if count is None else {"classic": count} if count else {})
        elif self.current is not None and self.modern is not None:
            now = StatePoint(at, self.current, self.modern.state(), self.modern.by_protocol())
        else:
            now = StatePoint(at, None, "Dead" if self.types else None, {})
        if self.states and self.states[-1].at == at:
            self.states[-1] = now  # records of one write: the group as the write leaves it
        else:
            self.states.append(now)

    def stable_on(self, target: str | None) -> float | None:
        for p in self.states:
            if target is None or (self.first_left is not None and p.at < self.first_left):
                continue
            if p.type == target and p.state == "Stable" and p.members and set(p.members) == {target}:
                return p.at
        return None


def group_history(records: list[GroupRecord], *, members_before: int | None = None,
                  state_before: str | None = None, target: str | None = None) -> GroupHistory:
    """Fold a group's records (append order) into its :class:`GroupHistory`.

    A classic rebalance is a GroupMetadata record with a new generation; a consumer or streams rebalance is a
    new group epoch (the first epoch record seen in the window counts once: what came before is outside it).
    The first member left is the first classic record with fewer members than the one before, or the first
    consumer/streams member tombstone. A group tombstone (the group deleted) ends a type.

    States: a classic group's record is written when a rebalance completes (Stable, with its members) or the
    group empties; its rebalancing phases are not recorded. A consumer or streams group's state is computed
    from its epochs and members' assignments (see :class:`_ModernGroup`); a streams group waiting for its
    source topics (NotReady) shows as Assigning. ``members_before`` and ``state_before``: the classic group
    when the window opened (its last generation may predate the window; a run that stops every member at
    once writes one record, already Empty); ``state_before="Dead"``: the group did not exist. A consumer or
    streams group that existed before the window (neither) has members the window may never show: its
    members and states stay unknown. ``target``: the group type the change moves to (for
    ``stable_on_target_at``).
    """
    fold = _HistoryFold(members_before, state_before)
    for r in records:
        kind = _TYPE_OF.get(r.type)
        if kind is not None:
            fold.apply(r, kind)
    return GroupHistory(len(records), fold.rebalances, tuple(fold.types), fold.first_left, fold.empty_at,
                        tuple(_dedupe(fold.states)), fold.stable_on(target))


def _dedupe(states: list[StatePoint]) -> list[StatePoint]:
    """Drop points that repeat the one before (same type, state and members)."""
    out: list[StatePoint] = []
    for p in states:
        if not out or (out[-1].type, out[-1].state, out[-1].members) != (p.type, p.state, p.members):
            out.append(p)
    return out


def commit_rate(records: list[GroupRecord], *, max_buckets: int = 300) -> list[tuple[float, float]]:
    """Committed records per second over the window: each offset commit that moves a partition forward adds
    the distance moved to its time's bucket (the first commit of a partition in the window has no base and
    adds nothing). Buckets are 1 s wide, wider for a window longer than ``max_buckets`` seconds.
    Returns ``(bucket start, records/s)`` for every bucket from the first commit to the last (0 where
    nothing was committed: a commit record is a fact, its absence too)."""
    last: dict[tuple[str, int], int] = {}
    moves: list[tuple[float, int]] = []
    for r in records:
        if r.type not in (RecordType.OFFSET_COMMIT, RecordType.LEGACY_OFFSET_COMMIT) or r.deleted \
                or r.topic is None or r.partition is None or r.offset is None:
            continue
        key = (r.topic, r.partition)
        if key in last and r.offset > last[key]:
            moves.append((r.at, r.offset - last[key]))
        last[key] = r.offset
    commits = [r.at for r in records if r.type in (RecordType.OFFSET_COMMIT, RecordType.LEGACY_OFFSET_COMMIT)]
    if not commits:
        return []
    first, span = min(commits), max(commits) - min(commits)
    width = max(1.0, float(int(span / max_buckets) + 1))
    sums = [0] * (int(span / width) + 1)
    for at, n in moves:
        sums[int((at - first) / width)] += n
    return [(first + i * width, n / width) for i, n in enumerate(sums)]


@dataclass(frozen=True)
class GroupDowntime:
    """A group's history since a time, from its own records: rebalances, states and the first member leaving
    (:class:`GroupHistory`), each partition's longest :class:`CommitStall`, the committed records per second
    (:func:`commit_rate`), and notes on what was not exact."""

    since: float
    history: GroupHistory
    stalls: dict[str, CommitStall]
    notes: tuple[str, ...] = ()
    commit_rate: tuple[tuple[float, float], ...] = ()

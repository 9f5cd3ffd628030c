"""The fleet inventory: every group of a cluster in one call, with its facts and migration verdicts.

Before migrating a fleet, an operator needs every group's type, state,
members, assignor, committed offsets and lag, and which migration can run
for it by which path. Asking group by group costs a listing and a describe
per group (10,000 groups: minutes). The native backend
(:meth:`~airflow_provider_kip848.kafka.native.KafkaAdmin.inventory`) reads the
same facts with a fixed number of batched requests (one ListGroups per
broker, one FindCoordinator, describes and OffsetFetch batched per
coordinator, ListOffsets per partition leader), so the time grows with the
number of groups and not with round trips; this module holds what it returns
and how one group's entry is put together from the facts, with no I/O.

What is not known is said, never guessed: a group whose coordinator did not
answer before the deadline has ``error`` set, no member count, and every
verdict UNKNOWN naming the error; a broker that did not answer ListGroups is
named in ``unanswered_brokers`` (the groups it coordinates may be missing:
the inventory is not ``complete``). No describe reports members' client
software versions (ConsumerGroupDescribe, DescribeGroups and
StreamsGroupDescribe carry client id and host only; the version a client
sends in ApiVersions stays on the broker), so ``client_version`` is None.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    GroupState,
    GroupType,
    MemberProtocol,
)
from airflow_provider_kip848.kafka.rules.readiness import FleetJudge, MigrationVerdict, Readiness


@dataclass(frozen=True)
class InventoryMember:
    """One member of a group as the inventory lists it.

    ``client_version`` is the client software version where the group's
    describe reports it; none of Kafka's describes does today, so it is None
    (unknown), never a guess from the client id.
    """

    member_id: str
    client_id: str
    host: str
    protocol: MemberProtocol
    instance_id: str | None = None
    client_version: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"member_id": self.member_id, "client_id": self.client_id, "host": self.host,
                "protocol": self.protocol.value, "instance_id": self.instance_id,
                "client_version": self.client_version}


@dataclass(frozen=True)
class InventoryEntry:
    """One group: what the cluster says about it, and the verdict on each migration that applies.

    ``member_count`` and ``members`` are None when the group could not be
    described (``error`` says why); ``offsets`` is None when its committed
    offsets could not be read (``offsets_error`` says why; a partition whose log end could not be read has
    ``log_end`` None and makes ``lag`` None). ``assignor`` is the classic protocol's
    assignor, or the server-side one of a consumer group (None for streams
    groups and for groups not described).
    """

    group_id: str
    type: GroupType
    protocol_type: str
    state: GroupState
    coordinator_id: int | None
    member_count: int | None
    members: tuple[InventoryMember, ...] | None
    assignor: str | None
    offsets: GroupOffsets | None
    verdicts: tuple[MigrationVerdict, ...]
    error: str | None = None
    offsets_error: str | None = None

    @property
    def lag(self) -> int | None:
        """Total lag (log end - committed, over the committed partitions), as ``GroupOffsets.total_lag``
        counts it; None when the offsets, or a committed partition's log end, could not be read."""
        if self.offsets is None:
            return None
        if any(p.committed is not None and p.log_end is None for p in self.offsets.partitions):
            return None
        return self.offsets.total_lag

    @property
    def is_mixed(self) -> bool:
        """A consumer group that still has classic members (an online migration in progress)."""
        return self.type is GroupType.CONSUMER and any(m.protocol is MemberProtocol.CLASSIC
                                                       for m in self.members or ())

    def verdict(self, migration: str) -> MigrationVerdict:
        """The verdict on ``migration`` (KeyError when it does not apply to this group)."""
        for v in self.verdicts:
            if v.migration == migration:
                return v
        raise KeyError(migration)

    def to_dict(self) -> dict[str, object]:
        return {
            "group_id": self.group_id,
            "type": self.type.value,
            "protocol_type": self.protocol_type,
            "state": self.state.value,
            "coordinator_id": self.coordinator_id,
            "member_count": self.member_count,
            "members": None if self.members is None else [m.to_dict() for m in self.members],
            "is_mixed": self.is_mixed,
            "assignor": self.assignor,
            "lag": self.lag,
            "offsets": None if self.offsets is None else [p.to_dict() for p in self.offsets.partitions],
            "verdicts": [v.to_dict() for v in self.verdicts],
            "error": self.error,
            "offsets_error": self.offsets_error,
        }


@dataclass(frozen=True)
class GroupInventory:
    """Every group of one cluster at one moment (``taken_at``), sorted by group id.

    ``unanswered_brokers``: node id -> error of each broker that did not
    answer ListGroups before the deadline; the groups it coordinates may be
    missing (``complete`` is False). ``absent``: ids asked for by name that
    no coordinator has. ``cluster_error``: the cluster-wide facts the verdicts
    need (broker versions, features, the coordinators' configs) could not be
    read; every verdict is then UNKNOWN. ``requests``: how many requests of
    each API the inventory sent (batching makes it independent of the number
    of groups, up to the batch size). ``orphan_group_configs``: the groups that
    do not exist but have group configs, with them (see the field).
    """

    taken_at: datetime
    entries: tuple[InventoryEntry, ...]
    elapsed_s: float
    unanswered_brokers: dict[int, str] = field(default_factory=dict)
    absent: tuple[str, ...] = ()
    cluster_error: str | None = None
    requests: dict[str, int] = field(default_factory=dict)
    #: group ids that have group configs but no group -> those configs: Kafka keeps a group's configs after the
    #: group is deleted and a new group with the id inherits them (KAFKA-20236). None: not known
    #: (``orphan_group_configs_error`` says why: brokers older than 4.1 cannot list config resources by type)
    orphan_group_configs: dict[str, dict[str, str | None]] | None = None
    orphan_group_configs_error: str | None = None

    @property
    def complete(self) -> bool:
        """Every broker answered ListGroups: no group is missing from ``entries``."""
        return not self.unanswered_brokers

    def __len__(self) -> int:
        return len(self.entries)

    def entry(self, group_id: str) -> InventoryEntry:
        """The entry of ``group_id`` (KeyError when the inventory has none)."""
        for e in self.entries:
            if e.group_id == group_id:
                return e
        raise KeyError(group_id)

    @property
    def unknown(self) -> tuple[InventoryEntry, ...]:
        """The groups that could not be read completely (``error`` set)."""
        return tuple(e for e in self.entries if e.error is not None)

    def readiness_counts(self) -> dict[str, dict[str, int]]:
        """migration -> readiness -> number of groups (what a fleet report summarises)."""
        out: dict[str, Counter[str]] = {}
        for e in self.entries:
            for v in e.verdicts:
                out.setdefault(v.migration, Counter())[v.readiness.value] += 1
        return {m: dict(sorted(c.items())) for m, c in sorted(out.items())}

    def to_dict(self) -> dict[str, object]:
        return {
            "taken_at": self.taken_at.isoformat(),
            "elapsed_s": round(self.elapsed_s, 3),
            "complete": self.complete,
            "unanswered_brokers": {str(k): v for k, v in sorted(self.unanswered_brokers.items())},
            "absent": list(self.absent),
            "cluster_error": self.cluster_error,
            "requests": dict(sorted(self.requests.items())),
            "orphan_group_configs": self.orphan_group_configs,
            "orphan_group_configs_error": self.orphan_group_configs_error,
            "group_count": len(self.entries),
            "readiness": self.readiness_counts(),
            "groups": [e.to_dict() for e in self.entries],
        }


def _members(description: GroupDescription) -> tuple[InventoryMember, ...]:
    if isinstance(description, ConsumerGroupDescription):
        return tuple(InventoryMember(m.member_id, m.client_id, m.host, m.protocol, m.instance_id)
                     for m in description.members)
    return tuple(InventoryMember(m.member_id, m.client_id, "", m.protocol, m.instance_id)
                 for m in description.members)


def inventory_entry(group_id: str, listing: GroupListing | None, description: GroupDescription | None,
                    user_data: dict[str, bytes], offsets: GroupOffsets | None, judge: FleetJudge, *,
                    error: str | None = None, offsets_error: str | None = None) -> InventoryEntry:
    """One group's entry from the facts read for it (``error``: why it could not be described).

    With a description, type and state are the coordinator's (read after the
    listing, so newer); without one, the listing's type and state stand (a
    fact read from the coordinator a moment earlier) and the member count is
    None. A group described but not listed (asked for by name while its
    coordinator was moving) is judged with a listing made from its
    description. ``judge`` holds the cluster-wide facts (read once).
    """
    if description is not None and (listing is None or listing.type is not description.type):
        listing = GroupListing(group_id, description.type, description.state,
                               listing.protocol_type if listing is not None else "consumer")
    verdicts = judge.verdicts(listing, description, user_data, unknown_reason=error)
    if description is None:
        return InventoryEntry(group_id=group_id, type=listing.type if listing else GroupType.UNKNOWN,
                              protocol_type=listing.protocol_type if listing else "",
                              state=listing.state if listing else GroupState.UNKNOWN, coordinator_id=None,
                              member_count=None, members=None, assignor=None, offsets=offsets,
                              verdicts=verdicts, error=error, offsets_error=offsets_error)
    assignor = description.assignor if isinstance(description, ConsumerGroupDescription) else None
    return InventoryEntry(group_id=group_id, type=description.type,
                          protocol_type=listing.protocol_type if listing is not None else "",
                          state=description.state, coordinator_id=description.coordinator_id,
                          member_count=len(description.members), members=_members(description),
                          assignor=assignor or None, offsets=offsets, verdicts=verdicts, error=error,
                          offsets_error=offsets_error)


__all__ = ["FleetJudge", "GroupInventory", "InventoryEntry", "InventoryMember", "MigrationVerdict", "Readiness",
           "inventory_entry"]

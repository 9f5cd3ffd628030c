"""Typed facts about a Kafka cluster, in the vocabulary of Kafka's own tools.

Field names follow ``kafka-features`` (FeatureCommand: supported min/max,
finalized version level, epoch) and ``kafka-consumer-groups`` /
``kafka-streams-groups`` (group type, state). Every class is a frozen
dataclass with ``to_dict()`` so results can travel as small JSON (XCom,
reports) and compare equal across the native and the CLI backends.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum


#: ``metadata.version`` feature levels and the names ``kafka-features`` prints for them
#: (Kafka's ``MetadataVersion`` enum, read from the 4.3.1 jars; 31 is 4.4's, not yet production in 4.3).
METADATA_VERSION_NAMES: dict[int, str] = {
    7: "3.3-IV3",
    8: "3.4-IV0",
    9: "3.5-IV0",
    10: "3.5-IV1",
    11: "3.5-IV2",
    12: "3.6-IV0",
    13: "3.6-IV1",
    14: "3.6-IV2",
    15: "3.7-IV0",
    16: "3.7-IV1",
    17: "3.7-IV2",
    18: "3.7-IV3",
    19: "3.7-IV4",
    20: "3.8-IV0",
    21: "3.9-IV0",
    22: "4.0-IV0",
    23: "4.0-IV1",
    24: "4.0-IV2",
    25: "4.0-IV3",
    26: "4.1-IV0",
    27: "4.1-IV1",
    28: "4.2-IV0",
    29: "4.2-IV1",
    30: "4.3-IV0",
    31: "4.4-IV0",
}


def feature_level_name(feature: str, level: int) -> str:
    """A level as ``kafka-features describe`` shows it: ``4.3-IV0`` for metadata.version, else the number."""
    if feature == "metadata.version":
        return METADATA_VERSION_NAMES.get(level, str(level))
    return str(level)


class GroupType(str, Enum):
    """The group types a Kafka 4.x coordinator knows (``ListGroups`` ``GroupType``)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    STREAMS = "streams"
    SHARE = "share"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: str | None) -> "GroupType":
        try:
            return cls((value or "").strip().lower())
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True)
class Feature:
    """One feature flag as ``kafka-features describe`` prints it.

    ``finalized_level`` is 0 when the feature is not finalized (the tool prints
    ``FinalizedVersionLevel: 0`` too); levels are the protocol's integers
    (``metadata.version`` 30 is ``4.3-IV0``).
    """

    name: str
    supported_min: int
    supported_max: int
    finalized_level: int
    #: The finalized-features epoch (the metadata offset that last changed them); it moves as the
    #: metadata log advances, so it is reported but not part of equality.
    epoch: int | None = field(default=None, compare=False)

    @property
    def finalized(self) -> bool:
        return self.finalized_level > 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ClusterFeatures:
    """Every feature the cluster reports, by name."""

    features: dict[str, Feature] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Feature:
        return self.features[name]

    def __contains__(self, name: object) -> bool:
        return name in self.features

    def level(self, name: str) -> int:
        """Finalized level of ``name`` (0 when absent or not finalized)."""
        feature = self.features.get(name)
        return feature.finalized_level if feature else 0

    def to_dict(self) -> dict:
        return {name: f.to_dict() for name, f in sorted(self.features.items())}


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str
    controller_id: int | None
    brokers: tuple[BrokerNode, ...]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GroupListing:
    """One row of ``kafka-groups --list`` (group id, type, protocol type, state)."""

    group_id: str
    type: GroupType
    state: str
    protocol_type: str = ""

    def to_dict(self) -> dict:
        return {"group_id": self.group_id, "type": self.type.value, "state": self.state,
                "protocol_type": self.protocol_type}


# -- group states ------------------------------------------------------------

_STATE_NAMES = {
    name.lower(): name
    for name in (
        "Stable", "Empty", "Dead", "PreparingRebalance", "CompletingRebalance",  # classic
        "Assigning", "Reconciling",  # consumer (KIP-848)
        "NotReady",  # streams (KIP-1071)
        "Unknown",
    )
}


def normalize_state(state: str | None) -> str:
    """Kafka's state names as the CLI tools print them (``Stable``, ``PreparingRebalance`` ...)."""
    key = (state or "").replace("_", "").replace(" ", "").lower()
    return _STATE_NAMES.get(key, state or "Unknown")


class MemberProtocol(str, Enum):
    """Which rebalance protocol a member speaks; in a mixed consumer group some are still classic."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    STREAMS = "streams"
    UNKNOWN = "unknown"


# -- consumer groups -----------------------------------------------------------


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"


def partitions(pairs) -> tuple[TopicPartition, ...]:
    """Sorted, de-duplicated TopicPartitions from (topic, partition) pairs."""
    return tuple(sorted({TopicPartition(t, int(p)) for t, p in pairs}))


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member of a classic or consumer group (``kafka-consumer-groups --describe --members --verbose``).

    ``target_assignment`` and ``member_epoch`` exist only in consumer (KIP-848)
    groups. ``protocol`` tells, in a consumer group, whether the member has
    been upgraded (``consumer``) or still speaks ``classic`` (a mixed group
    during an online migration).
    """

    member_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    assignment: tuple[TopicPartition, ...] = ()
    target_assignment: tuple[TopicPartition, ...] | None = None
    member_epoch: int | None = None
    protocol: MemberProtocol = MemberProtocol.UNKNOWN

    def to_dict(self) -> dict:
        return {
            "member_id": self.member_id,
            "client_id": self.client_id,
            "host": self.host,
            "instance_id": self.instance_id,
            "assignment": [str(tp) for tp in self.assignment],
            "target_assignment": None if self.target_assignment is None else [str(tp) for tp in self.target_assignment],
            "member_epoch": self.member_epoch,
            "protocol": self.protocol.value,
        }


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A classic or consumer group as ``kafka-consumer-groups --describe --state --members --verbose`` shows it."""

    group_id: str
    type: GroupType
    state: str
    assignor: str
    coordinator_id: int | None
    members: tuple[ConsumerGroupMember, ...] = ()
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None

    @property
    def is_empty(self) -> bool:
        return not self.members

    @property
    def classic_members(self) -> tuple[ConsumerGroupMember, ...]:
        return tuple(m for m in self.members if m.protocol is MemberProtocol.CLASSIC)

    @property
    def is_mixed(self) -> bool:
        """A consumer group that still has classic members (an online migration in progress)."""
        return self.type is GroupType.CONSUMER and bool(self.classic_members)

    def to_dict(self) -> dict:
        return {
            "group_id": self.group_id,
            "type": self.type.value,
            "state": self.state,
            "assignor": self.assignor,
            "coordinator_id": self.coordinator_id,
            "group_epoch": self.group_epoch,
            "target_assignment_epoch": self.target_assignment_epoch,
            "members": [m.to_dict() for m in self.members],
            "is_mixed": self.is_mixed,
        }


# -- streams groups ------------------------------------------------------------


@dataclass(frozen=True, order=True)
class StreamsTask:
    """A Streams task id: sub-topology and partition (``0_1``; the CLI prints ``0:[1]``)."""

    subtopology: str
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"


@dataclass(frozen=True)
class TaskAssignment:
    active: tuple[StreamsTask, ...] = ()
    standby: tuple[StreamsTask, ...] = ()
    warmup: tuple[StreamsTask, ...] = ()

    def to_dict(self) -> dict:
        return {k: [str(t) for t in getattr(self, k)] for k in ("active", "standby", "warmup")}


@dataclass(frozen=True)
class StreamsGroupMember:
    member_id: str
    process_id: str
    client_id: str
    member_epoch: int | None
    protocol: MemberProtocol = MemberProtocol.STREAMS
    assignment: TaskAssignment = TaskAssignment()
    target_assignment: TaskAssignment | None = None
    instance_id: str | None = None

    def to_dict(self) -> dict:
        return {
            "member_id": self.member_id,
            "process_id": self.process_id,
            "client_id": self.client_id,
            "member_epoch": self.member_epoch,
            "protocol": self.protocol.value,
            "assignment": self.assignment.to_dict(),
            "target_assignment": None if self.target_assignment is None else self.target_assignment.to_dict(),
            "instance_id": self.instance_id,
        }


@dataclass(frozen=True)
class StreamsGroupDescription:
    """A streams group as ``kafka-streams-groups --describe --state --members --verbose`` shows it."""

    group_id: str
    state: str
    coordinator_id: int | None
    group_epoch: int | None
    target_assignment_epoch: int | None
    topology_epoch: int | None
    members: tuple[StreamsGroupMember, ...] = ()
    type: GroupType = GroupType.STREAMS

    @property
    def is_empty(self) -> bool:
        return not self.members

    def to_dict(self) -> dict:
        return {
            "group_id": self.group_id,
            "type": self.type.value,
            "state": self.state,
            "coordinator_id": self.coordinator_id,
            "group_epoch": self.group_epoch,
            "target_assignment_epoch": self.target_assignment_epoch,
            "topology_epoch": self.topology_epoch,
            "members": [m.to_dict() for m in self.members],
        }


# -- offsets -------------------------------------------------------------------


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

    def to_dict(self) -> dict:
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
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    def to_dict(self) -> dict:
        return {"group_id": self.group_id, "total_lag": self.total_lag,
                "partitions": [p.to_dict() for p in self.partitions]}


# -- configs -------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigEntry:
    """A config value and where it comes from (``DYNAMIC_GROUP_CONFIG``, ``STATIC_BROKER_CONFIG``, ``DEFAULT_CONFIG`` ...)."""

    name: str
    value: str | None
    source: str
    sensitive: bool = False

    @property
    def is_dynamic(self) -> bool:
        return self.source.startswith("DYNAMIC_")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GroupConfig:
    """Every group-level config of one group, defaults included (``kafka-configs --describe --all``)."""

    group_id: str
    entries: dict[str, ConfigEntry] = field(default_factory=dict)

    @property
    def dynamic(self) -> dict[str, str | None]:
        """Only the values set for this group (what ``--describe`` without ``--all`` shows)."""
        return {n: e.value for n, e in sorted(self.entries.items()) if e.source == "DYNAMIC_GROUP_CONFIG"}

    def value(self, name: str) -> str | None:
        entry = self.entries.get(name)
        return entry.value if entry else None

    def to_dict(self) -> dict:
        return {"group_id": self.group_id, "dynamic": self.dynamic,
                "effective": {n: e.value for n, e in sorted(self.entries.items())}}


@dataclass(frozen=True)
class GroupConfigChange:
    """What an alter of group configs did: the dynamic values before and after, read back from the cluster."""

    group_id: str
    before: dict[str, str | None]
    after: dict[str, str | None]
    requested_set: dict[str, str]
    requested_delete: tuple[str, ...]
    applied: bool
    dry_run: bool

    @property
    def changed(self) -> dict[str, tuple[str | None, str | None]]:
        keys = set(self.before) | set(self.after)
        return {k: (self.before.get(k), self.after.get(k)) for k in sorted(keys) if self.before.get(k) != self.after.get(k)}

    def to_dict(self) -> dict:
        return {**asdict(self), "requested_delete": list(self.requested_delete),
                "changed": {k: list(v) for k, v in self.changed.items()}}


# -- features ------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureUpdate:
    """One feature-level change as planned, and whether it was applied.

    ``noop`` is true when the feature already is at the requested level (the
    provider then sends nothing); ``applied`` is false for dry runs and no-ops.
    """

    feature: str
    action: str  # upgrade | downgrade | disable
    from_level: int
    to_level: int
    dry_run: bool
    noop: bool
    applied: bool
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


# -- membership ------------------------------------------------------------------


@dataclass(frozen=True)
class MemberRemoval:
    """Result of forcing members out of a group (LeaveGroup)."""

    group_id: str
    group_type: GroupType
    removed: tuple[str, ...]
    failed: dict[str, str] = field(default_factory=dict)
    not_found: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"group_id": self.group_id, "group_type": self.group_type.value, "removed": list(self.removed),
                "failed": dict(self.failed), "not_found": list(self.not_found)}


# -- broker side -----------------------------------------------------------------


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """The broker's ``group.*`` settings a migration depends on (from one broker's config)."""

    broker_id: int
    values: dict[str, str]

    @property
    def rebalance_protocols(self) -> tuple[str, ...]:
        raw = self.values.get("group.coordinator.rebalance.protocols", "")
        return tuple(p.strip() for p in raw.split(",") if p.strip())

    @property
    def migration_policy(self) -> str:
        return self.values.get("group.consumer.migration.policy", "")

    def int_value(self, name: str) -> int | None:
        raw = self.values.get(name)
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            return None

    def to_dict(self) -> dict:
        return {"broker_id": self.broker_id, "rebalance_protocols": list(self.rebalance_protocols),
                "migration_policy": self.migration_policy, "values": dict(sorted(self.values.items()))}


@dataclass(frozen=True)
class BrokerVersion:
    """What the protocol tells about a broker's release.

    Kafka has no request that returns a broker's software version. The
    highest ``metadata.version`` a broker supports names its release line
    (``4.3-IV0`` -> ``4.3``); the patch release (4.2.0 vs 4.2.1) cannot be
    seen over the wire, which is why preflight asks for it when it matters.
    """

    node_id: int
    release: str
    metadata_version_max: str
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict:
        return {"node_id": self.node_id, "release": self.release, "metadata_version_max": self.metadata_version_max}

"""Groups in the vocabulary of ``kafka-groups``, ``kafka-consumer-groups`` and ``kafka-streams-groups``."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.model.offsets import TopicPartition


class GroupType(StrEnum):
    """The group types a Kafka 4.x coordinator knows (``ListGroups`` ``GroupType``)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    STREAMS = "streams"
    SHARE = "share"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, value: str | None) -> GroupType:
        """A type name as the brokers or the tools spell it; anything else is ``UNKNOWN``."""
        if isinstance(value, GroupType):
            return value
        exact = _TYPES.get(value or "")
        if exact is not None:
            return exact
        try:
            return cls((value or "").strip().lower())
        except ValueError:
            return cls.UNKNOWN


class GroupState(StrEnum):
    """Group states, spelled as ``kafka-consumer-groups`` and ``kafka-streams-groups`` print them.

    Classic groups are PreparingRebalance, CompletingRebalance, Stable, Empty or
    Dead; consumer (KIP-848) groups add Assigning and Reconciling; streams
    (KIP-1071) groups add NotReady. ``UNKNOWN`` is what the provider reports
    when it could not establish the state: it is never a guess.
    """

    STABLE = "Stable"
    EMPTY = "Empty"
    DEAD = "Dead"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    NOT_READY = "NotReady"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, value: str | None, *, strict: bool = False) -> GroupState:
        """``Stable``, ``STABLE``, ``preparing_rebalance`` ... -> the state.

        A name that is not a Kafka group state is ``UNKNOWN`` when read from a
        cluster (a newer broker may know more states), and an error with
        ``strict`` (a state a user asked to wait for must exist).
        """
        if isinstance(value, GroupState):
            return value
        key = (value or "").replace("_", "").replace(" ", "").lower()
        state = _STATES.get(key)
        if state is not None:
            return state
        if strict:
            known = ", ".join(s.value for s in cls if s is not cls.UNKNOWN)
            raise InvalidArgument(f"{value!r} is not a Kafka group state.", remedy=f"Use one of: {known}.")
        return cls.UNKNOWN


#: exact names -> member, and each state's lower-case name without separators -> member: the parses above
#: run once per group of an inventory (tens of thousands), so they look names up instead of scanning the enum
_TYPES: dict[str, GroupType] = {t.value: t for t in GroupType}
_STATES: dict[str, GroupState] = {s.value.lower(): s for s in GroupState}


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units, 32-bit overflow)."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(group_id: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``
    (Kafka's ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def normalize_state(state: str | None) -> GroupState:
    """Kafka's state names as the CLI tools print them (``Stable``, ``PreparingRebalance`` ...)."""
    return GroupState.parse(state)


@dataclass(frozen=True)
class GroupListing:
    """One row of ``kafka-groups --list`` (group id, type, protocol type, state)."""

    group_id: str
    type: GroupType
    state: GroupState
    protocol_type: str = ""

    def __post_init__(self) -> None:
        # a state given as text (a test, a recorded fact) is stored as the enum Kafka's tools name
        object.__setattr__(self, "state", GroupState.parse(self.state))

    def to_dict(self) -> dict[str, Any]:  # Any: JSON of several shapes, which the Airflow layers index into
        return {"group_id": self.group_id, "type": self.type.value, "state": self.state.value,
                "protocol_type": self.protocol_type}


class MemberProtocol(StrEnum):
    """Which rebalance protocol a member speaks; in a mixed consumer group some are still classic."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    STREAMS = "streams"
    UNKNOWN = "unknown"


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

    def to_dict(self) -> dict[str, Any]:  # Any: JSON of several shapes, which the Airflow layers index into
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
    state: GroupState
    assignor: str
    coordinator_id: int | None
    members: tuple[ConsumerGroupMember, ...] = ()
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None

    def __post_init__(self) -> None:
        # a state given as text (a test, a recorded fact) is stored as the enum Kafka's tools name
        object.__setattr__(self, "state", GroupState.parse(self.state))

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

    def to_dict(self) -> dict[str, Any]:  # Any: JSON of several shapes, which the Airflow layers index into
        return {
            "group_id": self.group_id,
            "type": self.type.value,
            "state": self.state.value,
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

    def to_dict(self) -> dict[str, Any]:  # Any: JSON of several shapes, which the Airflow layers index into
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
    #: the address the member connects from, as the coordinator sees it (its ClientHost; "" when not given)
    host: str = ""

    def to_dict(self) -> dict[str, Any]:  # Any: JSON of several shapes, which the Airflow layers index into
        return {
            "member_id": self.member_id,
            "process_id": self.process_id,
            "host": self.host,
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
    state: GroupState
    coordinator_id: int | None
    group_epoch: int | None
    target_assignment_epoch: int | None
    topology_epoch: int | None
    members: tuple[StreamsGroupMember, ...] = ()
    type: GroupType = GroupType.STREAMS

    def __post_init__(self) -> None:
        # a state given as text (a test, a recorded fact) is stored as the enum Kafka's tools name
        object.__setattr__(self, "state", GroupState.parse(self.state))

    @property
    def is_empty(self) -> bool:
        return not self.members

    def to_dict(self) -> dict[str, Any]:  # Any: JSON of several shapes, which the Airflow layers index into
        return {
            "group_id": self.group_id,
            "type": self.type.value,
            "state": self.state.value,
            "coordinator_id": self.coordinator_id,
            "group_epoch": self.group_epoch,
            "target_assignment_epoch": self.target_assignment_epoch,
            "topology_epoch": self.topology_epoch,
            "members": [m.to_dict() for m in self.members],
        }



@dataclass(frozen=True)
class MemberRemoval:
    """Result of forcing members out of a group (LeaveGroup)."""

    group_id: str
    group_type: GroupType
    removed: tuple[str, ...]
    failed: dict[str, str] = field(default_factory=dict)
    not_found: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:  # Any: JSON of several shapes, which the Airflow layers index into
        return {"group_id": self.group_id, "group_type": self.group_type.value, "removed": list(self.removed),
                "failed": dict(self.failed), "not_found": list(self.not_found)}


#: A description of any group type the provider describes.
GroupDescription = ConsumerGroupDescription | StreamsGroupDescription

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
    epoch: int | None = None

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

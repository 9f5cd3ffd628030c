"""The cluster as its tools show it: nodes, the controller, each broker's release and group.* settings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

#: ``metadata.version`` feature levels and the names ``kafka-features`` prints for them
#: (Kafka's ``MetadataVersion`` enum, read from the 4.4.0 jars: a 4.4.0 broker supports up to 33; 34 is 4.5's,
#: not yet production in 4.4, as 31 was 4.4's in 4.3).
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
    32: "4.4-IV1",
    33: "4.4-IV2",
    34: "4.5-IV0",
}


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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)



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

    def to_dict(self) -> dict[str, object]:
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
    #: the feature ranges this broker supports (its own ApiVersions answer: brokers of two releases differ, e.g.
    #: share.version up to 2 on 4.4.0 and up to 1 on 4.3.1) and the finalized levels it knows
    supported_features: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)
    finalized_features: dict[str, int] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {"node_id": self.node_id, "release": self.release, "metadata_version_max": self.metadata_version_max}


#: the APIs a group protocol needs from whatever the clients connect to, in Kafka's names (ApiKeys)
GROUP_APIS = {68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 88: "StreamsGroupHeartbeat",
              89: "StreamsGroupDescribe"}


@dataclass(frozen=True)
class AdvertisedApis:
    """What one address the clients bootstrap from advertises in its ``ApiVersions`` answer.

    A broker advertises what it serves; a proxy or gateway in front of it advertises what *it* forwards, and a
    client sends a request only when the answer lists its API (else UnsupportedVersion). ``error``: the address
    gave no usable answer (unreachable, the connection closed, or an answer without a single API): nothing is known
    of it, which is never taken for "everything is there"."""

    address: str
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    error: str | None = None
    #: the provider bootstraps from this address too (its describes of the group go through it)
    provider_uses: bool = False

    def missing(self, api_keys: Iterable[int]) -> tuple[int, ...]:
        return tuple(k for k in api_keys if k not in self.api_versions)

    def to_dict(self) -> dict[str, object]:
        return {"address": self.address, "api_keys": sorted(self.api_versions), "error": self.error,
                "provider_uses": self.provider_uses}

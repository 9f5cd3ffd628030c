"""What the preflight judges and answers: the facts read from the cluster (:class:`PreflightFacts`), one
check's verdict (:class:`Check`), the report, the modes and the constants the checks share. No I/O."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from airflow_provider_kip848.kafka.model import (
    AdvertisedApis,
    BrokerVersion,
    ClusterFeatures,
    ConsumerGroupDescription,
    GroupCoordinatorConfig,
    GroupListing,
    StreamsGroupDescription,
)

#: the DAG that migrates a consumer group offline, named by remedies when the online path is refused
OFFLINE_CONSUMER_DAG = "kip848_consumer_offline_migration"

MODES = {
    "classic_to_consumer": "online upgrade of a classic group to the consumer protocol (KIP-848)",
    "consumer_to_classic": "online rollback of a consumer group to the classic protocol",
    "classic_to_consumer_offline": ("offline migration of a classic group to the consumer protocol (stop every "
                                    "instance, Empty, restart): when the online upgrade is refused"),
    "consumer_to_classic_offline": "offline rollback of a consumer group to the classic protocol",
    "classic_to_streams": ("offline migration of a Kafka Streams application's classic group to a streams group "
                           "(KIP-1071)"),
    "streams_to_classic": ("offline rollback of a Kafka Streams application's streams group to the classic "
                           "protocol (an empty streams group converts on the first classic join)"),
    "enable_feature": "finalize a feature level (group.version or streams.version)",
    "downgrade_feature": ("lower or disable group.version, streams.version or share.version (refused while groups "
                          "of that type exist)"),
    "disable_feature": ("lower or disable group.version, streams.version or share.version under approval (the "
                        "kafka_disable_group_feature DAG): refused while a group of that type has members or its "
                        "members cannot be counted; empty ones are listed (warn): they stay, unusable until the "
                        "feature is raised again"),
    "delete_streams_group": ("delete an empty streams group (the kip1071_delete_streams_group DAG): refused for "
                             "another type or a group with members"),
}
PASS, WARN, FAIL = "pass", "warn", "fail"
#: the protocol each group mode moves to
TARGET_PROTOCOL = {"classic_to_consumer": "consumer", "consumer_to_classic": "classic",
                   "classic_to_consumer_offline": "consumer", "consumer_to_classic_offline": "classic",
                   "classic_to_streams": "streams", "streams_to_classic": "classic"}
#: the modes that stop every instance first (the group converts while empty, under every policy)
OFFLINE_MODES = frozenset({"classic_to_consumer_offline", "consumer_to_classic_offline", "classic_to_streams",
                           "streams_to_classic"})

#: the rebalance protocol a feature serves (share groups are governed by share.version alone: the brokers'
#: group.coordinator.rebalance.protocols does not list them)
FEATURE_PROTOCOL = {"group.version": "consumer", "streams.version": "streams"}
#: the metadata.version at which a newly formatted cluster has a feature level on by default (Kafka's
#: "bootstrap" metadata version). Not a dependency: none of these levels depends on metadata.version, and
#: the controller finalizes them on older metadata (verified on the real broker); the preflight says so.
FEATURE_BOOTSTRAP_METADATA = {("group.version", 1): (22, "4.0-IV0"), ("streams.version", 1): (29, "4.2-IV1"),
                              ("share.version", 1): (28, "4.2-IV0")}
BUILTIN_CLASSIC_ASSIGNORS = frozenset({"range", "roundrobin", "sticky", "cooperative-sticky"})


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    evidence: str
    remedy: str = ""


@dataclass(frozen=True)
class PreflightReport:
    mode: str
    group_id: str | None
    checks: tuple[Check, ...]

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == FAIL)

    @property
    def warnings(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == WARN)

    @property
    def passed(self) -> bool:
        return not self.failures

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "group_id": self.group_id, "passed": self.passed,
                "failures": [c.name for c in self.failures], "warnings": [c.name for c in self.warnings],
                "checks": [asdict(c) for c in self.checks]}

    def render_text(self) -> str:
        head = f"Preflight {self.mode} for {self.group_id or 'the cluster'}: " + (
            "PASSED" if self.passed else f"FAILED ({len(self.failures)} check(s))")
        lines = [head]
        for c in self.checks:
            lines.append(f"  [{c.status.upper():4}] {c.name}: {c.evidence}")
            if c.remedy and c.status != PASS:
                lines.append(f"         -> {c.remedy}")
        return "\n".join(lines)


@dataclass(frozen=True)
class PreflightFacts:
    brokers: tuple[BrokerVersion, ...]
    features: ClusterFeatures
    coordinator: GroupCoordinatorConfig
    listing: GroupListing | None = None
    description: ConsumerGroupDescription | StreamsGroupDescription | None = None
    user_data: dict[str, bytes] = field(default_factory=dict)
    #: downgrade_feature: every group of the type the feature enables -> its member count
    dependent_groups: dict[str, int] = field(default_factory=dict)
    #: the application's declared source topics -> partition count (None: the topic does not exist)
    source_topics: dict[str, int | None] = field(default_factory=dict)
    #: the topics the group has committed offsets on (what the application consumed until now)
    committed_topics: tuple[str, ...] = ()
    #: every broker's group.* configs (``coordinator`` is one of them); not given: ``coordinator``'s alone
    coordinators: tuple[GroupCoordinatorConfig, ...] = ()
    #: the group's own (dynamic) group configs, read whether or not the group exists (Kafka keeps them after the
    #: group is deleted, KAFKA-20236); None: not read (``group_configs_error`` says why when reading failed)
    group_configs: dict[str, str | None] | None = None
    group_configs_error: str | None = None
    #: whether the group has committed offsets (read for an existing group without members); None: not read
    group_has_offsets: bool | None = None
    #: what each address the applications' clients bootstrap from advertises (ApiVersions); None: not read
    client_apis: tuple[AdvertisedApis, ...] | None = None

    def __post_init__(self) -> None:
        if not self.coordinators:
            object.__setattr__(self, "coordinators", (self.coordinator,))

    def for_group(self, listing: GroupListing | None,
                  description: ConsumerGroupDescription | StreamsGroupDescription | None,
                  user_data: dict[str, bytes] | None = None) -> PreflightFacts:
        """These cluster-wide facts with one group's: the brokers, features and coordinator configs
        are read once for a whole fleet (an inventory) and each group judged against them, without
        a request per group."""
        return replace(self, listing=listing, description=description, user_data=dict(user_data or {}))


#: the broker config that paces assignment updates, added with KIP-1251 in 4.3.0 (1 s by default; names and
#: default read from GroupCoordinatorConfig of the 4.3.1 broker; absent on 4.2.1)
ASSIGNMENT_INTERVAL = {"consumer": "group.consumer.assignment.interval.ms",
                       "streams": "group.streams.assignment.interval.ms"}


def release_tuple(release: str) -> tuple[int, ...]:
    """A release's numbers (``4.2.1`` -> ``(4, 2, 1)``), to compare releases; ``(0,)`` for one that is not."""
    try:
        return tuple(int(x) for x in release.split("."))
    except ValueError:
        return (0,)

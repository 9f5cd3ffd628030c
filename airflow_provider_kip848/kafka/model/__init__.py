"""Typed facts about a Kafka cluster, in the vocabulary of Kafka's own tools.

Field names follow ``kafka-features`` (supported min/max, finalized version
level, epoch) and ``kafka-consumer-groups`` / ``kafka-streams-groups`` (group
type, state, member epoch, coordinator). Types and states are enums, as in
Kafka and confluent-kafka. Every class is a frozen dataclass with
``to_dict()``, so results travel as small JSON (XCom, reports) and compare
equal across the native and the CLI backends.

One module per subject: :mod:`.cluster`, :mod:`.features`, :mod:`.groups`,
:mod:`.offsets`, :mod:`.configs`; everything is re-exported here.
"""

from airflow_provider_kip848.kafka.model.cluster import (
    GROUP_APIS,
    METADATA_VERSION_NAMES,
    AdvertisedApis,
    BrokerNode,
    BrokerVersion,
    ClusterInfo,
    GroupCoordinatorConfig,
)
from airflow_provider_kip848.kafka.model.configs import ConfigEntry, GroupConfig, GroupConfigChange
from airflow_provider_kip848.kafka.model.features import ClusterFeatures, Feature, FeatureUpdate, feature_level_name
from airflow_provider_kip848.kafka.model.groups import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    GroupDescription,
    GroupListing,
    GroupState,
    GroupType,
    MemberProtocol,
    MemberRemoval,
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsTask,
    TaskAssignment,
    coordinator_partition,
    normalize_state,
)
from airflow_provider_kip848.kafka.model.offsets import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_VERSION,
    GroupOffsets,
    OffsetSnapshot,
    PartitionOffsets,
    TopicPartition,
    partitions,
)

__all__ = [
    "GROUP_APIS",
    "METADATA_VERSION_NAMES",
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_VERSION",
    "AdvertisedApis",
    "BrokerNode",
    "BrokerVersion",
    "ClusterFeatures",
    "ClusterInfo",
    "ConfigEntry",
    "ConsumerGroupDescription",
    "ConsumerGroupMember",
    "Feature",
    "FeatureUpdate",
    "GroupConfig",
    "GroupConfigChange",
    "GroupCoordinatorConfig",
    "GroupDescription",
    "GroupListing",
    "GroupOffsets",
    "GroupState",
    "GroupType",
    "MemberProtocol",
    "MemberRemoval",
    "OffsetSnapshot",
    "PartitionOffsets",
    "StreamsGroupDescription",
    "StreamsGroupMember",
    "StreamsTask",
    "TaskAssignment",
    "TopicPartition",
    "coordinator_partition",
    "feature_level_name",
    "normalize_state",
    "partitions",
]

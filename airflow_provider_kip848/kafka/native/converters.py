"""Client responses -> the typed facts of :mod:`..model`.

confluent-kafka returns its own objects, kafka-python returns dicts for some
requests and raw protocol messages for others (and for the two describe
requests of :mod:`.protocol`). Each function here turns one such answer into
the model the CLI backend's parsers also produce, so both backends compare
equal in the parity tests. No I/O here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from airflow_provider_kip848.kafka.model import (
    METADATA_VERSION_NAMES,
    BrokerNode,
    BrokerVersion,
    ClusterFeatures,
    ClusterInfo,
    ConfigEntry,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    Feature,
    GroupConfig,
    GroupListing,
    GroupType,
    MemberProtocol,
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsTask,
    TaskAssignment,
    TopicPartition,
    normalize_state,
    partitions,
)

#: Java ``ConfigEntry.ConfigSource`` names, which the CLI prints, by librdkafka's numeric codes.
CONFIG_SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}

#: ConsumerGroupDescribe v1 ``MemberType`` values.
_MEMBER_TYPES = {0: MemberProtocol.CLASSIC, 1: MemberProtocol.CONSUMER}


def host(raw: str | None) -> str:
    """A member's host as the tools print it (kafka-python keeps Java's leading ``/``)."""
    return (raw or "").lstrip("/")


def cluster_info(desc: Any) -> ClusterInfo:  # Any: an untyped client answer, converted here
    """confluent-kafka's ``DescribeClusterResult``."""
    return ClusterInfo(
        cluster_id=desc.cluster_id,
        controller_id=desc.controller.id if desc.controller else None,
        brokers=tuple(
            BrokerNode(node_id=n.id, host=n.host, port=n.port, rack=n.rack)
            for n in sorted(desc.nodes, key=lambda n: n.id)
        ),
    )


def broker_version(node_id: int, response: Any) -> BrokerVersion:  # Any: an untyped client answer, converted here
    """A broker's ``ApiVersions`` v3+ response: its release line from the ``metadata.version`` it supports."""
    mv_max = next((f.max_version for f in response.supported_features or [] if f.name == "metadata.version"), None)
    name = METADATA_VERSION_NAMES.get(mv_max, str(mv_max)) if mv_max is not None else "unknown"
    return BrokerVersion(
        node_id=node_id,
        release=name.split("-")[0] if "-IV" in name else "unknown",
        metadata_version_max=name,
        api_versions={k.api_key: (k.min_version, k.max_version) for k in response.api_keys},
        supported_features={f.name: (f.min_version, f.max_version) for f in response.supported_features or []},
        finalized_features={f.name: f.max_version_level for f in response.finalized_features or []},
    )


def cluster_features(raw: Mapping[str, Any]) -> ClusterFeatures:  # Any: an untyped client answer, converted here
    """kafka-python's ``describe_features()`` dict."""
    features = {}
    for name, info in raw.items():
        supported_min, supported_max = info.get("supported") or (0, 0)
        finalized = info.get("finalized")
        features[name] = Feature(
            name=name,
            supported_min=int(supported_min),
            supported_max=int(supported_max),
            finalized_level=int(finalized[1]) if finalized else 0,
            epoch=info.get("finalized_epoch"),
        )
    return ClusterFeatures(features)


def group_listing(row: Mapping[str, Any]) -> GroupListing:  # Any: an untyped client answer, converted here
    """One row of kafka-python's unfiltered ``list_groups()`` (ListGroups v5: type and state)."""
    return GroupListing(
        group_id=row["group_id"],
        type=GroupType.parse(row.get("group_type")),
        state=normalize_state(row.get("group_state")),
        protocol_type=row.get("protocol_type") or "",
    )


def consumer_group(  # Any: an untyped client answer, converted here
        group: Any, coordinator_id: int | None) -> ConsumerGroupDescription:
    """One group of a ``ConsumerGroupDescribe`` v1 response (error code 0)."""
    members = []
    for m in group.members:
        protocol = _MEMBER_TYPES.get(getattr(m, "member_type", -1), MemberProtocol.CONSUMER)
        members.append(ConsumerGroupMember(
            member_id=m.member_id,
            client_id=m.client_id,
            host=host(m.client_host),
            instance_id=m.instance_id,
            assignment=partitions((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions),
            target_assignment=partitions(
                (t.topic_name, p) for t in m.target_assignment.topic_partitions for p in t.partitions),
            member_epoch=m.member_epoch,
            protocol=protocol,
        ))
    return ConsumerGroupDescription(
        group_id=group.group_id,
        type=GroupType.CONSUMER,
        state=normalize_state(group.group_state),
        assignor=group.assignor_name,
        coordinator_id=coordinator_id,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        group_epoch=group.group_epoch,
        target_assignment_epoch=group.assignment_epoch,
    )


def _classic_assignment(member: Any) -> Any:
    """A classic member's assignment (``ConsumerProtocolAssignment``), None when empty or not a consumer's."""
    raw = member.member_assignment
    if not raw:
        return None
    try:
        return ConsumerProtocolAssignment.decode(bytes(raw))
    except (struct.error, ValueError, TypeError):  # a Connect worker's or another embedded protocol's
        return None


def classic_group(  # Any: an untyped client answer, converted here
        group: Any, coordinator_id: int | None) -> ConsumerGroupDescription:
    """One group of a ``DescribeGroups`` response (error code 0) of a classic group."""
    members = []
    for m in group.members:
        assignment = _classic_assignment(m)
        pairs = [(t.topic, p) for t in (assignment.assigned_partitions if assignment else []) for p in t.partitions]
        members.append(ConsumerGroupMember(
            member_id=m.member_id,
            client_id=m.client_id or "",
            host=host(m.client_host),
            instance_id=m.group_instance_id,
            assignment=partitions(pairs),
            protocol=MemberProtocol.CLASSIC,
        ))
    return ConsumerGroupDescription(
        group_id=group.group_id,
        type=GroupType.CLASSIC,
        state=normalize_state(group.group_state),
        assignor=group.protocol_data or "",
        coordinator_id=coordinator_id,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
    )


def classic_user_data(group: Any) -> dict[str, bytes]:  # Any: an untyped client answer, converted here
    """Member id -> the ``userData`` of its classic assignment, from a ``DescribeGroups`` group."""
    out = {}
    for m in group.members:
        assignment = _classic_assignment(m)
        data = (assignment.user_data if assignment else None) or b""
        out[m.member_id] = data.encode() if isinstance(data, str) else bytes(data)
    return out


def _tasks(task_ids: Any) -> tuple[StreamsTask, ...]:
    return tuple(sorted(StreamsTask(t.subtopology_id, p) for t in task_ids for p in t.partitions))


def _task_assignment(a: Any) -> TaskAssignment:
    return TaskAssignment(active=_tasks(a.active_tasks), standby=_tasks(a.standby_tasks), warmup=_tasks(a.warmup_tasks))


def streams_group(  # Any: an untyped client answer, converted here
        group: Any, coordinator_id: int | None) -> StreamsGroupDescription:
    """One group of a ``StreamsGroupDescribe`` response (error code 0)."""
    members = tuple(sorted(
        (
            StreamsGroupMember(
                member_id=m.member_id,
                process_id=m.process_id,
                client_id=m.client_id,
                member_epoch=m.member_epoch,
                protocol=MemberProtocol.CLASSIC if m.is_classic else MemberProtocol.STREAMS,
                assignment=_task_assignment(m.assignment),
                target_assignment=_task_assignment(m.target_assignment),
                instance_id=m.instance_id,
                host=host(m.client_host),
            )
            for m in group.members
        ),
        key=lambda m: m.member_id,
    ))
    return StreamsGroupDescription(
        group_id=group.group_id,
        state=normalize_state(group.group_state),
        coordinator_id=coordinator_id,
        group_epoch=group.group_epoch,
        target_assignment_epoch=group.assignment_epoch,
        topology_epoch=group.topology.epoch if group.topology is not None else None,
        members=members,
    )


def streams_internal_topics(group: Any) -> tuple[str, ...]:  # Any: an untyped client answer, converted here
    """The repartition and changelog topics of a streams group's topology (sorted; () without a topology)."""
    if group.topology is None:
        return ()
    names = {t.name for s in group.topology.subtopologies or []
             for t in [*(s.state_changelog_topics or []), *(s.repartition_source_topics or [])]}
    return tuple(sorted(names))


def streams_source_partitions(  # Any: an untyped client answer, converted here
        group: Any) -> tuple[TopicPartition, ...]:
    """Input partitions (source and repartition topics) of a streams group's active tasks."""
    if group.topology is None:
        return ()
    inputs = {
        s.subtopology_id: [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
        for s in group.topology.subtopologies or []
    }
    pairs: set[tuple[str, int]] = set()
    for m in group.members:
        for task in m.assignment.active_tasks:
            for topic in inputs.get(task.subtopology_id, []):
                pairs.update((topic, p) for p in task.partitions)
    return partitions(pairs)


def group_config(  # Any: an untyped client answer, converted here
        group_id: str, entries: Mapping[str, Any]) -> GroupConfig:
    """confluent-kafka's ``describe_configs()`` result for a GROUP resource."""
    return GroupConfig(
        group_id=group_id,
        entries={
            name: ConfigEntry(name=name, value=e.value,
                              source=CONFIG_SOURCE_NAMES.get(int(e.source), str(e.source)),
                              sensitive=bool(e.is_sensitive))
            for name, e in sorted(entries.items())
        },
    )


#: LeaveGroup's per-member UNKNOWN_MEMBER_ID: the coordinator has no such member (it left on its own between
#: the describe that named it and the removal)
UNKNOWN_MEMBER_ID = 25


def removal_outcome(results: Mapping[Any, Any], ident_of: Mapping[str, str],
                    ) -> tuple[list[str], dict[str, str], list[str]]:  # Any: an untyped client answer, converted here
    """kafka-python's ``remove_group_members()`` answer (keyed by member id or group.instance.id) ->
    (removed, failed: ident -> error name, gone: no such member any more), each member named as the caller
    knows it."""
    removed, failed, gone = [], {}, []
    for key, error in results.items():
        ident = ident_of.get(key, key)
        errno = getattr(error, "errno", 0)
        if errno == 0:
            removed.append(ident)
        elif errno == UNKNOWN_MEMBER_ID:
            gone.append(ident)
        else:
            failed[ident] = getattr(error, "__name__", type(error).__name__)
    return removed, failed, gone


def topic_partitions(  # Any: an untyped client answer, converted here
        metadata: Any, topics: Iterable[str]) -> list[TopicPartition]:
    """Every partition of ``topics`` in a confluent-kafka ``ClusterMetadata`` (missing topics left out)."""
    return [TopicPartition(t, p) for t in topics if t in metadata.topics for p in metadata.topics[t].partitions]

"""Native admin backend: every action of :class:`~..api.ClusterAdmin` with confluent-kafka and kafka-python.

Which client answers what is in :mod:`.transport`; responses become the
typed facts of :mod:`..model` in :mod:`.converters`. Every method returns
those facts and raises the errors of :mod:`..errors`; no client object or
client exception leaks out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from confluent_kafka.admin import ConfigEntry as ConfluentConfigEntry
from kafka import errors as kerr
from kafka.admin import MemberToRemove, UpdateFeatureType
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaPythonTopicPartition

from airflow_provider_kip848.kafka import errors as E
from airflow_provider_kip848.kafka.api import ClusterAdmin
from airflow_provider_kip848.kafka.arguments import id_list, require_bool, require_group_id
from airflow_provider_kip848.kafka.inventory import FleetJudge, GroupInventory, InventoryEntry, inventory_entry
from airflow_provider_kip848.kafka.model import (
    BrokerVersion,
    ClusterFeatures,
    ClusterInfo,
    ConsumerGroupDescription,
    FeatureUpdate,
    GroupConfig,
    GroupCoordinatorConfig,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    GroupState,
    GroupType,
    MemberRemoval,
    PartitionOffsets,
    StreamsGroupDescription,
    TopicPartition,
    normalize_state,
)
from airflow_provider_kip848.kafka.native import converters as C
from airflow_provider_kip848.kafka.native.batch import (
    CLASSIC,
    CONSUMER,
    DESCRIBE_KINDS,
    STREAMS,
    BatchReader,
    collector_paused,
    offset_fetch_request,
)
from airflow_provider_kip848.kafka.native.protocol import ConsumerGroupDescribeRequest, StreamsGroupDescribeRequest
from airflow_provider_kip848.kafka.native.transport import Transport, raise_retriable
from airflow_provider_kip848.kafka.rules.group_configs import ConfigChangePlan
from airflow_provider_kip848.kafka.rules.offsets import streams_group_refusal
from airflow_provider_kip848.kafka.rules.preflight import PreflightFacts
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.kafka.translate import (
    GROUP_ID_NOT_FOUND,
    NON_EMPTY_GROUP,
    UNSUPPORTED_VERSION,
    feature_refusal,
    group_error,
)

_STREAMS_UNSUPPORTED_REMEDY = ("Finalize streams.version=1 (kafka-features upgrade --feature streams.version=1) on "
                               "Kafka 4.2.1+ brokers, or upgrade the brokers.")


def _epoch(leader_epoch: int | None) -> int | None:
    """A committed offset's leader epoch; Kafka's -1 (unknown) is None, as the CLI backend reports it."""
    return leader_epoch if leader_epoch is not None and leader_epoch >= 0 else None


def _committed(group: Any) -> dict[TopicPartition, tuple[int, int | None]]:
    """One group of an OffsetFetch v8+ answer: partition -> (committed offset, leader epoch); -1 (none) left out."""
    return {TopicPartition(t.name, p.partition_index): (p.committed_offset, _epoch(p.committed_leader_epoch))
            for t in group.topics for p in t.partitions if p.committed_offset is not None and p.committed_offset >= 0}


#: a partition as a plain ``(topic, partition)`` pair: the inventory keys its per-partition facts so (tuples hash
#: and sort in C; a ``TopicPartition`` dataclass hashes in Python, and an inventory of tens of thousands of
#: groups looks partitions up hundreds of thousands of times)
_Pair = tuple[str, int]


def _committed_pairs(group: Any) -> dict[_Pair, tuple[int, int | None]]:
    """:func:`_committed` keyed by ``(topic, partition)`` pairs."""
    out: dict[_Pair, tuple[int, int | None]] = {}
    for t in group.topics:
        name = t.name
        for p in t.partitions:
            offset = p.committed_offset
            if offset is not None and offset >= 0:
                out[(name, p.partition_index)] = (offset, _epoch(p.committed_leader_epoch))
    return out


#: the describes to try for a group listed with each type, in order (a conversion since the listing
#: answers "not a <type> group" and the next one is tried)
_DESCRIBE_ORDER = {GroupType.CLASSIC: (CLASSIC, CONSUMER, STREAMS), GroupType.CONSUMER: (CONSUMER, CLASSIC, STREAMS),
                   GroupType.STREAMS: (STREAMS, CLASSIC, CONSUMER)}


def _descriptions(answers: Mapping[str, tuple[str, int, Any]]) -> tuple[
        dict[str, GroupDescription], dict[str, dict[str, bytes]], dict[str, set[TopicPartition]]]:
    """Batched describe answers -> each group's description, classic members' userData, and assigned
    partitions (a streams group's: the input partitions of its active tasks)."""
    descriptions: dict[str, GroupDescription] = {}
    user_data: dict[str, dict[str, bytes]] = {}
    assigned: dict[str, set[TopicPartition]] = {}
    for g, (kind, node, raw) in answers.items():
        if kind == STREAMS:
            descriptions[g] = C.streams_group(raw, node)
            assigned[g] = set(C.streams_source_partitions(raw))
            continue
        desc = C.classic_group(raw, node) if kind == CLASSIC else C.consumer_group(raw, node)
        if kind == CLASSIC:
            user_data[g] = C.classic_user_data(raw)
        descriptions[g] = desc
        assigned[g] = {tp for m in desc.members for tp in m.assignment}
    return descriptions, user_data, assigned


def _group_offsets(group_id: str, committed: Mapping[_Pair, tuple[int, int | None]], assigned: set[_Pair],
                   starts: Mapping[_Pair, int], ends: Mapping[_Pair, int], log_errors: Mapping[_Pair, str]
                   ) -> tuple[GroupOffsets, str | None]:
    """The rows :meth:`KafkaAdmin.group_offsets` reports (committed and assigned partitions, in partition
    order), from batched reads keyed by ``(topic, partition)``; and why some partition's log offsets are
    unknown (None: all known)."""
    pairs = sorted(committed.keys() | assigned) if assigned else sorted(committed)
    rows = []
    for pair in pairs:
        c = committed.get(pair)
        rows.append(PartitionOffsets(topic=pair[0], partition=pair[1], committed=None if c is None else c[0],
                                     leader_epoch=None if c is None else c[1], log_start=starts.get(pair),
                                     log_end=ends.get(pair)))
    unread = [f"{TopicPartition(*pair)}: {log_errors[pair]}" for pair in pairs if pair in log_errors] \
        if log_errors else []
    return GroupOffsets(group_id, tuple(rows)), ("log offsets unknown for " + "; ".join(unread[:5]) if unread
                                                 else None)


def _by_pair(values: Mapping[TopicPartition, Any]) -> dict[_Pair, Any]:
    return {(tp.topic, tp.partition): v for tp, v in values.items()}


def _offset_fetch_errors(response: Any) -> list[tuple[int, str | None]]:
    """The group and partition error codes of an OffsetFetch v8+ answer. A non-retriable one is raised here
    (inside the retried call, so it is translated like any broker refusal); retriable ones (a coordinator
    loading or moving, an offset commit still pending) are returned, to be asked again."""
    codes: list[tuple[int, str | None]] = [(g.error_code, None) for g in response.groups]
    codes += [(p.error_code, f"{t.name}-{p.partition_index}") for g in response.groups for t in g.topics
              for p in t.partitions]
    for code, where in codes:
        if code and not getattr(kerr.for_code(code), "retriable", False):
            raise kerr.for_code(code)(where or "")
    return codes


def _group_errors(response: Any) -> list[tuple[int, str | None]]:
    """The per-group error codes of a describe answer (DescribeGroups, ConsumerGroupDescribe, StreamsGroupDescribe)."""
    return [(g.error_code, getattr(g, "error_message", None)) for g in response.groups]



def _coordinator_config(broker_id: int, entries: Mapping[str, Any]) -> GroupCoordinatorConfig:
    """One broker's DescribeConfigs answer, kept to its ``group.*`` settings that have a value."""
    return GroupCoordinatorConfig(broker_id=broker_id, values={name: e.value for name, e in entries.items()
                                                               if name.startswith("group.") and e.value is not None})

class KafkaAdmin(ClusterAdmin):
    """Administrative reads and changes against one cluster.

    Clients are created lazily and closed by :meth:`close` (or the context
    manager), so constructing a ``KafkaAdmin`` never touches the network.
    """

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._transport = Transport(settings)

    def __repr__(self) -> str:
        return f"KafkaAdmin({self.settings!r})"

    def close(self) -> None:
        self._transport.close()

    def __del__(self) -> None:  # a forgotten close() must not leave kafka-python's network thread behind
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def _t(self) -> Transport:
        return self._transport

    # -- cluster -----------------------------------------------------------

    def describe_cluster(self) -> ClusterInfo:
        """Cluster id, controller and brokers (``kafka-metadata-quorum``/``DescribeCluster``).

        librdkafka sends DescribeCluster to the broker its metadata names as the controller, and once that node
        dies it waits for it until its next metadata refresh (minutes): one attempt of the whole request timeout
        failed a restore during a failover. So each attempt takes a quarter of the timeout, and after one that
        timed out, a metadata request (any live broker answers it) names a live controller for the next."""
        deadline = time.monotonic() + self._t.timeout_s
        attempt = max(2.0, self._t.timeout_s / 4)

        def ask() -> Any:
            while True:
                per = max(0.5, min(attempt, deadline - time.monotonic()))
                try:
                    return self._t.confluent.describe_cluster(request_timeout=per).result(per + 5)
                except KafkaException as exc:
                    err = exc.args[0] if exc.args else None
                    timed_out = isinstance(err, KafkaError) and err.code() == KafkaError._TIMED_OUT
                    if not timed_out or time.monotonic() + 0.5 >= deadline:
                        raise
                try:  # refresh the metadata: a live broker names the controller
                    self._t.confluent.list_topics(timeout=max(0.5, min(attempt, deadline - time.monotonic())))
                except KafkaException:
                    pass

        return C.cluster_info(self._t.retrying(ask))

    def broker_versions(self) -> list[BrokerVersion]:
        """Each broker's release line, from the ``metadata.version`` range it supports (see :class:`BrokerVersion`)."""
        versions = []
        for broker in self.describe_cluster().brokers:
            response = self._t.send(
                lambda: ApiVersionsRequest(client_software_name="airflow-provider-kip848",
                                           client_software_version="0", min_version=3),
                node_id=broker.node_id,
            )
            versions.append(C.broker_version(broker.node_id, response))
        return versions

    def group_coordinator_config(self, broker_id: int | None = None) -> GroupCoordinatorConfig:
        """The broker's ``group.*`` configs (protocols, migration policy, session/heartbeat/standby bounds)."""
        if broker_id is None:
            info = self.describe_cluster()
            broker_id = info.controller_id if info.controller_id is not None else info.brokers[0].node_id
        resource = ConfigResource(ResourceType.BROKER, str(broker_id))
        with self.requires("read the brokers' group.* configs", ("DESCRIBE_CONFIGS", "CLUSTER", None)):
            entries = self._describe_configs(resource)
        return _coordinator_config(broker_id, entries)

    def group_coordinator_configs(self) -> tuple[GroupCoordinatorConfig, ...]:
        """Every broker's ``group.*`` configs, each asked of its own broker, all requests in flight at once (a
        broker's own config is answered by that broker; librdkafka takes one broker resource per request)."""
        ids = sorted(b.node_id for b in self.describe_cluster().brokers)
        resources = [ConfigResource(ResourceType.BROKER, str(i)) for i in ids]
        timeout = self._t.timeout_s

        def read() -> list[Any]:
            futures = [self._t.confluent.describe_configs([r], request_timeout=timeout)[r] for r in resources]
            return [f.result(timeout + 5) for f in futures]

        with self.requires("read the brokers' group.* configs", ("DESCRIBE_CONFIGS", "CLUSTER", None)):
            answers = self._t.retrying(read)
        return tuple(_coordinator_config(i, entries) for i, entries in zip(ids, answers, strict=True))

    def _describe_configs(self, resource: ConfigResource) -> Any:
        timeout = self._t.timeout_s
        return self._t.retrying(
            lambda: self._t.confluent.describe_configs([resource], request_timeout=timeout)[resource]
            .result(timeout + 5))

    # -- features ----------------------------------------------------------

    def describe_features(self) -> ClusterFeatures:
        """Supported ranges and finalized levels of every feature (``kafka-features describe``)."""
        return C.cluster_features(self._t.kafka_python_call("describe_features"))

    def _send_feature_update(self, plan: FeatureUpdate, *, dry_run: bool, unsafe: bool) -> None:
        kind = UpdateFeatureType.UPGRADE
        if plan.action in ("downgrade", "disable"):
            kind = UpdateFeatureType.UNSAFE_DOWNGRADE if unsafe else UpdateFeatureType.SAFE_DOWNGRADE
        result = self._t.kafka_python_call("update_features", {plan.feature: (kind, plan.to_level)},
                                           validate_only=dry_run)
        outcome = result.get(plan.feature, "OK")
        if outcome != "OK":
            raise feature_refusal(plan.feature, plan, outcome)

    # -- groups: listing and description -------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group with its type and state, streams and share groups included."""
        rows = self._t.kafka_python_call("list_groups")
        return sorted((C.group_listing(row) for row in rows), key=lambda g: g.group_id)

    def group_listing(self, group_id: str) -> GroupListing:
        """The listing of one group, or :class:`GroupNotFound` (:class:`AuthorizationFailed` when the
        principal may not describe it: ListGroups leaves such groups out instead of refusing)."""
        require_group_id(group_id)
        for listing in self.list_groups():
            if listing.group_id == group_id:
                return listing
        self._check_group_visible(group_id)
        self._confirm_absent(group_id)
        raise E.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")

    def _confirm_absent(self, group_id: str) -> None:
        """Ask the group's coordinator before calling a group absent.

        ListGroups is answered from every coordinator partition a broker leads *now*: while a broker
        shuts down, restarts or hands a partition over, the partitions it no longer (or not yet)
        leads are silently left out, and a live group vanishes from the listing. A sensor waiting
        for "empty" must not take that for "the group is gone". The coordinator itself answers
        with a retriable NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS in that window (retried
        here); it says "not found" only of a group it does not have. A group it describes, or
        one with committed offsets, exists.
        """
        moving = E.KafkaConnectionError(
            f"Group {group_id!r} exists but is missing from the brokers' group listing: a group coordinator is "
            "moving (a broker restarting or shutting down)",
            remedy="Retry in a few seconds; sensors poke again by themselves.")
        response = self._t.send(lambda: DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
                                group_id=group_id, errors=_group_errors)
        group = response.groups[0]
        message = getattr(group, "error_message", None) or ""
        if group.error_code == 0 and normalize_state(group.group_state) is not GroupState.DEAD:
            raise moving  # a classic group its coordinator describes
        if group.error_code == GROUP_ID_NOT_FOUND and "not a classic group" in message:
            raise moving  # a consumer, streams or share group the coordinator has
        # kafka-python, not confluent-kafka: librdkafka 2.16 crashes the process (SIGSEGV) on
        # ListConsumerGroupOffsets of a group id that does not exist.
        committed = self._t.kafka_python_call("list_group_offsets", {group_id: None}).get(group_id) or {}
        if any(getattr(meta, "offset", -1) >= 0 for meta in committed.values()):
            raise moving

    def _check_group_visible(self, group_id: str) -> None:
        """Raise :class:`AuthorizationFailed` if the principal lacks DESCRIBE on the group.

        FindCoordinator needs DESCRIBE on the group, exists or not, so it tells "not there" from
        "not allowed to see it". Any other failure leaves the verdict to the caller.
        """
        try:
            with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
                self._t.find_coordinator(group_id)
        except E.AuthorizationFailed:
            raise
        except E.Kip848Error:
            pass

    def describe_group(self, group_id: str) -> GroupDescription:
        """Describe a group of any type supported here (classic, consumer, streams).

        The group's coordinator is asked directly, with the describe of each type in turn (it answers
        "not a classic group" for a consumer group ...): no listing of every group. Only when no
        describe answers for it (absent, a share group, a type changing under our feet, or a refusal)
        does the listing decide, with the checks of :meth:`group_listing` (a group missing from a
        listing while its coordinator moves is not called absent).
        """
        require_group_id(group_id)
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            found = self._describe_at_coordinator(group_id)
        if found is not None:
            return found
        listing = self.group_listing(group_id)
        if listing.type is GroupType.STREAMS:
            return self.describe_streams_group(group_id)
        return self._describe_consumer_group(group_id, listing)

    def _describe_at_coordinator(self, group_id: str) -> GroupDescription | None:
        """The group as its coordinator describes it, trying DescribeGroups, then ConsumerGroupDescribe, then
        StreamsGroupDescribe while the coordinator answers "not a <type> group"; None when none describes it.

        Each request goes through :meth:`Transport.send`: a coordinator loading or moving is retried
        (found anew) and a coordinator that stays unavailable raises, as before; an answer is never
        read from a coordinator that said it is not the group's.
        """
        response = self._t.send(lambda: DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
                                group_id=group_id, errors=_group_errors)
        group = response.groups[0]
        message = getattr(group, "error_message", None) or ""
        if group.error_code == 0 and normalize_state(group.group_state) is not GroupState.DEAD:
            return C.classic_group(group, self._t.coordinator_id(group_id))
        if group.error_code != GROUP_ID_NOT_FOUND or "not a classic group" not in message:
            return None  # absent, or refused: the listing path decides and words it
        try:
            response = self._t.send(
                lambda: ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id, errors=_group_errors)
        except E.UnsupportedBrokerVersion:
            return None
        group = response.groups[0]
        if group.error_code == 0:
            return C.consumer_group(group, self._t.coordinator_id(group_id))
        if group.error_code != GROUP_ID_NOT_FOUND or "not a consumer group" not in (group.error_message or ""):
            return None
        try:
            stream = self._streams_group_response(group_id)
        except E.UnsupportedBrokerVersion:
            return None
        if stream.error_code == 0:
            return C.streams_group(stream, self._t.coordinator_id(group_id))
        return None

    # -- the fleet -------------------------------------------------------------------------

    def inventory(self, group_ids: Iterable[str] | None = None, *, timeout_s: float | None = None,
                  declared_broker_version: str | None = None) -> GroupInventory:
        """Every group of the cluster (or only ``group_ids``) with its facts and migration verdicts, in one call.

        Requests, whatever the number of groups: ListGroups and ApiVersions to every broker, one
        FindCoordinator, then per coordinator one describe per group type and one OffsetFetch (in chunks
        of :data:`.batch.CHUNK` groups), one Metadata and per partition leader one ListOffsets per spec,
        one DescribeConfigs per broker; one ListConfigResources (the groups that have group configs, Kafka
        4.1+: those no broker lists are described too, and the configs of those that do not exist read with
        one DescribeConfigs, ``orphan_group_configs``); all requests of a step in flight together. Retriable
        answers are retried
        until ``timeout_s`` (default: the connection's request timeout) from the start; what is still
        unknown then is reported so (an entry's ``error``, UNKNOWN verdicts, ``unanswered_brokers``),
        never guessed. ``group_ids`` names groups to read even when the listing leaves them out (a
        coordinator moving); those no coordinator has are in ``absent``. ``declared_broker_version``
        is passed to the verdicts' broker check (4.2.0 and 4.2.1 look alike on the wire). Python's cyclic
        garbage collector is paused during the call (:func:`.batch.collector_paused`).
        """
        with collector_paused():
            return self._inventory(group_ids, timeout_s, declared_broker_version)

    def _inventory(self, group_ids: Iterable[str] | None, timeout_s: float | None,
                   declared_broker_version: str | None) -> GroupInventory:
        started = time.monotonic()
        taken_at = datetime.now(UTC)
        wanted: set[str] | None = None
        if group_ids is not None:
            wanted = {require_group_id(g) for g in id_list("group_ids", group_ids)}
            if not wanted:  # an empty list names no group; every group is group_ids=None, never an empty list
                raise E.InvalidArgument("inventory: group_ids is empty, it names no group.",
                                        remedy="Name the groups to read, or leave group_ids out (None) to read every "
                                               "group of the cluster.")
        reader = BatchReader(self._t, started + (self.request_timeout_s if timeout_s is None else float(timeout_s)))
        listed, unanswered = reader.list_groups()
        # the ids with group configs that no broker lists: described below, to tell a group that does not exist
        # (whose configs a new group with its id inherits, KAFKA-20236) from one whose coordinator is moving
        config_groups, orphans_error = reader.config_groups()
        unlisted_configs = {g for g in config_groups or () if g not in listed and (wanted is None or g in wanted)}
        if wanted is not None:
            listed = {g: row for g, row in listed.items() if g in wanted}
        kinds = {g: _DESCRIBE_ORDER[row.type] for g, row in listed.items() if row.type in _DESCRIBE_ORDER}
        for g in ((wanted or set()) | unlisted_configs) - set(listed):
            kinds[g] = DESCRIBE_KINDS  # not listed (its coordinator moving?): asked anyway
        described = reader.describe(kinds)
        ids = sorted(set(listed) | (wanted or set()))
        fetched = reader.offsets([g for g in ids if g not in listed or listed[g].type is not GroupType.SHARE])
        descriptions, user_data, assigned = _descriptions(described.answers)
        committed = {g: _committed_pairs(raw) for g, (_, _, raw) in fetched.answers.items()}
        assigned_pairs = {g: {(tp.topic, tp.partition) for tp in tps} for g, tps in assigned.items() if tps}
        every_pair = {pair for pairs in committed.values() for pair in pairs}
        every_pair.update(pair for pairs in assigned_pairs.values() for pair in pairs)
        tp_starts, tp_ends, tp_errors = reader.log_offsets(TopicPartition(t, p) for t, p in every_pair)
        starts, ends, log_errors = _by_pair(tp_starts), _by_pair(tp_ends), _by_pair(tp_errors)
        absent = tuple(sorted(g for g in (wanted or set()) - set(listed) - set(descriptions)
                              if g in described.gone and not committed.get(g)))
        judge = self._fleet_judge(reader, declared_broker_version)
        entries: list[InventoryEntry] = []
        for g in ids:
            if g in described.gone and g not in descriptions and not committed.get(g):
                continue  # deleted since the listing, or never there (``absent`` when asked for by name)
            offsets, offsets_error = None, fetched.failed.get(g)
            if g in committed:
                offsets, offsets_error = _group_offsets(g, committed[g], assigned_pairs.get(g, set()), starts, ends,
                                                        log_errors)
            listing = listed.get(g)
            error = described.failed.get(g)
            if g not in descriptions and error is None and (listing is None or listing.type in _DESCRIBE_ORDER):
                error = "the group could not be described"
            entries.append(inventory_entry(g, listing, descriptions.get(g), user_data.get(g, {}), offsets, judge,
                                           error=error, offsets_error=offsets_error))
        orphans: dict[str, dict[str, str | None]] | None = None
        if config_groups is not None:
            gone = sorted(g for g in unlisted_configs if g in described.gone and g not in descriptions)
            unsure = sorted(g for g in unlisted_configs if g not in described.gone and g not in descriptions)
            if unsure:
                orphans_error = (f"whether group(s) {', '.join(unsure)} (which have group configs) exist is unknown: "
                                 + "; ".join(described.failed.get(g, "not described") for g in unsure))
            try:
                orphans = self._group_configs(gone)
                reader.requests["DescribeConfigs"] += 1 if gone else 0
            except E.Kip848Error as exc:
                orphans, orphans_error = None, f"the configs of groups that do not exist could not be read: {exc.what}"
        return GroupInventory(taken_at=taken_at, entries=tuple(entries), elapsed_s=time.monotonic() - started,
                              unanswered_brokers=unanswered, absent=absent, cluster_error=judge.facts_error,
                              requests=dict(reader.requests), orphan_group_configs=orphans,
                              orphan_group_configs_error=orphans_error)

    def _group_configs(self, group_ids: list[str]) -> dict[str, dict[str, str | None]]:
        """The dynamic configs of each group (one DescribeConfigs for all of them; {} for none)."""
        if not group_ids:
            return {}
        resources = [ConfigResource(ResourceType.GROUP, g) for g in group_ids]
        timeout = self._t.timeout_s

        def read() -> list[Any]:
            futures = self._t.confluent.describe_configs(resources, request_timeout=timeout)
            return [futures[r].result(timeout + 5) for r in resources]

        with self.requires("read the configs of groups that do not exist",
                           *(("DESCRIBE_CONFIGS", "GROUP", g) for g in group_ids)):
            answers = self._t.retrying(read)
        return {g: C.group_config(g, entries).dynamic for g, entries in zip(group_ids, answers, strict=True)}

    def _fleet_judge(self, reader: BatchReader, declared_broker_version: str | None) -> FleetJudge:
        """The cluster-wide facts of the verdicts, read once: every broker's release and the features
        (ApiVersions to every broker at once), every broker's group coordinator configs.
        A broker that does not answer leaves its release unknown: every verdict is then UNKNOWN."""
        versions, features, silent = reader.broker_facts()
        if silent or features is None:
            why = ("the brokers' releases are not all known: " + "; ".join(silent.values()) if silent
                   else "no broker answered ApiVersions")
            return FleetJudge(None, facts_error=why)
        try:
            coordinators = self.group_coordinator_configs()
        except E.Kip848Error as exc:
            return FleetJudge(None, facts_error=f"the brokers' group.* configs could not be read: {exc.what}")
        if not coordinators:
            return FleetJudge(None, facts_error="the cluster listed no broker to read group.* configs from")
        facts = PreflightFacts(brokers=tuple(versions), features=features, coordinator=coordinators[0],
                               coordinators=coordinators)
        return FleetJudge(facts, declared_broker_version=declared_broker_version)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """A classic or consumer group with members, assignments and (for consumer groups) epochs.

        Consumer (KIP-848) groups are described with ``ConsumerGroupDescribe``
        v1, which also says member by member whether a member still speaks the
        classic protocol (a mixed group during an online migration).
        """
        require_group_id(group_id)
        return self._describe_consumer_group(group_id, None)

    def _describe_consumer_group(self, group_id: str, listing: GroupListing | None) -> ConsumerGroupDescription:
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            # A group converting between classic and consumer (its first consumer member joins, or its
            # last one leaves) can answer ConsumerGroupDescribe as "not found" while the listing, read a
            # moment later, already (or still) says consumer. That is a race, not a wrong type: read again.
            for attempt in range(2):
                try:
                    return self._describe_consumer_group_once(group_id, listing if attempt == 0 else None)
                except E.WrongGroupType as exc:
                    if exc.actual is not GroupType.CONSUMER:
                        raise
                    time.sleep(0.2 * (attempt + 1))
            return self._describe_consumer_group_once(group_id, None)

    def _describe_consumer_group_once(self, group_id: str, listing: GroupListing | None) -> ConsumerGroupDescription:
        unsupported = None
        try:
            response = self._t.send(
                lambda: ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id, errors=_group_errors,
            )
            group = response.groups[0]
            if group.error_code == 0:
                return C.consumer_group(group, self._t.coordinator_id(group_id))
            if group.error_code == UNSUPPORTED_VERSION:
                unsupported = group.error_message or "UNSUPPORTED_VERSION"
            elif group.error_code != GROUP_ID_NOT_FOUND:
                raise group_error(group_id, group.error_code, group.error_message, self.settings)
        except E.UnsupportedBrokerVersion as exc:
            unsupported = exc.what
        listing = listing or self.group_listing(group_id)
        if listing.type is GroupType.CLASSIC:
            return C.classic_group(self._classic_group_response(group_id), self._t.coordinator_id(group_id))
        if unsupported is not None:
            # no ConsumerGroupDescribe: group.version is 0 (KIP-848 off) or the brokers predate 4.0
            raise E.UnsupportedBrokerVersion(
                f"The cluster does not serve ConsumerGroupDescribe, needed for {listing.type.value} group "
                f"{group_id!r} ({unsupported}).",
                remedy="Finalize group.version=1 (kafka-features upgrade --feature group.version=1) on Kafka 4.0+ "
                       "brokers, or upgrade the brokers.",
            )
        raise E.WrongGroupType(
            f"Group {group_id!r} is a {listing.type.value} group, not a classic or consumer group.",
            actual=listing.type,
            remedy="Use describe_streams_group() for streams groups." if listing.type is GroupType.STREAMS else None,
        )

    def classic_assignment_user_data(self, group_id: str) -> dict[str, bytes]:
        """Member id -> the ``userData`` of its classic assignment (non-empty means a custom client assignor).

        The broker refuses an online upgrade to the consumer protocol when any
        member's assignment carries userData ("unsupported custom assignor").
        """
        return C.classic_user_data(self._classic_group_response(group_id))

    def _classic_group_response(self, group_id: str) -> Any:
        """The group's entry of a ``DescribeGroups`` answer from its coordinator (error code 0).

        A coordinator that is loading, moving or not yet known answers with a per-group error code
        and an empty group ("Unknown", no members): that is retried, and never read as an empty group.
        """
        response = self._t.send(lambda: DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False),
                                group_id=group_id, errors=_group_errors)
        group = response.groups[0]
        if group.error_code != 0:
            raise group_error(group_id, group.error_code, getattr(group, "error_message", None), self.settings)
        return group

    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        """A streams group with members, task assignments and epochs (``StreamsGroupDescribe``)."""
        require_group_id(group_id)
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            group = self._streams_group_response(group_id)
            if group.error_code == GROUP_ID_NOT_FOUND:
                listing = self.group_listing(group_id)  # GroupNotFound if absent
                raise E.WrongGroupType(
                    f"Group {group_id!r} is a {listing.type.value} group, not a streams group.",
                    remedy="Use describe_consumer_group() for classic and consumer groups.",
                )
            if group.error_code != 0:
                raise group_error(group_id, group.error_code, group.error_message, self.settings)
            return C.streams_group(group, self._t.coordinator_id(group_id))

    def _streams_group_response(self, group_id: str) -> Any:
        """The group's entry of a ``StreamsGroupDescribe`` response (UNSUPPORTED_VERSION raised, with the remedy)."""
        try:
            response = self._t.send(
                lambda: StreamsGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False),
                group_id=group_id, errors=_group_errors,
            )
        except E.UnsupportedBrokerVersion as exc:
            raise E.UnsupportedBrokerVersion(f"The cluster does not serve StreamsGroupDescribe ({exc.what}).",
                                             remedy=_STREAMS_UNSUPPORTED_REMEDY) from exc
        group = response.groups[0]
        if group.error_code == UNSUPPORTED_VERSION:
            raise E.UnsupportedBrokerVersion(
                f"The cluster does not serve StreamsGroupDescribe ({group.error_message or 'UNSUPPORTED_VERSION'}).",
                remedy=_STREAMS_UNSUPPORTED_REMEDY)
        return group

    def streams_group_source_partitions(self, group_id: str) -> tuple[TopicPartition, ...]:
        """Input partitions (source and repartition topics) of the group's active tasks."""
        group = self._streams_group_response(group_id)
        return C.streams_source_partitions(group) if group.error_code == 0 else ()

    def streams_group_internal_topics(self, group_id: str) -> tuple[str, ...]:
        """The internal topics (repartition and changelog) of a streams group's topology, as its coordinator
        holds it; () when it holds no topology. Deleting the group deletes none of them."""
        require_group_id(group_id)
        with self.requires(f"describe group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            group = self._streams_group_response(group_id)
        if group.error_code != 0:
            raise group_error(group_id, group.error_code, group.error_message, self.settings)
        return C.streams_internal_topics(group)

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group (its committed offsets go with it)."""
        require_group_id(group_id)
        self.group_listing(group_id)
        with self.requires(f"delete group {group_id!r}", ("DELETE", "GROUP", group_id)):
            response = self._t.send(lambda: DeleteGroupsRequest(groups_names=[group_id]), group_id=group_id,
                                    errors=lambda r: [(code, None) for _, code in r.results])
            code = next((code for gid, code in response.results if gid == group_id), 0)
            if code == NON_EMPTY_GROUP:
                raise E.GroupNotEmpty(f"Group {group_id!r} still has active members; it cannot be deleted.")
            if code == GROUP_ID_NOT_FOUND:
                raise E.GroupNotFound(f"Group {group_id!r} does not exist on {self.settings.bootstrap_servers}.")
            if code != 0:
                raise group_error(group_id, code, f"DeleteGroups of {group_id!r}", self.settings)

    # -- membership ----------------------------------------------------------

    def remove_members(
        self,
        group_id: str,
        *,
        member_ids: Iterable[str] = (),
        instance_ids: Iterable[str] = (),
        all_members: bool = False,
        missing_ok: bool = False,
        reason: str = "removed by airflow-provider-kip848",
    ) -> MemberRemoval:
        """Force members out of a classic or consumer group with LeaveGroup.

        This is how a classic group is emptied before an offline streams
        migration without waiting a whole session timeout. Static members are
        removed by ``group.instance.id`` (which also releases the instance id),
        dynamic ones by member id. Streams groups reject LeaveGroup, so they
        are refused here with the reason. Unknown ids raise before anything is
        removed unless ``missing_ok``; with it, a member that left on its own
        between the describe and the removal (the coordinator answers
        UNKNOWN_MEMBER_ID) is reported ``not_found``, not ``failed``.
        """
        require_group_id(group_id)
        member_ids = id_list("member_ids", member_ids)
        instance_ids = id_list("instance_ids", instance_ids)
        all_members = require_bool(all_members, "all_members")
        missing_ok = require_bool(missing_ok, "missing_ok")
        if not all_members and not member_ids and not instance_ids:  # never "every member" by omission
            raise E.InvalidArgument(f"remove_members of group {group_id!r} names no member: an empty selection never "
                                    "means every member.",
                                    remedy="Pass member_ids or instance_ids, or all_members=True to remove every "
                                           "member.")
        if all_members and (member_ids or instance_ids):
            raise E.InvalidArgument(f"remove_members of group {group_id!r} is given all_members=True and ids at once.",
                                    remedy="Pass either the ids to remove or all_members=True, not both.")
        desc = self.describe_group(group_id)
        if isinstance(desc, StreamsGroupDescription):
            raise streams_group_refusal(group_id, "the broker rejects LeaveGroup for streams groups",
                                        remedy="Stop the application's instances (they leave on close) or wait for "
                                               "streams.session.timeout.ms to expire them.")
        by_member = {m.member_id: m for m in desc.members}
        by_instance = {m.instance_id: m for m in desc.members if m.instance_id}
        wanted = {i for i in member_ids if i in by_member} | {by_instance[i].member_id for i in instance_ids
                                                               if i in by_instance}
        missing = sorted({i for i in member_ids if i not in by_member}
                         | {i for i in instance_ids if i not in by_instance})
        if missing and not missing_ok:
            current = ", ".join(f"{m.member_id} ({m.instance_id})" if m.instance_id else m.member_id
                                for m in desc.members) or "none"
            raise E.GroupNotFound(
                f"Not members of group {group_id!r}: {', '.join(missing)}. Current members: {current}.",
                remedy="Describe the group again and pass ids of current members (or all_members=True).",
            )
        targets = list(desc.members) if all_members else [by_member[i] for i in sorted(wanted)]
        if not targets:
            return MemberRemoval(group_id, desc.type, removed=(), failed={}, not_found=tuple(missing))
        requests = [
            MemberToRemove(group_instance_id=m.instance_id, reason=reason) if m.instance_id
            else MemberToRemove(member_id=m.member_id, reason=reason)
            for m in targets
        ]
        with self.requires(f"remove members of group {group_id!r}", ("READ", "GROUP", group_id)):
            results = self._t.kafka_python_call("remove_group_members", group_id, requests)
        # the response is keyed by member id, or by group.instance.id for static members
        ident_of = {}
        for m in targets:
            ident = m.instance_id or m.member_id
            ident_of[m.member_id] = ident
            if m.instance_id:
                ident_of[m.instance_id] = ident
        removed, failed, gone = C.removal_outcome(results, ident_of)
        if missing_ok:  # left on their own since the describe: not there, as asked
            missing = sorted({*missing, *gone})
        else:
            failed.update({ident: "UnknownMemberIdError" for ident in gone})
        return MemberRemoval(group_id, desc.type, removed=tuple(sorted(removed)), failed=failed,
                             not_found=tuple(missing))

    # -- offsets -------------------------------------------------------------

    def group_offsets(self, group_id: str) -> GroupOffsets:
        """Committed offsets of a group with each partition's log start and end (lag = end - committed).

        Partitions assigned to members but without a commit are included with
        ``committed=None``, as ``kafka-consumer-groups --describe`` lists them.
        """
        require_group_id(group_id)
        desc = self.describe_group(group_id)
        with self.requires(f"read the committed offsets of group {group_id!r}", ("DESCRIBE", "GROUP", group_id)):
            # OffsetFetch through kafka-python: librdkafka 2.16 aborts the process when a coordinator-bound
            # admin request loses its connection (a coordinator failing over), see docs/reliability.md.
            # require_stable: without it the coordinator answers from the state at its partition's high
            # watermark. Right after a failover the new leader's high watermark can trail writes the old
            # leader acknowledged, so for a few seconds a plain fetch returns offsets from *before* the last
            # acknowledged commit (seen on the 3-node cluster). With it the coordinator reads its latest
            # state and answers once that is committed (Java consumers ask so with read_committed).
            response = self._t.send(lambda: offset_fetch_request([group_id], require_stable=True),
                                    group_id=group_id, errors=_offset_fetch_errors)
        committed = _committed(response.groups[0])
        if isinstance(desc, StreamsGroupDescription):
            assigned = set(self.streams_group_source_partitions(group_id))
        else:
            assigned = {tp for m in desc.members for tp in m.assignment}
        wanted = sorted(set(committed) | assigned)
        starts, ends = self.log_offsets(wanted)
        rows = tuple(
            PartitionOffsets(
                topic=tp.topic,
                partition=tp.partition,
                committed=committed[tp][0] if tp in committed else None,
                leader_epoch=committed[tp][1] if tp in committed else None,
                log_start=starts.get(tp),
                log_end=ends.get(tp),
            )
            for tp in wanted
        )
        return GroupOffsets(group_id=group_id, partitions=rows)

    def log_offsets(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Log start and end offsets (earliest/latest, read_uncommitted) of the given partitions."""
        tps = list(tps)
        if not tps:
            return {}, {}
        topics = ", ".join(sorted({tp.topic for tp in tps}))
        with self.requires(f"read the log offsets of {topics}", ("DESCRIBE", "TOPIC", topics)):
            self._check_partitions_exist(tps)
            timeout = self._t.timeout_s
            out: list[dict[TopicPartition, int]] = []
            for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):
                request = {ConfluentTopicPartition(tp.topic, tp.partition): spec for tp in tps}

                # the request and its per-partition answers are retried as one: a partition whose leader
                # moved answers NOT_LEADER_OR_FOLLOWER in its future, and only a new request reaches the new leader
                def list_offsets(request: dict[Any, Any] = request) -> dict[TopicPartition, int]:
                    futures = self._t.confluent.list_offsets(request, request_timeout=timeout)
                    return {TopicPartition(ctp.topic, ctp.partition): fut.result(timeout + 5).offset
                            for ctp, fut in futures.items()}

                out.append(self._t.retrying(list_offsets))
            return out[0], out[1]

    def topic_offsets(self, topics: Iterable[str]) -> dict[TopicPartition, tuple[int, int]]:
        """Log start and end offsets of every partition of ``topics`` (the fixed range a validation reads)."""
        topics = list(topics)
        metadata = self._metadata()
        for topic in topics:
            if topic not in metadata.topics or metadata.topics[topic].error is not None:
                raise E.UnknownTopicOrPartition(f"Topic {topic!r} does not exist.")
        starts, ends = self.log_offsets(C.topic_partitions(metadata, topics))
        return {tp: (starts[tp], ends[tp]) for tp in sorted(starts)}

    def _metadata(self) -> Any:
        return self._t.retrying(lambda: self._t.confluent.list_topics(timeout=self._t.timeout_s))

    def _check_partitions_exist(self, tps: Iterable[TopicPartition]) -> None:
        metadata = self._metadata()
        missing = sorted(tp for tp in tps
                         if tp.topic not in metadata.topics or tp.partition not in metadata.topics[tp.topic].partitions)
        if missing:
            raise E.UnknownTopicOrPartition(f"No such topic-partition: {', '.join(map(str, missing))}.")

    def _log_bounds(self, offsets: Mapping[TopicPartition, int],
                    current: GroupOffsets) -> dict[TopicPartition, tuple[int | None, int | None]]:
        starts, ends = self.log_offsets(offsets)
        return {tp: (starts[tp], ends[tp]) for tp in offsets}

    def _send_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int],
                      desc: GroupDescription | None) -> None:
        # OffsetCommit through kafka-python, for the reason group_offsets gives
        commits = {KafkaPythonTopicPartition(tp.topic, tp.partition): OffsetAndMetadata(int(o), "", None)
                   for tp, o in sorted(offsets.items())}

        def commit() -> dict[Any, Any]:
            results = self._t.kafka_python.alter_group_offsets(group_id, commits)
            raise_retriable((getattr(error, "errno", 0) or 0, f"OffsetCommit of {tp}") for tp, error in results.items())
            return results

        results = self._t.for_group(group_id, lambda: self._t.retrying(commit))
        for tp, error in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
            if getattr(error, "errno", 0):
                raise group_error(group_id, error.errno, f"OffsetCommit of {tp.topic}:{tp.partition}", self.settings)

    # -- group configs -----------------------------------------------------------

    def describe_group_config(self, group_id: str) -> GroupConfig:
        """Every group config of ``group_id`` with its effective value and source (``--describe --all``)."""
        require_group_id(group_id)
        resource = ConfigResource(ResourceType.GROUP, group_id)
        with self.requires(f"read the configs of group {group_id!r}", ("DESCRIBE_CONFIGS", "GROUP", group_id)):
            return C.group_config(group_id, self._describe_configs(resource))

    def _send_group_config_change(self, plan: ConfigChangePlan, *, dry_run: bool) -> None:
        resource = ConfigResource(
            ResourceType.GROUP, plan.group_id,
            incremental_configs=[ConfluentConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                                 for k, v in plan.to_set.items()]
            + [ConfluentConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in plan.to_delete],
        )
        timeout = self._t.timeout_s
        self._t.retrying(
            lambda: self._t.confluent.incremental_alter_configs([resource], validate_only=dry_run,
                                                                request_timeout=timeout)[resource]
            .result(timeout + 5))

    # -- topics (the change lock) -----------------------------------------------------

    def create_topic(self, topic: str, *, partitions: int = 1, config: Mapping[str, str] | None = None) -> bool:
        """Create ``topic`` (replication factor: the brokers' default); False when it already exists."""
        return self.create_topics([topic], partitions=partitions, config=config)[topic]

    def create_topics(self, topics: Iterable[str], *, partitions: int = 1,
                      config: Mapping[str, str] | None = None) -> dict[str, bool]:
        """Every one of ``topics`` in one CreateTopics request; topic -> False when it already existed. All or
        nothing: when one is refused, the ones this call created are deleted again before the refusal is
        raised (a caller such as the change lock never holds half of what it asked for)."""
        names = list(dict.fromkeys(topics))
        if not names:
            return {}
        news = [NewTopic(t, num_partitions=partitions, replication_factor=-1, config=dict(config or {}))
                for t in names]
        futures = self._t.confluent.create_topics(news, request_timeout=self._t.timeout_s)
        created: dict[str, bool] = {}
        refusal: BaseException | None = None
        for t in names:
            try:
                with self.requires(f"create the topic {t}", ("CREATE", "TOPIC", t)):
                    self._t.result(futures[t])
            except Exception as exc:  # noqa: BLE001 - TOPIC_ALREADY_EXISTS is an answer, not a failure
                if "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                    created[t] = False
                elif refusal is None:
                    refusal = exc
                continue
            created[t] = True
        if refusal is not None:
            for t in (t for t, new in created.items() if new):
                self.delete_topic(t)
            raise refusal
        return created

    def topic_exists(self, topic: str) -> bool:
        """Whether the cluster's metadata lists ``topic``."""
        return topic in self._metadata().topics

    def topic_partition_counts(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Each topic's partition count from one metadata read; None for a topic the cluster does not have."""
        known = self._metadata().topics
        return {t: (len(known[t].partitions) if t in known and known[t].error is None else None) for t in topics}

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (already gone is fine) and wait until the metadata no longer lists it."""
        futures = self._t.confluent.delete_topics([topic], request_timeout=self._t.timeout_s)
        try:
            with self.requires(f"delete the topic {topic}", ("DELETE", "TOPIC", topic)):
                self._t.result(futures[topic])
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            if "UNKNOWN_TOPIC" not in str(exc):
                raise
        deadline = time.monotonic() + self._t.timeout_s
        while self.topic_exists(topic) and time.monotonic() < deadline:  # deletion is asynchronous on the brokers
            time.sleep(0.1)


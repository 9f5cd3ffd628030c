"""The fleet inventory: every group of a cluster with its facts and migration verdicts, read in batches
(:mod:`..batch`), a fixed number of requests whatever the number of groups."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.arguments import id_list, require_group_id
from airflow_provider_kip848.kafka.inventory import FleetJudge, GroupInventory, InventoryEntry, inventory_entry
from airflow_provider_kip848.kafka.model import (
    GroupDescription,
    GroupOffsets,
    GroupType,
    PartitionOffsets,
    TopicPartition,
)
from airflow_provider_kip848.kafka.native import converters
from airflow_provider_kip848.kafka.native.admin.configs import NativeConfigs
from airflow_provider_kip848.kafka.native.admin.offsets import leader_epoch
from airflow_provider_kip848.kafka.native.batch import (
    CLASSIC,
    CONSUMER,
    DESCRIBE_KINDS,
    STREAMS,
    BatchReader,
    collector_paused,
)
from airflow_provider_kip848.kafka.rules.preflight import PreflightFacts

#: and sort in C; a ``TopicPartition`` dataclass hashes in Python, and an inventory of tens of thousands of
#: groups looks partitions up hundreds of thousands of times)
_Pair = tuple[str, int]


def _committed_pairs(group: Any) -> dict[_Pair, tuple[int, int | None]]:
    """:func:`.offsets.committed_offsets` keyed by ``(topic, partition)`` pairs."""
    out: dict[_Pair, tuple[int, int | None]] = {}
    for t in group.topics:
        name = t.name
        for p in t.partitions:
            offset = p.committed_offset
            if offset is not None and offset >= 0:
                out[(name, p.partition_index)] = (offset, leader_epoch(p.committed_leader_epoch))
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
            descriptions[g] = converters.streams_group(raw, node)
            assigned[g] = set(converters.streams_source_partitions(raw))
            continue
        desc = converters.classic_group(raw, node) if kind == CLASSIC else converters.consumer_group(raw, node)
        if kind == CLASSIC:
            user_data[g] = converters.classic_user_data(raw)
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



class NativeInventory(NativeConfigs):
    """The inventory of every group, on the configs family (the configs of groups that do not exist)."""

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
                raise errors.InvalidArgument("inventory: group_ids is empty, it names no group.",
                                             remedy="Name the groups to read, or leave group_ids out (None) to read "
                                                    "every group of the cluster.")
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
            except errors.Kip848Error as exc:
                orphans, orphans_error = None, f"the configs of groups that do not exist could not be read: {exc.what}"
        return GroupInventory(taken_at=taken_at, entries=tuple(entries), elapsed_s=time.monotonic() - started,
                              unanswered_brokers=unanswered, absent=absent, cluster_error=judge.facts_error,
                              requests=dict(reader.requests), orphan_group_configs=orphans,
                              orphan_group_configs_error=orphans_error)

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
        except errors.Kip848Error as exc:
            return FleetJudge(None, facts_error=f"the brokers' group.* configs could not be read: {exc.what}")
        if not coordinators:
            return FleetJudge(None, facts_error="the cluster listed no broker to read group.* configs from")
        facts = PreflightFacts(brokers=tuple(versions), features=features, coordinator=coordinators[0],
                               coordinators=coordinators)
        return FleetJudge(facts, declared_broker_version=declared_broker_version)

"""Offsets: a group's committed offsets against its partitions' logs, the logs' bounds, and offset commits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import OffsetSpec
from kafka import errors as kerr
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaPythonTopicPartition

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.arguments import require_group_id
from airflow_provider_kip848.kafka.model import (
    GroupDescription,
    GroupOffsets,
    PartitionOffsets,
    StreamsGroupDescription,
    TopicPartition,
)
from airflow_provider_kip848.kafka.native import converters
from airflow_provider_kip848.kafka.native.admin.base import NativeBase
from airflow_provider_kip848.kafka.native.batch import offset_fetch_request
from airflow_provider_kip848.kafka.native.transport import raise_retriable
from airflow_provider_kip848.kafka.translate import group_error


def leader_epoch(epoch: int | None) -> int | None:
    """A committed offset's leader epoch; Kafka's -1 (unknown) is None, as the CLI backend reports it."""
    return epoch if epoch is not None and epoch >= 0 else None


def committed_offsets(  # Any: kafka-python's and confluent-kafka's objects are untyped
        group: Any) -> dict[TopicPartition, tuple[int, int | None]]:
    """One group of an OffsetFetch v8+ answer: partition -> (committed offset, leader epoch); -1 (none) left out."""
    return {TopicPartition(t.name, p.partition_index): (p.committed_offset, leader_epoch(p.committed_leader_epoch))
            for t in group.topics for p in t.partitions if p.committed_offset is not None and p.committed_offset >= 0}


#: a partition as a plain ``(topic, partition)`` pair: the inventory keys its per-partition facts so (tuples hash
#: and sort in C; a ``TopicPartition`` dataclass hashes in Python, and an inventory of tens of thousands of

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



class NativeOffsets(NativeBase):
    """Committed offsets, log offsets and offset commits."""

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
        committed = committed_offsets(response.groups[0])
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
            for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):  # type: ignore[no-untyped-call]  # untyped
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
                raise errors.UnknownTopicOrPartition(f"Topic {topic!r} does not exist.")
        starts, ends = self.log_offsets(converters.topic_partitions(metadata, topics))
        return {tp: (starts[tp], ends[tp]) for tp in sorted(starts)}

    def _check_partitions_exist(self, tps: Iterable[TopicPartition]) -> None:
        metadata = self._metadata()
        missing = sorted(tp for tp in tps
                         if tp.topic not in metadata.topics or tp.partition not in metadata.topics[tp.topic].partitions)
        if missing:
            raise errors.UnknownTopicOrPartition(f"No such topic-partition: {', '.join(map(str, missing))}.")

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
            results: dict[Any, Any] = self._t.kafka_python.alter_group_offsets(group_id, commits)
            raise_retriable((getattr(error, "errno", 0) or 0, f"OffsetCommit of {tp}") for tp, error in results.items())
            return results

        results = self._t.for_group(group_id, lambda: self._t.retrying(commit))
        for tp, error in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
            if getattr(error, "errno", 0):
                raise group_error(group_id, error.errno, f"OffsetCommit of {tp.topic}:{tp.partition}", self.settings)

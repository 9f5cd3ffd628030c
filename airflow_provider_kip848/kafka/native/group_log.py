"""Read a group's own history from ``__consumer_offsets`` (see :mod:`..group_records`), and a record's time.

Only the one partition that coordinates the group is read (Kafka's hash of the
group id), from the first record appended at or after ``since`` to the
partition's end as it was when the read began: a bounded read, whatever else
the partition holds. It needs READ on the topic ``__consumer_offsets`` (the
error says so); without it the downtime figures that need these records stay
unknown. A record's time (:func:`record_time`) is the timestamp of the record at
an offset of an application's input partition: when the first record a stall
held back arrived.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from airflow_provider_kip848.kafka import errors
from airflow_provider_kip848.kafka.group_records import GroupRecord, RecordType, decode, key_group, record_type
from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.kafka.model.groups import GroupDescription, coordinator_partition
from airflow_provider_kip848.kafka.native.quiet import QUIET_LOGGER
from airflow_provider_kip848.kafka.rules.group_load import LoggedRecord
from airflow_provider_kip848.kafka.rules.upgrade_window import UpgradeWindowFacts
from airflow_provider_kip848.kafka.settings import ClientSettings

OFFSETS_TOPIC = "__consumer_offsets"
T = TypeVar("T")


def _consumer(settings: ClientSettings) -> Consumer:
    return Consumer({**settings.confluent_config(), "group.id": f"kip848-history-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
                     "logger": QUIET_LOGGER})


def _refusal(error: Any, what: str) -> errors.Kip848Error:
    code = error.code() if hasattr(error, "code") else None
    if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED):
        return errors.AuthorizationFailed(f"Not allowed to {what}: {error}.",
                                          remedy=f"Grant READ on topic {OFFSETS_TOPIC} to this connection's principal "
                                            "(the downtime figures read the group's own records).")
    return errors.KafkaConnectionError(f"Could not {what}: {error}.")


def _scan(settings: ClientSettings, group_id: str, since: float, timeout_s: float | None,
          keep: Callable[[Any], T | None]) -> tuple[int, list[T]]:
    """``keep`` of every message of ``group_id`` appended to its ``__consumer_offsets`` partition since ``since``
    (epoch s), up to the partition's end when the read began, in append order (None: left out); and the
    partition."""
    timeout = float(timeout_s if timeout_s is not None else settings.request_timeout_ms / 1000)
    consumer = _consumer(settings)
    what = f"read group {group_id!r}'s records in {OFFSETS_TOPIC}"
    try:
        try:
            meta = consumer.list_topics(OFFSETS_TOPIC, timeout=timeout).topics.get(OFFSETS_TOPIC)
            if meta is None or meta.error is not None or not meta.partitions:
                raise _refusal(getattr(meta, "error", None) or "no such topic", what)
            partition = coordinator_partition(group_id, len(meta.partitions))
            tp = ConfluentTopicPartition(OFFSETS_TOPIC, partition, int(since * 1000))
            start = consumer.offsets_for_times([tp], timeout=timeout)[0]
            _, high = consumer.get_watermark_offsets(ConfluentTopicPartition(OFFSETS_TOPIC, partition),
                                                     timeout=timeout)
        except KafkaException as exc:
            raise _refusal(exc.args[0], what) from exc
        if start.offset < 0 or start.offset >= high:
            return partition, []  # nothing appended since
        consumer.assign([ConfluentTopicPartition(OFFSETS_TOPIC, partition, start.offset)])
        out: list[T] = []
        deadline = time.monotonic() + timeout
        position = start.offset
        while position < high:
            if time.monotonic() > deadline:
                raise errors.OperationTimedOut(f"Reading group {group_id!r}'s records stopped at offset {position} of "
                                               f"{high} after {timeout:g} s.")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                raise _refusal(error, what)
            position = int(msg.offset() or 0) + 1
            deadline = time.monotonic() + timeout  # progress: the timeout is for a stalled read
            if key_group(msg.key()) == group_id:
                kept = keep(msg)
                if kept is not None:
                    out.append(kept)
        return partition, out
    finally:
        consumer.close()


def group_records(settings: ClientSettings, group_id: str, *, since: float,
                  timeout_s: float | None = None) -> list[GroupRecord]:
    """Every record of ``group_id`` appended to its ``__consumer_offsets`` partition since ``since`` (epoch s),
    decoded, in append order."""
    return _scan(settings, group_id, since, timeout_s,
                 lambda msg: decode(msg.key(), msg.value(), msg.timestamp()[1] / 1000))[1]


def logged_records(settings: ClientSettings, group_id: str, *,
                   timeout_s: float | None = None) -> tuple[int, list[LoggedRecord]]:
    """Every record of ``group_id`` still in its ``__consumer_offsets`` partition (the log as a loading
    coordinator replays it: what compaction left), as offset, record type and tombstone flag; and the
    partition. What :func:`~airflow_provider_kip848.kafka.rules.group_load.judge_group_load` judges."""
    def keep(msg: Any) -> LoggedRecord | None:  # Any: a confluent_kafka Message (no public type)
        kind = record_type(msg.key())
        return None if kind is None else LoggedRecord(int(msg.offset()), kind, msg.value() is None)

    return _scan(settings, group_id, 0, timeout_s, keep)


def last_classic_generation(records: list[GroupRecord]) -> tuple[int, int] | None:
    """(generation, member count) of the last classic ``GroupMetadata`` record in ``records``; None when there is
    none or the last one is a tombstone (the group was deleted or converted since)."""
    last = next((r for r in reversed(records) if r.type is RecordType.GROUP_METADATA), None)
    if last is None or last.deleted or last.epoch is None or last.members is None:
        return None
    return last.epoch, last.members


def upgrade_window_facts(settings: ClientSettings, describe: Callable[[str], GroupDescription | None],
                         group_id: str) -> UpgradeWindowFacts:
    """The facts :func:`~airflow_provider_kip848.kafka.rules.upgrade_window.upgrade_window` judges: the group
    described (``describe``: None for no such group; a provider error when it cannot answer), and, for a Stable
    classic group, its generation from the coordinator's last ``GroupMetadata`` record, then described again
    (a rebalance that began during the read shows there). An error is a fact too: ``unknown``, never a guess."""
    try:
        before = describe(group_id)
        if before is None:
            return UpgradeWindowFacts(group_id, None, GroupState.UNKNOWN)
        members = tuple(m.member_id for m in before.members)
        if before.type is not GroupType.CLASSIC or before.state is not GroupState.STABLE:
            return UpgradeWindowFacts(group_id, before.type, before.state, members)
        found = last_classic_generation(group_records(settings, group_id, since=0))
        after = describe(group_id)
    except errors.Kip848Error as exc:
        return UpgradeWindowFacts(group_id, GroupType.CLASSIC, GroupState.UNKNOWN, error=str(exc),
                                  retriable=exc.retriable)
    generation, counted = found if found is not None else (None, None)
    return UpgradeWindowFacts(group_id, GroupType.CLASSIC, GroupState.STABLE, members, generation, counted,
                              GroupState.UNKNOWN if after is None else after.state,
                              () if after is None else tuple(m.member_id for m in after.members))


def record_time(settings: ClientSettings, topic: str, partition: int, offset: int, *,
                timeout_s: float | None = None) -> float | None:
    """The timestamp (epoch s) of the record at ``offset`` of ``topic``/``partition``; None when there is no
    record there any more (deleted by retention, or a transaction marker) or it cannot be read in time."""
    timeout = float(timeout_s if timeout_s is not None else settings.request_timeout_ms / 1000)
    consumer = _consumer(settings)
    try:
        consumer.assign([ConfluentTopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return None
                raise _refusal(error, f"read {topic}-{partition} at offset {offset}")
            at = int(msg.offset() or 0)
            if at >= offset:
                kind, ms = msg.timestamp()
                return ms / 1000 if kind and at == offset else None
        return None
    finally:
        consumer.close()

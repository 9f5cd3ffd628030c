"""The group coordinator's own records, read back from ``__consumer_offsets`` of the real broker (4.3.1): what a
classic and a consumer-protocol group wrote is decoded exactly as the groups behaved."""

from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CTP

from airflow_provider_kip848.kafka.group_records import RecordType, decode, key_group
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.model.groups import coordinator_partition
from airflow_provider_kip848.testing.clients import consume, create_topics, produce
from tests.conftest import wait_until


def _records(bootstrap: str, group: str):
    """Every record of ``group`` in its ``__consumer_offsets`` partition, decoded, up to the partition's end."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-never-committed",
                       "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        partitions = len(reader.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"].partitions)
        p = coordinator_partition(group, partitions)
        _, high = reader.get_watermark_offsets(CTP("__consumer_offsets", p), timeout=10)
        reader.assign([CTP("__consumer_offsets", p, OFFSET_BEGINNING)])
        out = []
        while True:
            msg = reader.poll(5)
            assert msg is not None, "the offsets partition stopped answering"
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    break
                raise AssertionError(msg.error())
            if key_group(msg.key()) == group and (record := decode(msg.key(), msg.value(), msg.timestamp()[1] / 1000)):
                out.append(record)
            if msg.offset() + 1 >= high:
                break
        return out
    finally:
        reader.close()


def test_a_classic_and_a_consumer_group_read_back_from_their_records(native, bootstrap, unique):
    topic = unique("gr")
    create_topics(bootstrap, {topic: 2})
    for p in (0, 1):
        produce(bootstrap, topic, (f"v{p}-{i}" for i in range(6)), partition=p)
    classic, modern = unique("gr-classic"), unique("gr-consumer")
    consume(bootstrap, classic, [topic], 12, group_protocol="classic")
    consume(bootstrap, modern, [topic], 12, group_protocol="consumer")
    for group in (classic, modern):
        wait_until(lambda g=group: native.describe_group(g).is_empty, what=f"{group} Empty")

    for group in (classic, modern):
        records = _records(bootstrap, group)
        commits = [r for r in records if r.type is RecordType.OFFSET_COMMIT and not r.deleted]
        last = {TopicPartition(r.topic, r.partition): r.offset for r in commits}
        assert last == native.group_offsets(group).committed == {TopicPartition(topic, 0): 6,
                                                                  TopicPartition(topic, 1): 6}
        assert all(a.at <= b.at for a, b in zip(records, records[1:], strict=False))  # in append order

    classic_meta = [r for r in _records(bootstrap, classic) if r.type is RecordType.GROUP_METADATA]
    assert classic_meta and max(r.members or 0 for r in classic_meta) == 1  # the member's generation
    assert classic_meta[-1].members == 0 and classic_meta[-1].epoch == max(r.epoch or 0 for r in classic_meta)

    modern_records = _records(bootstrap, modern)
    epochs = [r.epoch for r in modern_records if r.type is RecordType.CONSUMER_GROUP_METADATA and not r.deleted]
    assert epochs and epochs == sorted(epochs) and epochs[-1] >= 2  # joined, then left: two new epochs at least
    members = [r for r in modern_records if r.type is RecordType.CONSUMER_GROUP_MEMBER_METADATA]
    assert members and not members[0].deleted and members[-1].deleted  # joined, then left (tombstone)
    assert members[0].member_id == members[-1].member_id

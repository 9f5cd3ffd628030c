"""The group coordinator's own records, read back from ``__consumer_offsets`` of the real broker (4.3.1): what a
classic and a consumer-protocol group wrote is decoded exactly as the groups behaved."""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer
from confluent_kafka import TopicPartition as CTP

from airflow_provider_kip848.changecontrol.downtime import downtime_chart, downtime_markdown, downtime_section
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.group_records import RecordType, commit_stalls, decode, group_history, key_group
from airflow_provider_kip848.kafka.inert import md_name
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.model.groups import coordinator_partition
from airflow_provider_kip848.kafka.native.group_log import group_records, record_time
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
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

    h = group_history(_records(bootstrap, classic))
    assert h.types == ("classic",) and h.rebalances == len({r.epoch for r in classic_meta}) >= 2
    assert h.first_member_left_at is not None and h.classic_empty_at == classic_meta[-1].at
    h = group_history(modern_records, target="consumer", state_before="Dead")  # born in the window
    assert h.types == ("consumer",) and h.rebalances == len(set(epochs)) and h.first_member_left_at == members[-1].at
    # the states the coordinator went through, rebuilt from its epochs and the member's assignment records:
    # the member joined and was reconciled (Stable with one consumer member), then left (Empty)
    states = [(p.type, p.state, p.members) for p in h.states]
    assert ("consumer", "Stable", {"consumer": 1}) in states and states[-1] == ("consumer", "Empty", {})
    assert all(s is not None for _, s, _ in states)  # a group born in the window: every state known
    assert h.stable_on_target_at is None  # Stable on consumer only before the member left


def test_a_stall_is_read_from_the_commits_to_the_millisecond(native, bootstrap, unique, tmp_path, kafka_conn):
    """A classic application stops, a record arrives (with a timestamp the test sets), the application comes back
    on the consumer protocol: the stall read from the group's commits starts at that record and ends at the
    commit that took it, which falls between the restart and the moment the test saw the offset move."""
    topic, group = unique("stall"), unique("stall-g")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, (f"a{i}" for i in range(3)), partition=0)
    since = time.time()
    old = ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id="stall-old",
                                log_file=str(tmp_path / "old.log"))
    tp = TopicPartition(topic, 0)
    wait_until(lambda: native.group_offsets(group).committed.get(tp) == 3, timeout=90, what="3 committed")
    old.stop()
    wait_until(lambda: native.describe_group(group).is_empty, what="the group Empty")
    produced_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"held-back", partition=0, timestamp=produced_ms)
    assert producer.flush(30) == 0
    restarted = time.time()
    new = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="stall-new",
                                log_file=str(tmp_path / "new.log"))
    try:
        wait_until(lambda: native.group_offsets(group).committed.get(tp) == 4, timeout=90, what="4 committed")
        seen = time.time()
    finally:
        new.stop()
    settings = native.settings
    records = group_records(settings, group, since=since)
    assert record_time(settings, topic, 0, 3) == produced_ms / 1000
    stall = commit_stalls(records, lambda t, p, o: record_time(settings, t, p, o))[f"{topic}:0"]
    assert stall.exact and not stall.open and stall.started_at == produced_ms / 1000
    assert restarted - 0.001 <= stall.ended_at <= seen + 0.001  # ms-precision append times
    assert stall.seconds == stall.ended_at - stall.started_at > 0
    assert group_records(settings, group, since=time.time() + 3600) == []  # nothing appended after the end

    # the same through the hook, as a DAG's report task reads it, and the report section it gives
    with KafkaGroupAdminHook(kafka_conn) as hook:
        downtime = hook.group_downtime(group, since)
    assert downtime.stalls[f"{topic}:0"] == stall and not downtime.notes
    assert downtime.history.types == ("classic", "consumer") and downtime.history.first_member_left_at is not None
    section = downtime_section(downtime, group_id=group, target="consumer")
    assert section["processing_gap"]["seconds"] == round(stall.seconds, 3)
    assert section["gap_source"] == "committed offsets"
    chart = downtime_chart(section)
    assert chart is not None and "consumer members" in chart and "classic members" in chart
    text = "\n".join(downtime_markdown(section, "downtime.svg"))
    # the partition is a name: a code span in the Markdown (kafka/inert.py)
    assert f"{stall.seconds:.3f} s on {md_name(f'{topic}:0')}" in text and "classic -> consumer" in text

"""Smoke tests of the real broker with real clients, through the provider's own code."""

from __future__ import annotations

import re
import time

from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import (
    consume,
    create_topics,
    decode_long,
    latest_by_key,
    produce,
    read_topic,
)


def test_group_and_streams_features_finalized_at_1(bootstrap, kafka):
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        features = admin.describe_features()
    assert features["group.version"].finalized_level == 1
    assert features["streams.version"].finalized_level == 1
    assert features["group.version"].supported_max >= 1
    # The CLI agrees (FeatureCommand output parsed here only as a cross-check).
    out = kafka.run_tool("kafka-features", ["describe"]).stdout
    for name in ("group.version", "streams.version"):
        m = re.search(rf"Feature: {re.escape(name)}\s.*FinalizedVersionLevel: (\d+)", out)
        assert m and int(m.group(1)) == 1, out


def test_consumer_protocol_consumer_joins_and_consumes(bootstrap, unique):
    topic, group = unique("orders"), unique("kip848")
    create_topics(bootstrap, {topic: 3})
    sent = produce(bootstrap, topic, (f"v{i}".encode() for i in range(50)), keys=(f"k{i}" for i in range(50)))
    records = consume(bootstrap, group, [topic], sent, group_protocol="consumer")
    assert sorted(r.value for r in records) == sorted(f"v{i}".encode() for i in range(50))
    assert {r.partition for r in records} == {0, 1, 2}

    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        listing = {g.group_id: g for g in admin.list_groups()}
    assert listing[group].type is GroupType.CONSUMER
    admin_client = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference: its futures die with it
    desc = admin_client.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=60)
    assert desc.type == ConsumerGroupType.CONSUMER


def test_classic_consumer_is_a_classic_group(bootstrap, unique):
    topic, group = unique("orders"), unique("classic")
    create_topics(bootstrap, {topic: 1})
    produce(bootstrap, topic, [b"one", b"two"])
    assert len(consume(bootstrap, group, [topic], 2, group_protocol="classic")) == 2
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        listing = {g.group_id: g for g in admin.list_groups()}
    assert listing[group].type is GroupType.CLASSIC


def test_wordcount_demo_with_streams_protocol_processes_records(kafka, bootstrap, unique):
    app_id = unique("wordcount")
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    marker = f"w{time.time_ns()}"  # a word no other test writes, so counts are exact
    app = kafka.start_wordcount(app_id, group_protocol="streams")
    try:
        produce(bootstrap, WORDCOUNT_INPUT_TOPIC, [f"{marker} streams", f"{marker} kafka", f"{marker}"])
        counts = _final_counts(bootstrap, marker, expected=3, timeout=90)
        assert counts == 3, app.log_text()[-3000:]
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            listing = {g.group_id: g for g in admin.list_groups()}
        assert listing[app_id].type is GroupType.STREAMS
        out = kafka.run_tool("kafka-streams-groups", ["--describe", "--group", app_id, "--state"]).stdout
        assert re.search(rf"^{re.escape(app_id)}\s.*\sStable\s+1\s*$", out, re.M), out  # state, #members
    finally:
        assert app.stop() in (0, 143)


def _final_counts(bootstrap: str, word: str, expected: int, timeout: float) -> int | None:
    def count(records) -> int | None:
        value = latest_by_key(records).get(word.encode())
        return decode_long(value) if value is not None else None

    return count(read_topic(bootstrap, WORDCOUNT_OUTPUT_TOPIC, timeout=timeout,
                            until=lambda rs: count(rs) == expected))

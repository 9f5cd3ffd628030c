"""A coordinator partition that never loads (KAFKA-20254, Kafka 4.2.0) is reported as such; 4.2.1 loads it.

The scenario of the bug: a classic group commits offsets and empties, a Streams application converts it to a
streams group (and commits nothing), the log cleaner compacts the group's ``__consumer_offsets`` partition
twice (its tombstones go), the broker restarts. Kafka 4.2.0 then fails to load the partition ("Group X is not a
streams group") and every request for the groups on it answers NOT_COORDINATOR, forever. The provider must
neither guess a state nor retry blindly: a describe fails with a retriable CoordinatorUnavailable naming the
partition and its node; a wait fails after its bounded unavailability window with the same evidence.
"""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.kafka.errors import CoordinatorUnavailable
from airflow_provider_kip848.kafka.model import GroupType, coordinator_partition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.sensors.group import KafkaGroupEmptySensor
from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC
from kip848_harness.clients import consume, create_topics, produce
from kip848_harness.faults import FAST_CLEANER, compact_group_partition
from tests.conftest import set_kafka_connection, wait_until


# The waits below are run by calling execute() in the test, where no triggerer runs: they poke (deferrable=False;
# the default is the deployment's [kip848] default_deferrable, True).
def _migrate_compact_restart(kafka, group: str) -> int:
    bootstrap = kafka.bootstrap_servers
    create_topics(bootstrap, {WORDCOUNT_INPUT_TOPIC: 2, WORDCOUNT_OUTPUT_TOPIC: 2})
    produce(bootstrap, WORDCOUNT_INPUT_TOPIC, ["a b", "c d"])
    consume(bootstrap, group, [WORDCOUNT_INPUT_TOPIC], 2, group_protocol="classic")  # commits, leaves: Empty
    app = kafka.start_wordcount(group, group_protocol="streams")  # converts the empty classic group
    try:
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            wait_until(lambda: (d := admin.describe_group(group)).type is GroupType.STREAMS and d.state == "Stable",
                       timeout=120, what="the streams group")
        partition = compact_group_partition(kafka, group, passes=2)
    finally:
        app.kill()
    kafka.restart()
    return partition


@pytest.mark.slow
@pytest.mark.parametrize("version", ["4.2.0", "4.2.1"])
def test_a_streams_group_after_compaction_and_restart(fresh_kafka, version, unique, monkeypatch, context):
    kafka = fresh_kafka(version, overrides=FAST_CLEANER)
    group = unique("wc")
    partition = _migrate_compact_restart(kafka, group)
    assert partition == coordinator_partition(group, 10)
    with KafkaAdmin(ClientSettings(kafka.bootstrap_servers, request_timeout_ms=6000)) as admin:
        if version == "4.2.1":  # fixed: the partition loads and the group is described
            assert wait_until(lambda: admin.describe_group(group), timeout=60).type is GroupType.STREAMS
            return
        with pytest.raises(CoordinatorUnavailable) as err:
            admin.describe_group(group)
    unavailable = err.value
    assert unavailable.retriable and (unavailable.partition, unavailable.leader) == (partition, 1)
    assert f"__consumer_offsets partition {partition}, led by node 1" in str(unavailable)
    assert "KAFKA-20254" in str(unavailable) and "read the log of node 1" in str(unavailable)
    # the evidence the message sends the operator to is in that node's log
    assert f"Group {group} is not a streams group" in kafka.node_log_path(1).read_text()
    # a wait does not poll until its own timeout: it fails after the bounded unavailability window
    set_kafka_connection(monkeypatch, "kafka_420", kafka.bootstrap_servers, request_timeout_ms=3000)
    sensor = KafkaGroupEmptySensor(task_id="empty", deferrable=False, kafka_conn_id="kafka_420", group_id=group, poll_interval=0.5,
                                   settle_seconds=0, coordinator_unavailable_minutes=0.2, timeout=600)
    with pytest.raises(AirflowFailException, match=rf"partition {partition}, led by node 1.*unavailable for \d+ s in a row"):
        sensor.execute(context)

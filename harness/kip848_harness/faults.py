"""Faults a real cluster produces, aimed at one group: which node coordinates it, and taking that node down.

The coordinator of a group is the leader of the ``__consumer_offsets``
partition the group id hashes to (Kafka's own rule, see
:func:`~airflow_provider_kip848.kafka.model.coordinator_partition`). It is
read here from the topic's metadata with a fresh client, independent of the
provider's own (possibly cached) coordinator lookup, which is what the fault
tests put to the test.
"""

from __future__ import annotations

import re
import time
from typing import Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from airflow_provider_kip848.kafka.model import TopicPartition, coordinator_partition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.native.quiet import QUIET_LOGGER
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.kafka_process import read_from

OFFSETS_TOPIC = "__consumer_offsets"


def coordinator_node(bootstrap_servers: str, group_id: str, timeout: float = 30.0) -> int:
    """The node id coordinating ``group_id`` now (the leader of its ``__consumer_offsets`` partition)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "logger": QUIET_LOGGER}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout
    while True:
        topic = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics.get(OFFSETS_TOPIC)
        if topic is not None and topic.error is None and topic.partitions:
            leader = topic.partitions[coordinator_partition(group_id, len(topic.partitions))].leader
            if leader >= 0:
                return int(leader)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no leader for the __consumer_offsets partition of {group_id!r} within {timeout} s")
        time.sleep(0.2)


def wait_group_partition_in_sync(cluster: LocalKafka, group_id: str, timeout: float = 120.0) -> None:
    """Wait until every replica of ``group_id``'s ``__consumer_offsets`` partition is in sync again (after a node
    restarted), so that killing the leader next leaves an in-sync replica to take over: a test that kills
    nodes one after another otherwise risks a partition with no eligible leader."""
    config: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers, "logger": QUIET_LOGGER}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout
    seen: Any = None
    while True:
        topic = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics.get(OFFSETS_TOPIC)
        if topic is not None and topic.error is None and topic.partitions:
            seen = topic.partitions[coordinator_partition(group_id, len(topic.partitions))]
            if seen.leader >= 0 and set(seen.isrs) == set(seen.replicas):
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the __consumer_offsets partition of {group_id!r} not in sync within {timeout} s "
                               f"(replicas {getattr(seen, 'replicas', None)}, isr {getattr(seen, 'isrs', None)})")
        time.sleep(0.2)


def kill_coordinator(cluster: LocalKafka, group_id: str) -> int:
    """SIGKILL the node coordinating ``group_id``; returns its id."""
    node = coordinator_node(cluster.bootstrap_servers, group_id)
    cluster.kill_node(node)
    return node


def restore(cluster: LocalKafka, timeout: float = 180.0) -> None:
    """Every node of ``cluster`` running and resumed again (after a test killed, stopped or paused one), and the
    cluster whole again: every node registered and every replica of every partition in sync.

    A node that answers after a restart has not yet caught up: until its replicas are back in the ISR, the
    next test's fault (killing or pausing a coordinator) can leave a partition with one in-sync replica or
    none, a state the test did not ask for. Waiting here keeps each fault test's fault its own.
    """
    statuses = cluster.status().nodes
    for status in statuses:
        if status.running and status.paused:
            cluster.resume_node(status.node_id)
        elif not status.running:
            cluster.start_node(status.node_id)
    wait_fully_in_sync(cluster, {s.node_id for s in statuses}, timeout)


def wait_fully_in_sync(cluster: LocalKafka, node_ids: set[int], timeout: float = 180.0) -> None:
    """Wait until the metadata lists every node of ``node_ids`` and every partition has a leader and all its
    replicas in sync; fails naming what is still out after ``timeout``."""
    config: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers, "logger": QUIET_LOGGER}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout
    while True:
        lagging: list[str] = []
        try:
            metadata = admin.list_topics(timeout=10)
            missing = node_ids - set(metadata.brokers)
            if missing:
                lagging.append(f"nodes {sorted(missing)} not registered")
            for name, topic in metadata.topics.items():
                if topic.error is not None:
                    lagging.append(f"{name}: {topic.error}")
                    continue
                lagging += [f"{name}-{p.id} (leader {p.leader}, replicas {p.replicas}, isr {p.isrs})"
                            for p in topic.partitions.values() if p.leader < 0 or set(p.isrs) != set(p.replicas)]
        except Exception as exc:  # noqa: BLE001 - a cluster still coming back: asked again until the deadline
            lagging.append(f"metadata: {exc}")
        if not lagging:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster not whole within {timeout} s: {', '.join(lagging[:10])}"
                               f"{f' (and {len(lagging) - 10} more)' if len(lagging) > 10 else ''}")
        time.sleep(0.2)


#: Broker settings that let :func:`compact_group_partition` run the log cleaner within seconds.
FAST_CLEANER = {"log.cleaner.backoff.ms": "200"}


def compact_group_partition(kafka: LocalKafka, group_id: str, *, passes: int = 2, timeout: float = 120.0) -> int:
    """Run the log cleaner over ``group_id``'s ``__consumer_offsets`` partition ``passes`` times, tombstones
    included, as days of production traffic would; returns the partition.

    The topic gets ``min.cleanable.dirty.ratio=0``, ``delete.retention.ms=0`` and short segments, and a
    filler group on the same partition commits until the cleaner has logged ``passes`` cleanings of it (the
    broker must run with :data:`FAST_CLEANER`). Two passes remove a group's tombstones: what KAFKA-20254
    needs to make a converted group unloadable on Kafka 4.2.0.
    """
    bootstrap = kafka.bootstrap_servers
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": QUIET_LOGGER}
    admin = AdminClient(config)
    topic = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
    partition = coordinator_partition(group_id, len(topic.partitions))
    filler = next(f"kip848-filler-{i}" for i in range(100_000)
                  if coordinator_partition(f"kip848-filler-{i}", len(topic.partitions)) == partition)
    create_topics(bootstrap, {"kip848-filler": 1})
    produce(bootstrap, "kip848-filler", ["a", "b"])  # offsets 0..2 to commit
    resource = ConfigResource(ResourceType.TOPIC, OFFSETS_TOPIC, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (("min.cleanable.dirty.ratio", "0"), ("delete.retention.ms", "0"), ("segment.ms", "300"))])
    admin.incremental_alter_configs([resource])[resource].result(30)
    logs = {n: kafka.node_log_path(n) for n in kafka.node_ids}
    marks = {n: path.stat().st_size if path.exists() else 0 for n, path in logs.items()}
    pattern = re.compile(rf"Beginning cleaning of log {OFFSETS_TOPIC}-{partition}\b")
    deadline = time.monotonic() + timeout
    with KafkaAdmin(ClientSettings(bootstrap)) as provider_admin:
        n = 0
        while max(len(pattern.findall(read_from(path, marks[node]))) for node, path in logs.items()) < passes:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the log cleaner did not compact {OFFSETS_TOPIC}-{partition} {passes} times "
                                   f"within {timeout} s")
            n += 1  # each commit is a write to the partition: it rolls the 300 ms segment
            provider_admin.alter_group_offsets(filler, {TopicPartition("kip848-filler", 0): n % 2})
            time.sleep(0.3)
    return partition

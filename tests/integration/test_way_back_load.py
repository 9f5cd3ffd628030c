"""The online way back to classic, then the group's coordinator moved: the group still loads (apache/kafka#23514).

On the 3-node cluster: two classic members, a consumer-protocol member converts the group online, then leaves, and
the broker converts it back to classic (the online downgrade: every member back on classic). The provider's proof
(``KafkaGroupLoadsOperator``, what it can establish on a deployment where nobody kills brokers) is run; then the
coordinator's node is killed (or restarted while the log cleaner compacts ``__consumer_offsets``) and the group is
described from the new coordinator: classic, both members, the same committed offsets, and the proof again.
"""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from airflow_provider_kip848.kafka.model import GroupType, MemberProtocol, TopicPartition, coordinator_partition
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.group_load import GroupLoad
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.operators.group_load import KafkaGroupLoadsOperator
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.faults import coordinator_node, kill_coordinator, wait_group_partition_in_sync
from kip848_harness.kafka_process import read_from
from tests.conftest import set_kafka_connection, wait_until

CONN = "kafka_cluster_way_back"
#: a request rides out a failover (the dead node is fenced after broker.session.timeout.ms, 9 s)
EXTRA = {"request_timeout_ms": 15000}
OFFSETS_TOPIC = "__consumer_offsets"


@pytest.fixture
def conn(cluster, monkeypatch, tmp_path):
    monkeypatch.setenv("KIP848_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    return set_kafka_connection(monkeypatch, CONN, cluster.bootstrap_servers, **EXTRA)


def _admin(cluster) -> KafkaAdmin:
    return KafkaAdmin(ClientSettings(cluster.bootstrap_servers, request_timeout_ms=15000))


def _classic(cluster, group: str, n: int, timeout: float = 180):
    """The group described (by whichever node coordinates it now) as classic, Stable, with ``n`` classic members."""
    with _admin(cluster) as admin:
        return wait_until(lambda: (d := admin.describe_group(group)).type is GroupType.CLASSIC
                          and d.state == "Stable" and len(d.members) == n
                          and all(m.protocol is MemberProtocol.CLASSIC for m in d.members) and d,
                          timeout=timeout, what=f"{group}: classic, Stable, {n} classic members")


def _online_way_back(cluster, group: str, topic: str, tmp_path) -> list[ConsumerProcess]:
    """Two classic members; a consumer-protocol member converts the group online; it leaves, the last one on the
    consumer protocol: the broker downgrades the group to classic with the two (the online way back)."""
    bootstrap = cluster.bootstrap_servers
    classic = [ConsumerProcess.start(bootstrap, group, [topic], protocol="classic", client_id=f"app-{i}",
                                     log_file=str(tmp_path / f"app-{i}.log")) for i in range(2)]
    _classic(cluster, group, 2)
    upgraded = ConsumerProcess.start(bootstrap, group, [topic], protocol="consumer", client_id="app-new",
                                     log_file=str(tmp_path / "app-new.log"))
    try:
        with _admin(cluster) as admin:
            wait_until(lambda: (d := admin.describe_group(group)).type is GroupType.CONSUMER and len(d.members) == 3,
                       timeout=120, what="the group converted to consumer with 3 members")
            wait_until(lambda: admin.group_offsets(group).total_lag == 0, timeout=120, what="everything committed")
    finally:
        upgraded.stop()
    _classic(cluster, group, 2)
    return classic


def _prove(context, group: str) -> dict:
    return KafkaGroupLoadsOperator(task_id="prove_group_loads", kafka_conn_id=CONN, group_id=group,
                                   group_type="classic").execute(context)


def test_the_group_loads_after_the_online_way_back_and_a_coordinator_move(cluster, conn, unique, tmp_path, context,
                                                                           record_property):
    topic, group = unique("t"), unique("g")
    create_topics(cluster.bootstrap_servers, {topic: 4})
    produce(cluster.bootstrap_servers, topic, (f"v{i}" for i in range(40)), keys=(f"k{i}" for i in range(40)))
    members = _online_way_back(cluster, group, topic, tmp_path)
    try:
        with _admin(cluster) as admin:
            before = admin.group_offsets(group).committed
        assert len(before) == 4
        proof = _prove(context, group)
        # served by its coordinator, classic, both members; the records hold the downgrade's consumer-group
        # records after the classic one, with the upgrade's tombstone between that the cleaner may remove
        assert proof["checked"] and proof["type"] == "classic" and proof["members"] == ["app-0", "app-1"]
        assert proof["committed_partitions"] == 4
        assert proof["load"]["status"] == GroupLoad.EXPOSED.value, proof["load"]
        first = coordinator_node(cluster.bootstrap_servers, group)
        assert proof["coordinator_id"] == first
        wait_group_partition_in_sync(cluster, group)
        killed_at = time.monotonic()
        dead = kill_coordinator(cluster, group)
        # a new coordinator loads the partition from its replica: the group is classic with both members again
        now = _classic(cluster, group, 2)
        loaded_s = time.monotonic() - killed_at
        assert now.coordinator_id != dead and coordinator_node(cluster.bootstrap_servers, group) != dead
        with _admin(cluster) as admin:
            assert admin.group_offsets(group).committed == before
        again = _prove(context, group)
        assert again["coordinator_id"] == now.coordinator_id and again["members"] == ["app-0", "app-1"]
        assert again["load"]["status"] == GroupLoad.EXPOSED.value  # nothing was compacted: the same records
    finally:
        for m in members:
            m.stop()
    record_property("loaded_on_new_coordinator_s", round(loaded_s, 1))
    print(f"figures: killed node {dead}, new coordinator {now.coordinator_id}, classic with both members "
          f"{loaded_s:.1f} s after the kill; load verdict: {proof['load']['evidence']}")


def _alter(bootstrap: str, resource_type: ResourceType, name: str, configs: dict[str, str | None]) -> None:
    """Set (or, with None, delete) ``configs`` of one resource; a broker's own config goes to that broker, which a
    test may have just restarted (the client's old connection to it dead): asked again, each time with a fresh
    client, until it is applied (the shared cluster must get its settings back), within 120 s."""
    resource = ConfigResource(resource_type, name, incremental_configs=[
        ConfigEntry(k, v or "", incremental_operation=AlterConfigOpType.SET if v is not None
                    else AlterConfigOpType.DELETE) for k, v in configs.items()])
    tries: list[str] = []

    def applied() -> bool:
        client = AdminClient({"bootstrap.servers": bootstrap})
        try:
            client.incremental_alter_configs([resource])[resource].result(15)
            return True
        except Exception as exc:  # noqa: BLE001 - a dead connection or a node still starting: asked again
            tries.append(str(exc))
            return False

    wait_until(applied, timeout=120, what=f"{resource_type.name.lower()} {name}: {configs} applied")


#: the cleaner as fast as it goes: every segment of __consumer_offsets cleanable at once, tombstones dropped at once
FAST_OFFSETS = {"min.cleanable.dirty.ratio": "0", "delete.retention.ms": "0", "segment.ms": "300"}


@pytest.mark.slow
def test_the_way_back_under_compaction_racing_coordinator_moves(cluster, conn, unique, tmp_path, context,
                                                               record_property):
    """The attempt to reproduce #23514 on a real broker: after the online way back, __consumer_offsets is
    compacted continuously (segments rolled every 300 ms by a filler group's commits on the same partition,
    min.cleanable.dirty.ratio=0, delete.retention.ms=0, the cleaner's backoff 100 ms on every node) while the
    group's coordinator is moved again and again (its node restarted). After each move the group must be classic
    with both members and its offsets, served by the new coordinator; the proof's record verdict is printed."""
    bootstrap = cluster.bootstrap_servers
    topic, group = unique("t"), unique("g")
    create_topics(bootstrap, {topic: 2, "kip848-filler-wb": 1})
    produce(bootstrap, topic, (f"v{i}" for i in range(20)))
    produce(bootstrap, "kip848-filler-wb", ["a", "b"])
    members = _online_way_back(cluster, group, topic, tmp_path)
    raw = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(raw.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC].partitions)
    partition = coordinator_partition(group, partitions)
    filler = next(f"kip848-filler-wb-{i}" for i in range(100_000)
                  if coordinator_partition(f"kip848-filler-wb-{i}", partitions) == partition)
    marks = {n: cluster.node_log_path(n).stat().st_size for n in cluster.node_ids}
    cleaning = re.compile(rf"Beginning cleaning of log {OFFSETS_TOPIC}-{partition}\b")
    verdicts, moves = [], []
    try:
        with _admin(cluster) as admin:
            before = admin.group_offsets(group).committed
        _alter(bootstrap, ResourceType.TOPIC, OFFSETS_TOPIC, FAST_OFFSETS)
        for node_id in cluster.node_ids:  # a per-node dynamic setting of the cleaner
            _alter(bootstrap, ResourceType.BROKER, str(node_id), {"log.cleaner.backoff.ms": "100"})
        n = 0
        for _ in range(3):
            wait_group_partition_in_sync(cluster, group)
            node = coordinator_node(bootstrap, group)
            with _admin(cluster) as admin:  # the cleaner at work on the partition when its coordinator moves
                for _commit in range(10):
                    n += 1
                    admin.alter_group_offsets(filler, {TopicPartition("kip848-filler-wb", 0): n % 2})
                    time.sleep(0.3)
            cluster.stop_node(node)
            cluster.start_node(node)
            now = _classic(cluster, group, 2)
            with _admin(cluster) as admin:
                assert admin.group_offsets(group).committed == before
            proof = _prove(context, group)
            verdicts.append(proof["load"]["status"])
            moves.append((node, now.coordinator_id))
        # the cleaner compacts the way back's records in its own time: what the rule says ends the exposure
        wait_until(lambda: _prove(context, group)["load"]["status"] == GroupLoad.LOADS.value, timeout=120,
                   what="the cleaner compacted the way back's records (the proof says the group loads)")
        cleanings = max(len(cleaning.findall(read_from(cluster.node_log_path(n), marks[n]))) for n in marks)
        unloadable = [n for n in marks if f"Group {group} is not a consumer group"
                      in read_from(cluster.node_log_path(n), marks[n])]
    finally:
        _alter(bootstrap, ResourceType.TOPIC, OFFSETS_TOPIC, dict.fromkeys(FAST_OFFSETS))
        for node_id in cluster.node_ids:
            _alter(bootstrap, ResourceType.BROKER, str(node_id), {"log.cleaner.backoff.ms": None})
        for m in members:
            m.stop()
    record_property("cleanings", cleanings)
    print(f"figures: {len(moves)} coordinator moves (restarted node -> new coordinator) {moves}; cleanings of "
          f"{OFFSETS_TOPIC}-{partition} logged during the test: {cleanings}; record verdicts after each move: "
          f"{verdicts}; nodes logging 'not a consumer group': {unloadable}")
    assert cleanings >= 1 and not unloadable

"""Scale: thousands of groups, thousands of partitions, through the native backend (KafkaAdmin).

On one fresh local broker (heap 1g, --heap):

(a) 2,000 consumer groups, each created by committing one offset
    (AdminClient.alter_consumer_group_offsets, all requests in flight at once:
    the fastest real way found; a consumer-per-group commit is sampled for
    comparison). The broker makes such offset-only groups classic, Empty
    groups. Then, timed:
      * list_groups()                          one ListGroups (what the inventory DAG does);
      * describe every group one KafkaAdmin.describe_group(g) at a time (the
        group's coordinator asked directly; a whole fleet is read with the
        batched KafkaAdmin.inventory(), measured by bench/fleet.py);
      * for reference: the same descriptions from one listing (the
        private ``_describe_consumer_group(g, listing)`` path, no re-listing), and confluent-kafka's
        describe_consumer_groups in batches of 100 (what batching would give).
(b) offsets snapshot of one group committed on 5,000 partitions (5 topics x
    1,000, one record each, commit offset 1): the library's
    take_snapshot(KafkaAdmin, group) as KafkaSnapshotGroupOffsetsOperator runs it,
    median of N rounds; the JSON's size; peak RSS of this Python process
    (ru_maxrss) before/after and the Python-heap peak of one traced run
    (tracemalloc; librdkafka's C memory is not traced); the broker's RSS.

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/scale.py [--groups 2000] [--partitions 5000] [--small]
(--small: 200 groups, 500 partitions.) The machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
import tracemalloc

import psutil
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient

from airflow_provider_kip848.kafka.api import take_snapshot
from airflow_provider_kip848.kafka.model import OffsetSnapshot
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics
from kip848_harness.kafka_cluster import LocalKafka

GROUPS_TOPIC = "scale-groups"
SNAP_GROUP = "scale-snapshot-group"


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def rss_mb(pid: int | None = None) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def create_groups_admin(bootstrap: str, names: list[str]) -> float:
    """One OffsetCommit per group (confluent allows one group per call), all in flight; seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    t0 = time.perf_counter()
    futures = [admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, [CTP(GROUPS_TOPIC, 0, 1)])],
                                                  request_timeout=120)[g] for g in names]
    for f in futures:
        assert all(tp.error is None for tp in f.result(180).topic_partitions)
    return time.perf_counter() - t0


def create_groups_consumer(bootstrap: str, names: list[str]) -> float:
    """The alternative: a consumer per group committing one offset synchronously (no join); seconds."""
    t0 = time.perf_counter()
    for g in names:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": g, "enable.auto.commit": False})
        c.commit(offsets=[CTP(GROUPS_TOPIC, 0, 1)], asynchronous=False)
        c.close()
    return time.perf_counter() - t0


def produce_one_per_partition(bootstrap: str, topics: dict[str, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for topic, n in topics.items():
        for p in range(n):
            while True:
                try:
                    producer.produce(topic, value=b"x", partition=p)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
    assert producer.flush(120) == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=5000, help="total, in topics of at most 1,000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heap", default="1g", help="broker heap (LocalKafka heap=)")
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--small", action="store_true", help="quick smoke run: 200 groups, 500 partitions")
    args = parser.parse_args()
    if args.small:
        args.groups, args.partitions = 200, 500

    med = statistics.median
    out: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        kafka = LocalKafka(f"{tmp}/kafka", version=args.version, die_with_parent=True, heap=args.heap)
        report = kafka.start()
        try:
            bs = kafka.bootstrap_servers
            broker_pid = report.pid
            print(f"broker: {report.summary()} (heap {args.heap})")
            create_topics(bs, {GROUPS_TOPIC: 1})
            produce_one_per_partition(bs, {GROUPS_TOPIC: 1})

            # -- (a) groups -------------------------------------------------------------------
            sample = max(20, args.groups // 40)
            per_consumer = create_groups_consumer(bs, [f"scale-c-{i:05d}" for i in range(sample)]) / sample
            names = [f"scale-g-{i:05d}" for i in range(args.groups - sample)]
            per_admin = create_groups_admin(bs, names) / len(names)
            print(f"created {args.groups} groups: {len(names)} by admin OffsetCommit in flight "
                  f"({per_admin * 1000:.2f} ms/group, {1 / per_admin:,.0f} groups/s), {sample} by a consumer "
                  f"commit each ({per_consumer * 1000:.1f} ms/group)")
            settings = ClientSettings(bs)
            with KafkaAdmin(settings) as admin:
                admin.list_groups()  # connect
                lists, library, from_listing, batched = [], [], [], []
                rss0 = maxrss_mb()
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    listing = admin.list_groups()
                    lists.append(time.perf_counter() - t)
                    ours = [g for g in listing if g.group_id.startswith("scale-")]
                    assert len(ours) == args.groups, len(ours)
                    types = sorted({(g.type.value, g.state) for g in ours})
                t = time.perf_counter()
                described = [admin.describe_group(g.group_id) for g in ours]
                library.append(time.perf_counter() - t)
                assert all(d.state == "Empty" for d in described)
                t = time.perf_counter()
                again = [admin._describe_consumer_group(g.group_id, g) for g in ours]
                from_listing.append(time.perf_counter() - t)
                assert [d.group_id for d in again] == [d.group_id for d in described]
                rdk = AdminClient(settings.confluent_config())
                ids = [g.group_id for g in ours]
                t = time.perf_counter()
                n = 0
                for i in range(0, len(ids), 100):
                    for f in rdk.describe_consumer_groups(ids[i:i + 100], request_timeout=60).values():
                        f.result(90)
                        n += 1
                batched.append(time.perf_counter() - t)
                assert n == len(ids)
                rss_groups = maxrss_mb() - rss0
            out.append(f"(a) {args.groups} groups ({', '.join(f'{t} {s}' for t, s in types)}):")
            out.append(f"    list_groups(): median {med(lists) * 1000:.0f} ms over {args.rounds}")
            out.append(f"    describe all, library (describe_group per group): {med(library):.1f} s "
                       f"= {med(library) / args.groups * 1000:.1f} ms/group")
            out.append(f"    describe all from one listing (listing given, no re-list): {med(from_listing):.1f} s "
                       f"= {med(from_listing) / args.groups * 1000:.1f} ms/group")
            out.append(f"    describe all, confluent describe_consumer_groups x100/batch (reference): "
                       f"{med(batched):.2f} s")
            out.append(f"    peak RSS growth of this process during (a): {rss_groups:.0f} MB; broker RSS "
                       f"{rss_mb(broker_pid):.0f} MB")

            # -- (b) offsets snapshot over many partitions ----------------------------------------
            per_topic = min(1000, args.partitions)
            topics = {}
            left = args.partitions
            while left > 0:
                topics[f"scale-snap-{len(topics)}"] = min(per_topic, left)
                left -= topics[f"scale-snap-{len(topics) - 1}"]
            t = time.perf_counter()
            create_topics(bs, topics, timeout=600)
            created = time.perf_counter() - t
            produce_one_per_partition(bs, topics)
            print(f"created {len(topics)} topic(s), {args.partitions} partitions in {created:.1f} s", flush=True)
            request = [ConsumerGroupTopicPartitions(SNAP_GROUP, [CTP(tp, p, 1) for tp, n in topics.items()
                                                                 for p in range(n)])]
            t = time.perf_counter()
            committer = AdminClient({"bootstrap.servers": bs})  # keep a reference: a collected client never
            res = committer.alter_consumer_group_offsets(     # completes its futures
                request, request_timeout=60)[SNAP_GROUP].result(90)
            assert all(tp.error is None for tp in res.topic_partitions)
            print(f"committed offset 1 on {args.partitions} partitions in {time.perf_counter() - t:.2f} s", flush=True)
            print(f"broker RSS {rss_mb(broker_pid):.0f} MB", flush=True)

            snaps, jsons = [], []
            with KafkaAdmin(settings) as admin:
                admin.describe_cluster()
                peak_before = maxrss_mb()
                rss_before = rss_mb()
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    snap = take_snapshot(admin, SNAP_GROUP)
                    snaps.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    text = snap.to_json()
                    jsons.append(time.perf_counter() - t)
                    assert len(snap.committed) == args.partitions, len(snap.committed)
                peak_delta = maxrss_mb() - peak_before
                rss_after = rss_mb()
                tracemalloc.start()
                snap = take_snapshot(admin, SNAP_GROUP)
                text = snap.to_json()
                _, traced_peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            assert OffsetSnapshot.from_json(text).committed == snap.committed
            size = len(text.encode())
            compact = len(json.dumps(snap.to_dict(), separators=(",", ":")).encode())
            out.append(f"(b) offsets snapshot of one group over {args.partitions} partitions ({len(topics)} topic(s)):")
            out.append(f"    take_snapshot(): median {med(snaps):.2f} s over {args.rounds} "
                       f"({med(snaps) / args.partitions * 1e6:.0f} us/partition); to_json(): {med(jsons) * 1000:.0f} ms")
            out.append(f"    JSON {size / 1024:.0f} KiB ({size / args.partitions:.0f} B/partition; "
                       f"{compact / 1024:.0f} KiB without indentation)")
            out.append(f"    memory: peak RSS delta {peak_delta:.1f} MB (RSS {rss_before:.0f} -> {rss_after:.0f} MB), "
                       f"Python-heap peak of one snapshot+JSON {traced_peak / 2**20:.1f} MB; "
                       f"broker RSS {rss_mb(broker_pid):.0f} MB")
        finally:
            kafka.stop()
    print()
    print("\n".join(out))
    lib = med(library) / args.groups
    print(f"ratio describe per group, library / from one listing: {lib / (med(from_listing) / args.groups):.1f}x; "
          f"library / confluent batched: {med(library) / med(batched):.0f}x")


if __name__ == "__main__":
    main()

"""Fleet inventory at scale: KafkaAdmin.inventory() against confluent-kafka's batched describe, side by side.

On one fresh local broker (heap 1g, production group defaults), groups are
added in steps up to each size (default 1,000, 5,000, 10,000): offset-only
groups (one OffsetCommit each, all in flight: classic, Empty) plus a few
dozen groups with a live member (half classic, half consumer protocol,
real confluent-kafka consumers started once). At each size, in the same run
and alternating which goes first, median of N rounds:

  * the provider's inventory: every group with type, state, members,
    assignor, committed offsets, log start/end, lag and the verdict of each
    migration (KafkaAdmin.inventory(): ListGroups, FindCoordinator, describes
    and OffsetFetch batched per coordinator, ListOffsets per leader);
  * confluent-kafka's describe_consumer_groups of the same groups, every id
    in one call (librdkafka takes any number of ids per call), describes only.

Prints ms per group at each size, the linearity ratio (ms/group at the
largest size over the smallest) and the ratio inventory / confluent at each
size. Target (issue 17): 10,000 groups in <= 10 s on the 2-core development
machine, linearity within 1.5x, and at most 1.5x confluent's time.

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/fleet.py [--sizes 1000,5000,10000] [--live 24] [--small]
(--small: sizes 200,500,1000 and 6 live groups.) The machine is shared and noisy: read medians and ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.testing.broker import LocalKafka
from airflow_provider_kip848.testing.clients import ConsumerProcess, create_topics, produce
from airflow_provider_kip848.testing.waiting import wait_until

TOPIC = "fleet-groups"
LIVE_TOPIC = "fleet-live"


def add_offset_only_groups(admin: AdminClient, names: list[str]) -> float:
    """One OffsetCommit per group (confluent allows one group per call), all in flight; seconds."""
    t0 = time.perf_counter()
    futures = [admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, [CTP(TOPIC, 0, 1)])],
                                                  request_timeout=120)[g] for g in names]
    for f in futures:
        assert all(tp.error is None for tp in f.result(180).topic_partitions)
    return time.perf_counter() - t0


def confluent_describe(admin: AdminClient, ids: list[str]) -> float:
    """Every id in one describe_consumer_groups call; seconds until every future has its description."""
    t0 = time.perf_counter()
    futures = admin.describe_consumer_groups(ids, request_timeout=120)
    for f in futures.values():
        f.result(180)
    elapsed = time.perf_counter() - t0
    assert len(futures) == len(ids)
    return elapsed


def provider_inventory(admin: KafkaAdmin, expected: int) -> float:
    t0 = time.perf_counter()
    inv = admin.inventory(timeout_s=60)
    elapsed = time.perf_counter() - t0
    assert len(inv) == expected and inv.complete and not inv.unknown and inv.cluster_error is None, (
        len(inv), inv.unanswered_brokers, [e.error for e in inv.unknown][:3], inv.cluster_error)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000")
    parser.add_argument("--live", type=int, default=24, help="groups with a live member (half classic)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--small", action="store_true", help="quick run: sizes 200,500,1000, 6 live groups")
    args = parser.parse_args()
    sizes = [200, 500, 1000] if args.small else [int(s) for s in args.sizes.split(",")]
    live = 6 if args.small else args.live
    med = statistics.median
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        kafka = LocalKafka(f"{tmp}/kafka", version=args.version, die_with_parent=True, heap=args.heap)
        print(f"broker: {kafka.start().summary()} (heap {args.heap})", flush=True)
        members: list[ConsumerProcess] = []
        try:
            bs = kafka.bootstrap_servers
            create_topics(bs, {TOPIC: 1, LIVE_TOPIC: 4})
            produce(bs, TOPIC, ["x", "y"])
            produce(bs, LIVE_TOPIC, (f"v{i}" for i in range(100)))
            live_groups = [f"fleet-live-{i:03d}" for i in range(live)]
            for i, g in enumerate(live_groups):
                members.append(ConsumerProcess.start(bs, g, [LIVE_TOPIC], protocol="classic" if i % 2 else "consumer",
                                                     client_id=f"fleet-{i}", log_file=f"{tmp}/{g}.log"))
            settings = ClientSettings(bs)
            rdk = AdminClient(settings.confluent_config())
            with KafkaAdmin(settings) as admin:
                wait_until(lambda: sum(1 for g in admin.list_groups() if g.group_id in set(live_groups)
                                       and g.state == "Stable") == live, timeout=180, what="live groups Stable")
                made = 0
                for size in sizes:
                    names = [f"fleet-g-{i:06d}" for i in range(made, size - live)]
                    created = add_offset_only_groups(rdk, names) if names else 0.0
                    made = size - live
                    listing = admin.list_groups()
                    ids = [g.group_id for g in listing if g.type in (GroupType.CLASSIC, GroupType.CONSUMER)]
                    assert len(ids) == size, (len(ids), size)
                    ours, theirs = [], []
                    provider_inventory(admin, size)  # warm-up: connections, coordinators
                    confluent_describe(rdk, ids)
                    for r in range(args.rounds):
                        if r % 2:
                            theirs.append(confluent_describe(rdk, ids))
                            ours.append(provider_inventory(admin, size))
                        else:
                            ours.append(provider_inventory(admin, size))
                            theirs.append(confluent_describe(rdk, ids))
                    rows.append((size, med(ours), med(theirs)))
                    print(f"{size:>6} groups ({len(names)} added in {created:.1f} s): inventory {med(ours):.2f} s "
                          f"= {med(ours) / size * 1000:.3f} ms/group; confluent describe {med(theirs):.2f} s "
                          f"= {med(theirs) / size * 1000:.3f} ms/group; inventory/confluent "
                          f"{med(ours) / med(theirs):.2f}x", flush=True)
        finally:
            for m in members:
                m.stop()
            kafka.stop()
    print()
    print("size     inventory s  ms/group   confluent s  ms/group   inventory/confluent")
    for size, ours_s, theirs_s in rows:
        print(f"{size:>6}   {ours_s:>9.2f}  {ours_s / size * 1000:>8.3f}   {theirs_s:>11.2f}  "
              f"{theirs_s / size * 1000:>8.3f}   {ours_s / theirs_s:>6.2f}x")
    (s0, o0, _), (s1, o1, _) = rows[0], rows[-1]
    print(f"linearity (inventory ms/group at {s1} / at {s0}): {(o1 / s1) / (o0 / s0):.2f}")


if __name__ == "__main__":
    main()

"""Admin latency: the native backend (KafkaAdmin) vs Kafka's CLI tools doing the same action.

One fresh local broker; four actions, each done by
  * native warm: one KafkaAdmin reused across calls (a hook inside one task);
  * native cold: a new KafkaAdmin per call, connection set-up included (a task
    that makes one call and exits, the fair match for a CLI tool's JVM start);
  * CLI backend: KafkaCli, i.e. what KafkaCliHook runs (often several tool calls
    per action: listing, describing, reading back);
  * raw tool: one call of the Kafka tool a runbook would type.

Actions:
  (a) describe features                       (kafka-features describe)
  (b) set a group config, alternating 45000/50000 so every call changes it
      (consumer.session.timeout.ms on the live group; kafka-configs --alter)
  (c) describe a live consumer group: 3 KIP-848 members, committed offsets
      (kafka-consumer-groups --describe --members --verbose)
  (d) committed offsets of a group with 1,000 partitions committed
      (kafka-consumer-groups --describe --offsets)

All sides run interleaved in each round (the order rotates per round); medians
over N rounds are printed per action, with the ratios CLI/native last.

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/admin_latency.py [--rounds 5] [--partitions 1000] [--small]
The machine is shared and noisy: read medians and ratios, not single runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient

from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.waiting import wait_until

LIVE_TOPIC, LIVE_GROUP = "lat-live", "lat-live-group"
OFFSETS_TOPIC, OFFSETS_GROUP = "lat-offsets", "lat-offsets-group"
CONFIG = "consumer.session.timeout.ms"
SIDES = ("native warm", "native cold", "CLI backend", "raw tool")
ACTIONS = ("describe features", "set group config", "describe group", "group offsets")


def commit_everywhere(bootstrap: str, topic: str, partitions: int, group: str) -> None:
    """One record per partition, then one admin OffsetCommit of offset 1 for every partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for p in range(partitions):
        producer.produce(topic, value=b"x", partition=p)
        producer.poll(0)
    assert producer.flush(60) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group, [CTP(topic, p, 1) for p in range(partitions)])]
    result = admin.alter_consumer_group_offsets(request, request_timeout=60)[group].result(90)
    assert all(tp.error is None for tp in result.topic_partitions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--small", action="store_true", help="quick smoke run: 2 rounds, 200 partitions")
    args = parser.parse_args()
    if args.small:
        args.rounds, args.partitions = 2, 200

    timings: dict[tuple[str, str], list[float]] = {(a, s): [] for a in ACTIONS for s in SIDES}
    members: list[ConsumerProcess] = []
    with tempfile.TemporaryDirectory() as tmp:
        kafka = LocalKafka(f"{tmp}/kafka", version=args.version, die_with_parent=True)
        report = kafka.start()
        try:
            bs = kafka.bootstrap_servers
            print(f"broker: {report.summary()}")
            settings = ClientSettings(bs)
            cli = KafkaCli(settings, KafkaTools(version=args.version))
            warm = KafkaAdmin(settings)

            # -- fixtures: a live KIP-848 group with commits, and a group with N committed partitions
            t0 = time.perf_counter()
            create_topics(bs, {LIVE_TOPIC: 6, OFFSETS_TOPIC: args.partitions}, timeout=120)
            produce(bs, LIVE_TOPIC, (f"v{i}" for i in range(600)), keys=(str(i) for i in range(600)))
            members = [ConsumerProcess.start(bs, LIVE_GROUP, [LIVE_TOPIC], protocol="consumer", client_id=f"m{i}",
                                             log_file=f"{tmp}/m{i}.log") for i in range(3)]
            wait_until(lambda: (d := warm.describe_group(LIVE_GROUP)).state == "Stable" and len(d.members) == 3
                       and sum(len(m.assignment) for m in d.members) == 6,
                       what="3 stable members", timeout=90, interval=0.3)
            wait_until(lambda: warm.group_offsets(LIVE_GROUP).total_lag == 0, what="live group drained and committed",
                       timeout=90, interval=0.3)
            commit_everywhere(bs, OFFSETS_TOPIC, args.partitions, OFFSETS_GROUP)
            committed = len(warm.group_offsets(OFFSETS_GROUP).committed)
            assert committed == args.partitions, committed
            print(f"fixtures in {time.perf_counter() - t0:.1f} s: group {LIVE_GROUP} (3 consumer-protocol members, "
                  f"6 partitions, committed), group {OFFSETS_GROUP} ({committed} partitions committed)")

            raw = {
                "describe features": ["describe"],
                "set group config": None,  # built per call (the value alternates)
                "describe group": ["--describe", "--group", LIVE_GROUP, "--members", "--verbose"],
                "group offsets": ["--describe", "--group", OFFSETS_GROUP, "--offsets"],
            }
            raw_tool = {"describe features": "kafka-features", "set group config": "kafka-configs",
                        "describe group": "kafka-consumer-groups", "group offsets": "kafka-consumer-groups"}
            value = iter(range(10**6))

            def next_value() -> int:
                return 45000 if next(value) % 2 else 50000

            def run_raw(action: str) -> None:
                argv = raw[action]
                if argv is None:
                    argv = ["--alter", "--entity-type", "groups", "--entity-name", LIVE_GROUP,
                            "--add-config", f"{CONFIG}={next_value()}"]
                proc = subprocess.run(kafka.tool_command(raw_tool[action], argv), capture_output=True, text=True,
                                      timeout=120, stdin=subprocess.DEVNULL)
                if proc.returncode != 0 or "Error" in proc.stdout:
                    raise RuntimeError(f"{raw_tool[action]} failed: {proc.stderr or proc.stdout}")
                if action == "group offsets":
                    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith(OFFSETS_GROUP)]
                    assert len(rows) == args.partitions, len(rows)

            def run_backend(backend, action: str) -> None:
                if action == "describe features":
                    assert backend.describe_features().level("group.version") == 1
                elif action == "set group config":
                    v = next_value()
                    change = backend.alter_group_config(LIVE_GROUP, {CONFIG: v})
                    assert change.applied and str(change.after.get(CONFIG)) == str(v), change
                elif action == "describe group":
                    d = backend.describe_group(LIVE_GROUP)
                    assert len(d.members) == 3, d
                else:
                    assert len(backend.group_offsets(OFFSETS_GROUP).committed) == args.partitions

            def run_cold(action: str) -> None:
                with KafkaAdmin(settings) as admin:
                    run_backend(admin, action)

            runners: dict[str, Callable[[str], None]] = {
                "native warm": lambda a: run_backend(warm, a),
                "native cold": run_cold,
                "CLI backend": lambda a: run_backend(cli, a),
                "raw tool": run_raw,
            }
            for action in ACTIONS:  # one untimed warm-up of every side (page cache, coordinator loading)
                for side in SIDES:
                    runners[side](action)
            for r in range(args.rounds):
                order = SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]
                for action in ACTIONS:
                    for side in order:
                        t = time.perf_counter()
                        runners[side](action)
                        timings[(action, side)].append(time.perf_counter() - t)
                print(f"round {r + 1}/{args.rounds} done")
            warm.close()
        finally:
            for m in members:
                m.stop()
            kafka.stop()

    med = {k: statistics.median(v) for k, v in timings.items()}
    print(f"\nmedians over {args.rounds} rounds (seconds; offsets group: {args.partitions} partitions):")
    print(f"{'action':20s}" + "".join(f"{s:>14s}" for s in SIDES))
    for action in ACTIONS:
        print(f"{action:20s}" + "".join(f"{med[(action, s)]:14.3f}" for s in SIDES))
    total = {s: sum(med[(a, s)] for a in ACTIONS) for s in SIDES}
    print(f"{'all four (sum)':20s}" + "".join(f"{total[s]:14.3f}" for s in SIDES))
    print("\nratios (CLI backend / native cold, CLI backend / native warm, raw tool / native cold):")
    for action in ACTIONS:
        print(f"  {action:20s} {med[(action, 'CLI backend')] / med[(action, 'native cold')]:6.1f}x "
              f"{med[(action, 'CLI backend')] / med[(action, 'native warm')]:7.1f}x "
              f"{med[(action, 'raw tool')] / med[(action, 'native cold')]:6.1f}x")
    print(f"  {'overall (sums)':20s} {total['CLI backend'] / total['native cold']:6.1f}x "
          f"{total['CLI backend'] / total['native warm']:7.1f}x {total['raw tool'] / total['native cold']:6.1f}x")


if __name__ == "__main__":
    main()

"""Failover: seconds from SIGKILLing a group's coordinator node to a correct answer, three clients side by side.

One 3-node cluster (fast tuning, the Kafka defaults for broker sessions: a dead node is fenced after
``broker.session.timeout.ms`` = 9 s). A group of 2 live consumer-protocol members consumes a topic that a
producer writes to 20 times a second. Each round kills the node coordinating the group and measures, all three
at once:

  * native hook   one long-lived KafkaAdmin (what a hook inside a task holds) describing the group in a loop:
                  the first description after the kill with both members;
  * trigger       KafkaGroupConditionTrigger, as the triggerer runs it, waiting on a condition that is never
                  met: the first poll after the kill that the cluster answered (with both members);
  * consumer      the plain confluent-kafka consumer's own failover: the first record produced after the kill
                  that a member consumed (its heartbeats and fetches moved to the new nodes).

Then the node is started again and the next round waits until the cluster is whole. Medians over N rounds,
and the ratios to the consumer's own failover last.

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/failover.py [--rounds 3]
The machine is shared and noisy: read medians and ratios, not single runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

import airflow_provider_kip848.triggers.group as trigger_module
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import ConsumerProcess, create_topics
from kip848_harness.faults import coordinator_node, restore
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.waiting import wait_until

TOPIC, GROUP = "fo-in", "fo-group"


class Feeder(threading.Thread):
    """Writes one record every 50 ms; each value is the wall-clock time it was produced."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1",
                                  "message.timeout.ms": 120000})
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            self.producer.produce(TOPIC, value=json.dumps(time.time()).encode())
            self.producer.poll(0)
            time.sleep(0.05)
        self.producer.flush(30)


class HookLoop(threading.Thread):
    """A long-lived native admin describing the group in a loop; records when it answered with both members."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.admin = KafkaAdmin(ClientSettings(bootstrap, request_timeout_ms=15000))
        self.answers: list[float] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            try:
                if len(self.admin.describe_group(GROUP).members) == 2:
                    self.answers.append(time.time())
            except Exception:  # noqa: BLE001 - a failed describe is what failover looks like
                pass
            time.sleep(0.1)
        self.admin.close()


class TriggerLoop(threading.Thread):
    """The deferrable wait as the triggerer runs it, on a condition never met; records each answered poll."""

    def __init__(self, conn_id: str) -> None:
        super().__init__(daemon=True)
        self.answers: list[float] = []
        self.trigger = trigger_module.KafkaGroupConditionTrigger(
            kafka_conn_id=conn_id, group_id=GROUP, poll_interval=0.1,
            condition=GroupCondition("migrated", group_type="consumer", min_members=3).to_dict())
        self.task: asyncio.Task | None = None
        self.loop = asyncio.new_event_loop()

    def run(self) -> None:
        real = trigger_module.evaluate_condition

        def spy(admin, group_id, condition):
            result = real(admin, group_id, condition)
            if len(result.detail.get("members") or []) == 2:
                self.answers.append(time.time())
            return result

        trigger_module.evaluate_condition = spy

        async def wait() -> None:
            async for _ in self.trigger.run():
                return

        self.task = self.loop.create_task(wait())
        try:
            self.loop.run_until_complete(self.task)
        except asyncio.CancelledError:
            pass
        finally:
            trigger_module.evaluate_condition = real

    def stop(self) -> None:
        if self.task is not None:
            self.loop.call_soon_threadsafe(self.task.cancel)
        self.join(30)


def consumed_after(members: list[ConsumerProcess], t: float) -> float | None:
    """When a member first consumed a record produced after ``t`` (the record file's ``at``)."""
    times = [r["at"] for m in members for r in m.records() if float(r["value"]) > t]
    return min(times) if times else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import os

    work = Path(tempfile.mkdtemp(prefix="kip848-failover-"))
    cluster = LocalKafka(work / "cluster", nodes=3, heap="384m", die_with_parent=True)
    report = cluster.start()
    print(report.summary())
    bootstrap = cluster.bootstrap_servers
    os.environ["AIRFLOW_CONN_KAFKA_FAILOVER"] = json.dumps({"conn_type": "kafka_admin", "host": bootstrap,
                                                            "extra": {"request_timeout_ms": 15000}})
    create_topics(bootstrap, {TOPIC: 4})
    members = [ConsumerProcess.start(bootstrap, GROUP, [TOPIC], protocol="consumer", client_id=f"fo-{i}",
                                     record_file=str(work / f"fo-{i}.jsonl"), log_file=str(work / f"fo-{i}.log"))
               for i in range(2)]
    feeder, hook, trigger = Feeder(bootstrap), HookLoop(bootstrap), TriggerLoop("kafka_failover")
    rows: dict[str, list[float]] = {"native hook": [], "trigger": [], "consumer": []}
    try:
        with KafkaAdmin(ClientSettings(bootstrap)) as admin:
            wait_until(lambda: len(admin.describe_group(GROUP).members) == 2, timeout=120, what="2 members")
        feeder.start()
        hook.start()
        trigger.start()
        wait_until(lambda: hook.answers and trigger.answers and consumed_after(members, time.time() - 5),
                   timeout=120, what="all three clients working")
        for r in range(args.rounds):
            node = coordinator_node(bootstrap, GROUP)
            killed_at = time.time()
            cluster.kill_node(node)
            def recovered(since: float = killed_at) -> bool:
                return (any(t > since for t in hook.answers) and any(t > since for t in trigger.answers)
                        and consumed_after(members, since) is not None)

            wait_until(recovered, timeout=300, interval=0.2, what="all three recovered")
            got = {"native hook": min(t for t in hook.answers if t > killed_at),
                   "trigger": min(t for t in trigger.answers if t > killed_at),
                   "consumer": consumed_after(members, killed_at)}
            for name, t in got.items():
                rows[name].append(t - killed_at)  # type: ignore[operator]
            print(f"round {r + 1}: killed node {node}; " + ", ".join(f"{k} {v - killed_at:.1f} s" for k, v in got.items()
                                                                       if v is not None))
            restore(cluster)
            with KafkaAdmin(ClientSettings(bootstrap)) as admin:
                wait_until(lambda: len(admin.describe_group(GROUP).members) == 2, timeout=120, what="back to 2")
            time.sleep(5)
    finally:
        feeder.stop_flag.set()
        hook.stop_flag.set()
        trigger.stop()
        for m in members:
            m.stop()
        cluster.stop(timeout=15)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\nseconds from killing the coordinator's node to a correct answer (median of {args.rounds} rounds):")
    for name, value in med.items():
        print(f"  {name:<12} {value:6.1f} s   (all: {', '.join(f'{x:.1f}' for x in rows[name])})")
    print(f"ratio native hook / consumer's own failover: {med['native hook'] / med['consumer']:.2f}x")
    print(f"ratio trigger / consumer's own failover:     {med['trigger'] / med['consumer']:.2f}x")


if __name__ == "__main__":
    main()

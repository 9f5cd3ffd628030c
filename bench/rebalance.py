"""Rebalance time: classic protocol vs the consumer protocol (KIP-848) on the same broker.

10 real confluent-kafka consumers (one thread each, each polling only its own
consumer) subscribe to one topic of 900 partitions. Timed from the moment they
start subscribing (all released together by a barrier) until a stable
assignment: every partition assigned exactly once across the members (as each
member's own assignment() reports it after its last poll), every member holding
some, and the group described Stable by the broker (confluent AdminClient
describe_consumer_groups, polled every 100 ms). Then an 11th member joins the
stable group: time until stable again with 11 members.

Variants, interleaved round by round on one broker, each round in a new group:
  * classic, range assignor (eager: every member revokes everything on a rebalance);
  * classic, cooperative-sticky assignor (incremental);
  * consumer (KIP-848, the broker's default uniform assignor, heartbeat-driven).

Broker tuning: "production" (every broker default, as docs/local-kafka.md says
rebalance benchmarks use): group.initial.rebalance.delay.ms=3000 (classic only),
group.consumer.heartbeat.interval.ms=5000 (consumer only). --tuning fast lowers
both (0 and 500 ms) to show what the defaults cost; the classic members' own
heartbeat (a client setting, 3000 ms by default) is then set to 500 ms too. --processing-ms N makes every
member "work" N ms after each poll (it sees assignment changes only when it polls),
as a busy application does.

Context only, not reproduced here: Confluent's KIP-848 material (repeated in
librdkafka's and Karafka's docs) says "a group with 10 consumers adding 900
partitions completes rebalancing in 5 seconds instead of 103 seconds". Its
set-up (clients, network, work done during the rebalance, broker settings,
what exactly is timed) is not published with it; this script times a local,
idle group on one broker.

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/rebalance.py [--rounds 3] [--tuning production|fast]
       [--processing-ms 0] [--small]
(--small: 1 round, 4 consumers, 120 partitions.) The machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections import Counter

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from kip848_harness.clients import create_topics
from kip848_harness.kafka_cluster import LocalKafka

TOPIC = "rebalance-900"
VARIANTS = {
    "classic range": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "classic cooperative-sticky": {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"},
    "consumer (uniform)": {"group.protocol": "consumer"},
}

#: with --tuning fast, classic members get the same 500 ms heartbeat the fast broker gives consumer-protocol members
CLASSIC_FAST = {"heartbeat.interval.ms": 500, "session.timeout.ms": 6000}


class Member(threading.Thread):
    """One consumer, polled only by this thread; publishes its assignment after every poll."""

    def __init__(self, bootstrap: str, group: str, conf: dict, start: threading.Barrier | None, name: str,
                 processing: float = 0.0) -> None:
        super().__init__(daemon=True, name=name)
        cfg = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
               "enable.auto.commit": False, "auto.offset.reset": "latest", **conf}
        if conf["group.protocol"] == "classic":  # client-side timers; Java/librdkafka defaults unless given
            cfg.setdefault("session.timeout.ms", 45000)
            cfg.setdefault("heartbeat.interval.ms", 3000)
        self.consumer = Consumer(cfg)
        self.barrier = start
        self.processing = processing
        self.assigned: frozenset[int] = frozenset()
        self.subscribed_at: float | None = None
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if self.barrier is not None:
                self.barrier.wait()
            self.subscribed_at = time.perf_counter()
            self.consumer.subscribe([TOPIC])
            while not self.stop_flag.is_set():
                self.consumer.poll(0.05)
                self.assigned = frozenset(tp.partition for tp in self.consumer.assignment())
                if self.processing:  # the application working on a batch between two polls
                    self.stop_flag.wait(self.processing)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc
        finally:
            self.consumer.close()


def stable(members: list[Member], partitions: int, admin: AdminClient, group: str) -> bool:
    counts = Counter(p for m in members for p in m.assigned)
    if len(counts) != partitions or any(c != 1 for c in counts.values()) or any(not m.assigned for m in members):
        return False
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    return str(desc.state).rsplit(".", 1)[-1].upper() == "STABLE" and len(desc.members) == len(members)


def wait_stable(members, partitions, admin, group, since: float, timeout: float = 240.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for m in members:
            if m.error:
                raise m.error
        if stable(members, partitions, admin, group):
            return time.perf_counter() - since
        time.sleep(0.1)
    sizes = sorted(len(m.assigned) for m in members)
    raise TimeoutError(f"group {group} not stable after {timeout:.0f} s; assignment sizes {sizes}")


def one_trial(bootstrap: str, admin: AdminClient, group: str, conf: dict, consumers: int,
              partitions: int, processing: float = 0.0) -> tuple[float, float]:
    barrier = threading.Barrier(consumers + 1)
    members = [Member(bootstrap, group, conf, barrier, f"{group}-m{i}", processing) for i in range(consumers)]
    try:
        for m in members:
            m.start()
        barrier.wait()
        t0 = time.perf_counter()
        join = wait_stable(members, partitions, admin, group, t0)
        extra = Member(bootstrap, group, conf, None, f"{group}-extra", processing)
        members.append(extra)
        t1 = time.perf_counter()
        extra.start()
        rejoin = wait_stable(members, partitions, admin, group, t1)
        return join, rejoin
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            m.join(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=900)
    parser.add_argument("--tuning", choices=["production", "fast"], default="production")
    parser.add_argument("--processing-ms", type=int, default=0,
                        help="each member sleeps this long after every poll (an application busy with a batch)")
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--small", action="store_true", help="quick smoke run: 1 round, 4 consumers, 120 partitions")
    args = parser.parse_args()
    if args.small:
        args.rounds, args.consumers, args.partitions = 1, 4, 120

    results: dict[str, dict[str, list[float]]] = {v: {"join": [], "extra": []} for v in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        kafka = LocalKafka(f"{tmp}/kafka", version=args.version, die_with_parent=True, tuning=args.tuning,
                           heap="1g")
        report = kafka.start()
        try:
            bs = kafka.bootstrap_servers
            print(f"broker: {report.summary()} (tuning {args.tuning})")
            create_topics(bs, {TOPIC: args.partitions}, timeout=300)
            admin = AdminClient({"bootstrap.servers": bs})
            # untimed warm-up: loads the offsets-topic partitions/coordinators the groups will use
            one_trial(bs, admin, "rebalance-warmup", VARIANTS["consumer (uniform)"], 2, args.partitions)
            names = list(VARIANTS)
            for r in range(args.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                for name in order:
                    group = f"rb-{name.split()[0]}-{name.split()[-1].strip('()')}-{r}"
                    conf = dict(VARIANTS[name])
                    if args.tuning == "fast" and conf["group.protocol"] == "classic":
                        conf.update(CLASSIC_FAST)
                    join, extra = one_trial(bs, admin, group, conf, args.consumers, args.partitions,
                                            args.processing_ms / 1000)
                    results[name]["join"].append(join)
                    results[name]["extra"].append(extra)
                    print(f"round {r + 1}: {name:28s} {args.consumers} join -> stable {join:6.2f} s; "
                          f"+1 member -> stable {extra:6.2f} s")
        finally:
            kafka.stop()

    med = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in results.items()}
    print(f"\nmedians over {args.rounds} round(s): {args.consumers} consumers (threads, one process), "
          f"{args.partitions} partitions, broker tuning {args.tuning}, {args.processing_ms} ms of work after each poll")
    for name in VARIANTS:
        print(f"  {name:28s} initial join -> stable {med[name]['join']:6.2f} s; "
              f"1 extra member -> stable {med[name]['extra']:6.2f} s")
    print("context only: the published KIP-848 figure (\"10 consumers adding 900 partitions ... 5 seconds instead of "
          "103 seconds\") comes from an unpublished set-up; this run times an idle local group on one broker.")
    c = med["consumer (uniform)"]
    for name in ("classic range", "classic cooperative-sticky"):
        print(f"ratio {name} / consumer: initial join {med[name]['join'] / c['join']:.2f}x, "
              f"extra member {med[name]['extra'] / c['extra']:.2f}x")


if __name__ == "__main__":
    main()

"""Fleet inventory at scale: KafkaAdmin.inventory() against confluent-kafka's batched describe, side by side.

On one fresh local broker (heap 2g, production group defaults), groups are
added in steps up to each size (default 10,000, 30,000, 65,000: the largest
fleets users report per cluster): offset-only groups (one OffsetCommit each,
all in flight: classic, Empty) plus a few dozen groups with a live member
(half classic, half consumer protocol, real confluent-kafka consumers started
once). At each size, in the same run and alternating which goes first,
median of N rounds after a warm-up:

  * the provider's inventory: every group with type, state, members,
    assignor, committed offsets, log start/end, lag and the verdict of each
    migration (KafkaAdmin.inventory(): ListGroups, FindCoordinator, describes
    and OffsetFetch batched per coordinator, ListOffsets per leader). It runs
    in a child process of its own per size (spawned, one KafkaAdmin, driven
    round by round over a pipe), so the peak RSS printed is that of a process
    that only imports the provider, connects and takes these inventories:
    the child's VmHWM (/proc/self/status) after its last round (the warm-up
    included; each inventory is dropped before the next one), next to the
    same figure after imports and connecting, before the first inventory
    (not ru_maxrss: Linux carries it over the child's exec from this parent),
    and the CPU seconds of each inventory (user + system of the child, every
    thread: the figure a shared machine's load inflates least);
  * confluent-kafka's describe_consumer_groups of the same groups, every id
    in one call (librdkafka takes any number of ids per call), describes only,
    from this process. Above --confluent-up-to groups it is skipped (a printed
    reason says so).

Prints ms per group at each size, the peak RSS, the linearity ratio (ms/group
at the largest size over the smallest) and the ratio inventory / confluent at
each size. Targets: issue 17, 10,000 groups in <= 10 s on the 2-core development
machine, linearity within 1.5x, and at most 1.5x confluent's time; issue 29,
65,000 groups in <= 10 s with the process's peak RSS <= 1 GB.

Usage: KIP848_CACHE_DIR=$PWD/.cache .venv/bin/python bench/fleet.py [--sizes 10000,30000,65000] [--live 24] [--small]
(--small: sizes 200,500,1000 and 6 live groups.) The machine is shared and noisy: read medians and ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import tempfile
import time
from multiprocessing.connection import Connection

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient

from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import ConsumerProcess, create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.waiting import wait_until

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


def _max_rss_mb() -> float:
    """This process's peak RSS in MB: VmHWM of /proc/self/status, the high-water mark of this process image.
    Not getrusage's ru_maxrss: Linux carries it over exec, so a spawned child would report at least the
    parent's RSS at the fork (this parent holds confluent's answers for every group)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux: KiB, the parent's included


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def inventory_child(conn: Connection, bootstrap: str, expected: int) -> None:
    """The child process of one size: connects, then answers each "round" with the inventory's wall seconds
    and CPU seconds (user + system, every thread of the process: kafka-python's I/O thread decodes the
    answers) and "stop" with its peak RSS (MB). Nothing else runs in it, so the peak is the inventories'."""
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        admin.describe_cluster()  # connected, as the parent's admin is
        conn.send(_max_rss_mb())
        while conn.recv() == "round":
            cpu = _cpu_s()
            wall = provider_inventory(admin, expected)  # the inventory is dropped before the next round
            conn.send((wall, _cpu_s() - cpu))
    conn.send(_max_rss_mb())


class InventoryProcess:
    """A spawned child running :func:`inventory_child` (spawn: this process has client threads)."""

    def __init__(self, bootstrap: str, expected: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=inventory_child, args=(child, bootstrap, expected), daemon=True)
        self._proc.start()
        child.close()
        self.start_rss_mb = self._recv()

    def _recv(self):
        if not self._conn.poll(300):
            raise TimeoutError("the inventory child did not answer within 300 s")
        return self._conn.recv()

    def round(self) -> tuple[float, float]:
        """One inventory: wall seconds, CPU seconds."""
        self._conn.send("round")
        wall, cpu = self._recv()
        return wall, cpu

    def stop(self) -> float:
        """Ends the child; its peak RSS in MB."""
        self._conn.send("stop")
        peak = self._recv()
        self._proc.join(60)
        return peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,30000,65000")
    parser.add_argument("--live", type=int, default=24, help="groups with a live member (half classic)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--heap", default="2g", help="the broker's heap (65,000 groups hold ~300 MB of it)")
    parser.add_argument("--version", default="4.3.1")
    parser.add_argument("--confluent-up-to", type=int, default=None,
                        help="skip confluent's describe above this many groups (default: at every size)")
    parser.add_argument("--small", action="store_true", help="quick run: sizes 200,500,1000, 6 live groups")
    args = parser.parse_args()
    sizes = [200, 500, 1000] if args.small else [int(s) for s in args.sizes.split(",")]
    live = 6 if args.small else args.live
    med = statistics.median
    rows: list[tuple[int, float, float | None, float, float, float]] = []
    print("inventory: in a spawned child process per size (one KafkaAdmin); peak RSS = the child's VmHWM "
          "(/proc/self/status) after its warm-up and rounds; start = the same after imports and connecting",
          flush=True)
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
                    ours: list[float] = []
                    cpus: list[float] = []
                    theirs: list[float] = []
                    with_confluent = args.confluent_up_to is None or size <= args.confluent_up_to
                    child = InventoryProcess(bs, size)
                    try:
                        child.round()  # warm-up: connections, coordinators, the codecs of each answer
                        if with_confluent:
                            confluent_describe(rdk, ids)
                        for r in range(args.rounds):
                            if r % 2 and with_confluent:
                                theirs.append(confluent_describe(rdk, ids))
                            wall, cpu = child.round()
                            ours.append(wall)
                            cpus.append(cpu)
                            if r % 2 == 0 and with_confluent:
                                theirs.append(confluent_describe(rdk, ids))
                    finally:
                        peak = child.stop()
                    theirs_s = med(theirs) if theirs else None
                    rows.append((size, med(ours), theirs_s, peak, child.start_rss_mb, med(cpus)))
                    confluent = (f"confluent describe {theirs_s:.2f} s = {theirs_s / size * 1000:.3f} ms/group; "
                                 f"inventory/confluent {med(ours) / theirs_s:.2f}x" if theirs_s is not None else
                                 f"confluent describe skipped (--confluent-up-to {args.confluent_up_to})")
                    print(f"{size:>6} groups ({len(names)} added in {created:.1f} s): inventory {med(ours):.2f} s "
                          f"= {med(ours) / size * 1000:.3f} ms/group (rounds {', '.join(f'{o:.2f}' for o in ours)}; "
                          f"CPU {med(cpus):.2f} s), "
                          f"peak RSS {peak:.0f} MB (start {child.start_rss_mb:.0f} MB); {confluent}", flush=True)
        finally:
            for m in members:
                m.stop()
            kafka.stop()
    print()
    print("size     inventory s  ms/group  CPU s  peak RSS MB (start)   confluent s  ms/group   inventory/confluent")
    for size, ours_s, theirs_s, peak, start, cpu in rows:
        theirs_text = (f"{theirs_s:>11.2f}  {theirs_s / size * 1000:>8.3f}   {ours_s / theirs_s:>6.2f}x"
                       if theirs_s is not None else f"{'skipped':>11}  {'-':>8}   {'-':>6}")
        print(f"{size:>6}   {ours_s:>9.2f}  {ours_s / size * 1000:>8.3f}  {cpu:>5.2f}  {peak:>11.0f} ({start:>4.0f})   "
              f"{theirs_text}")
    (s0, o0, *_), (s1, o1, *_) = rows[0], rows[-1]
    print(f"linearity (inventory ms/group at {s1} / at {s0}): {(o1 / s1) / (o0 / s0):.2f}")


if __name__ == "__main__":
    main()

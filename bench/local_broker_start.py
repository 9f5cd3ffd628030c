"""Start-up cost of the embedded Kafka, measured side by side in one run.

Prints, over N rounds (default 3):
  * jar resolution when cached (should be ~0: a second start fetches nothing);
  * fresh cluster: storage format + broker start until it serves Metadata;
  * restart of the same cluster (no format);
  * one Kafka CLI tool call (kafka-features describe) with the launcher's
    short-lived-JVM options vs plain JVM defaults, and their ratio;
  * the release's class-data archive: the same tool call (wall and CPU seconds)
    and a fresh broker's start->ready, with the archive and without it
    (``class_data_sharing=False``), alternated in each round, and their ratios.

Usage: python bench/local_broker_start.py [--rounds N] [--version 4.3.1]
The machine is shared and noisy: read medians and ratios, not single runs.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from airflow_provider_kip848.kafka.cli.distribution import KAFKA_TOOLS, TOOL_JVM_OPTIONS, KafkaDistribution
from kip848_harness.kafka_cluster import LocalKafka


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _cpu(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = _time(lambda: subprocess.run(cmd, check=True, capture_output=True))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--version", default="4.3.1")
    args = parser.parse_args()

    dist = KafkaDistribution(args.version)
    first = dist.ensure()
    print(f"jars: {first.jars} in {dist.libs_dir} ({'fetched' if first.fetched else 'cached'}, {first.seconds:.2f} s)")
    cached = [dist.ensure() for _ in range(args.rounds)]
    assert not any(r.fetched for r in cached)
    print(f"cached resolution: median {statistics.median(r.seconds for r in cached) * 1000:.1f} ms, fetched nothing")

    fresh_format, fresh_ready, restart_ready, tuned, plain = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            kafka = LocalKafka(Path(tmp) / f"k{i}", version=args.version, die_with_parent=True)
            report = kafka.start()
            fresh_format.append(report.format_seconds)
            fresh_ready.append(report.ready_seconds)
            try:
                restart_ready.append(kafka.restart().ready_seconds)
                describe = ["--bootstrap-server", kafka.bootstrap_servers, "describe"]
                tool_cmd = dist.tool_command("kafka-features", describe)
                plain_cmd = [c for c in tool_cmd if c not in TOOL_JVM_OPTIONS]
                assert plain_cmd != tool_cmd and KAFKA_TOOLS["kafka-features"] in plain_cmd
                for _ in range(3):
                    tuned.append(_time(lambda cmd=tool_cmd: subprocess.run(cmd, check=True, capture_output=True)))
                    plain.append(_time(lambda cmd=plain_cmd: subprocess.run(cmd, check=True, capture_output=True)))
            finally:
                kafka.stop()

    no_cds = KafkaDistribution(args.version, class_data_sharing=False)
    archived: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    ready: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for cds in (True, False):
                kafka = LocalKafka(Path(tmp) / f"cds{i}{cds}", version=args.version, die_with_parent=True)
                kafka.distribution.class_data_sharing = cds
                try:
                    ready[cds].append(kafka.start().ready_seconds)
                    describe = ["--bootstrap-server", kafka.bootstrap_servers, "describe"]
                    cmd = (dist if cds else no_cds).tool_command("kafka-features", describe)
                    assert any(c.startswith("-XX:SharedArchiveFile") for c in cmd) is cds
                    archived[cds].extend(_cpu(cmd) for _ in range(3))
                finally:
                    kafka.stop()

    med = statistics.median
    wall = {cds: med(w for w, _ in runs) for cds, runs in archived.items()}
    cpu = {cds: med(c for _, c in runs) for cds, runs in archived.items()}
    print(f"class-data archive: kafka-features describe median {wall[True]:.2f} s / {cpu[True]:.2f} CPU-s with it, "
          f"{wall[False]:.2f} s / {cpu[False]:.2f} CPU-s without; ratio without/with {wall[False] / wall[True]:.2f}x "
          f"wall, {cpu[False] / cpu[True]:.2f}x CPU")
    print(f"class-data archive: broker start->ready median {med(ready[True]):.2f} s with it, {med(ready[False]):.2f} s "
          f"without; ratio {med(ready[False]) / med(ready[True]):.2f}x")
    print(f"fresh cluster: format median {med(fresh_format):.2f} s, start->ready median {med(fresh_ready):.2f} s "
          f"(max {max(fresh_ready):.2f} s over {args.rounds})")
    print(f"restart (same cluster): start->ready median {med(restart_ready):.2f} s")
    print(f"kafka-features describe: launcher JVM options median {med(tuned):.2f} s, JVM defaults median {med(plain):.2f} s")
    print(f"ratio tool call defaults/tuned: {med(plain) / med(tuned):.2f}x; "
          f"fresh format+ready: {med(fresh_format) + med(fresh_ready):.2f} s (goal < 30 s)")


if __name__ == "__main__":
    main()

"""Start-up cost of the embedded Kafka, measured side by side in one run.

Prints, over N rounds (default 3):
  * jar resolution when cached (should be ~0: a second start fetches nothing);
  * fresh cluster: storage format + broker start until it serves Metadata;
  * restart of the same cluster (no format);
  * one Kafka CLI tool call (kafka-features describe) with the launcher's
    short-lived-JVM options vs plain JVM defaults, and their ratio.

Usage: python bench/local_broker_start.py [--rounds N] [--version 4.3.1]
The machine is shared and noisy: read medians and ratios, not single runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from airflow_provider_kip848.kafka.cli.distribution import KAFKA_TOOLS, TOOL_JVM_OPTIONS
from airflow_provider_kip848.testing import KafkaDistribution, LocalKafka


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


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

    med = statistics.median
    print(f"fresh cluster: format median {med(fresh_format):.2f} s, start->ready median {med(fresh_ready):.2f} s "
          f"(max {max(fresh_ready):.2f} s over {args.rounds})")
    print(f"restart (same cluster): start->ready median {med(restart_ready):.2f} s")
    print(f"kafka-features describe: launcher JVM options median {med(tuned):.2f} s, JVM defaults median {med(plain):.2f} s")
    print(f"ratio tool call defaults/tuned: {med(plain) / med(tuned):.2f}x; "
          f"fresh format+ready: {med(fresh_format) + med(fresh_ready):.2f} s (goal < 30 s)")


if __name__ == "__main__":
    main()

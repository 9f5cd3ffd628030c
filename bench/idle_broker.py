"""An idle test broker's CPU with the fast tuning's idle settings and with Kafka's defaults for them, side by side.

The fast tuning (``kip848_harness.kafka_tuning.FAST_TUNING``) writes the controller's no-op metadata record every 5 s instead of
500 ms and runs 2 request-handler and 2 network threads instead of 8 and 3. Each round starts one single-node
broker per variant (alternating which goes first), lets it settle, and reads its JVM's CPU time from ``/proc`` over
the same window; prints each variant's share of a core and the ratio.

Usage: python bench/idle_broker.py [--rounds N] [--seconds S]
The machine is shared and noisy: read medians and ratios, not single runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from kip848_harness.kafka_cluster import LocalKafka

#: Kafka's defaults for the three idle settings of the fast tuning
KAFKA_DEFAULTS = {"metadata.max.idle.interval.ms": "500", "num.io.threads": "8", "num.network.threads": "3"}
SETTLE_SECONDS = 15.0


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_share(overrides: dict[str, str], seconds: float) -> float:
    """Share of one core an idle single-node broker uses over ``seconds``, after it settled."""
    with tempfile.TemporaryDirectory() as workdir:
        kafka = LocalKafka(workdir, overrides=overrides)
        kafka.start()
        try:
            pid = kafka.status().nodes[0].pid
            assert pid is not None
            time.sleep(SETTLE_SECONDS)
            cpu, wall = _cpu_seconds(pid), time.monotonic()
            time.sleep(seconds)
            return (_cpu_seconds(pid) - cpu) / (time.monotonic() - wall)
        finally:
            kafka.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    variants = {"fast tuning": {}, "Kafka defaults": KAFKA_DEFAULTS}
    shares: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(args.rounds):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for name in order:
            shares[name].append(idle_share(variants[name], args.seconds))
            print(f"round {round_ + 1}: {name:15s} {100 * shares[name][-1]:.2f}% of a core", flush=True)
    fast, default = (statistics.median(shares[n]) for n in variants)
    print(f"median idle CPU: fast tuning {100 * fast:.2f}%, Kafka defaults {100 * default:.2f}% of a core; "
          f"defaults / fast = {default / fast:.2f}x")


if __name__ == "__main__":
    main()

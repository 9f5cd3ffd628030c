"""The ownership map's regexes against a group id made to backtrack: Python's ``re`` against RE2 (issue 45, item 3).

The fleet plan asks the ownership map who owns every group of the inventory (``OwnershipMap.owners``, which
``fleet.select`` calls): each rule's regex is full-matched against each group id. Anyone who may create a
consumer group chooses its id. Printed:

  * ``re`` (the reader before issue 45) on ``(a+)+b`` against ``a`` * n + ``!``, for n = 16, 18, ... up to the
    largest n whose match ends within --budget seconds (each in a child process, killed past the budget), the
    ratio of each step to the previous (backtracking doubles per ``a``), and the time extrapolated to n = 64;
  * the provider's matcher (RE2, ``kafka/patterns.py``) on the same pattern and n = 64, 1,000 and 100,000
    (the longest id Kafka's tools take is far shorter), median of 5;
  * a fleet plan's lookups: what ``fleet.select`` asks the map (``conflicts``, ``idle``, ``dead_rules`` and
    ``owner_of`` for every id) on --groups ordinary ids plus the hostile one, with a map of 20 prefix rules and
    5 regex rules (one of them ``(a+)+b``), with the provider's map (RE2, each answer kept), median of 5 on a
    fresh map each round; against the same lookups with ``re`` (the reader before issue 45) without the
    hostile id (``re`` never ends with it): what RE2 costs on ids nobody crafted.

Usage: .venv/bin/python bench/ownership_regex.py [--budget 20] [--groups 10000]. No broker is needed: the matching
is pure. The machine is shared and noisy: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import re
import statistics
import time

from airflow_provider_kip848.fleet import OwnershipMap
from airflow_provider_kip848.kafka.patterns import compile_name_pattern

PATTERN = "(a+)+b"


def _re_child(n: int, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    started = time.perf_counter()
    re.fullmatch(PATTERN, "a" * n + "!")
    queue.put(time.perf_counter() - started)


def re_time(n: int, budget: float) -> float | None:
    """Seconds Python's re takes to fail ``(a+)+b`` on ``a`` * n + ``!``; None past ``budget`` (child killed)."""
    queue: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    child = multiprocessing.Process(target=_re_child, args=(n, queue), daemon=True)
    child.start()
    child.join(budget)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return float(queue.get())


def median_seconds(call, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def fleet_map() -> OwnershipMap:
    rules = [{"prefix": f"team{i}-", "app": f"app{i}", "team": f"team{i}"} for i in range(20)]
    rules += [{"regex": rx, "app": f"rx{i}", "team": "regex"} for i, rx in enumerate(
        [PATTERN, r"pay-[0-9]+-(eu|us)", r"ledger\.v[0-9]+", r"orders-(blue|green)-[a-z]+", r".*-canary"])]
    return OwnershipMap.from_text(json.dumps({"version": 1, "rules": rules}), source="bench map")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=20.0, help="seconds one re match may take")
    parser.add_argument("--groups", type=int, default=10_000)
    args = parser.parse_args()

    print(f"re (backtracking) on {PATTERN!r} against 'a' * n + '!':")
    last: tuple[int, float] | None = None
    for n in range(16, 64, 2):
        seconds = re_time(n, args.budget)
        if seconds is None:
            print(f"  n = {n}: more than {args.budget:g} s (stopped)")
            break
        ratio = f", x{seconds / last[1]:.1f} over n = {last[0]}" if last else ""
        print(f"  n = {n}: {seconds:.3f} s{ratio}")
        last = (n, seconds)
    if last is not None:
        per_a = 2.0  # each further 'a' doubles the ways to fail (the ratios above, per 2 a's, are about 4)
        years = last[1] * per_a ** (64 - last[0]) / (3600 * 24 * 365)
        print(f"  n = 64 (extrapolated from n = {last[0]}, x2 per 'a'): {years:.3g} years "
              f"(10^{math.log10(years):.0f})")

    print(f"RE2 (the provider's matcher, kafka/patterns.py) on {PATTERN!r}, median of 5:")
    pattern = compile_name_pattern(PATTERN, "bench")
    for n in (64, 1_000, 100_000):
        hostile = "a" * n + "!"
        seconds = median_seconds(lambda h=hostile: pattern.fullmatch(h))
        print(f"  n = {n:,}: {seconds * 1e6:.1f} us")

    ids = [f"team{i % 20}-group{i}" for i in range(args.groups - 100)]
    ids += [f"pay-{i}-eu" for i in range(50)] + [f"orders-blue-x{i}" for i in range(50)]
    hostile = "a" * 64 + "!"
    class Forgetful(dict):  # type: ignore[type-arg]  # keeps no answer: each lookup matches again, as before
        def __setitem__(self, key: object, value: object) -> None:
            pass

    def with_re() -> OwnershipMap:  # the reader before issue 45: Python's re, every answer matched again
        fresh = fleet_map()
        for rule in fresh.rules:
            if rule.regex is not None:
                object.__setattr__(rule, "_pattern", re.compile(rule.regex))
                object.__setattr__(rule, "_answers", Forgetful())
        return fresh

    def lookups(ownership: OwnershipMap, every: list[str]) -> None:
        ownership.conflicts(every), ownership.idle(every), ownership.dead_rules(every)
        for gid in every:
            ownership.owner_of(gid)

    def lookups_re() -> None:
        lookups(with_re(), ids)

    def lookups_provider() -> None:
        lookups(fleet_map(), [*ids, hostile])  # a fresh map: no answers kept from an earlier round

    build = median_seconds(fleet_map)
    provider = median_seconds(lookups_provider) - build
    backtracking = median_seconds(lookups_re) - build
    print(f"a plan's lookups (conflicts, idle, dead rules, owner of each), {len(ids):,} ordinary ids, 25 rules, "
          "median of 5:")
    print(f"  the provider's map (RE2, answers kept), with the hostile id too: {provider * 1000:.1f} ms")
    print(f"  re (the same code, no answer kept), without the hostile id (with it: never ends): {backtracking * 1000:.1f} ms; provider / re = "
          f"{provider / backtracking:.2f}")

if __name__ == "__main__":
    main()

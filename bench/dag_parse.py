"""How long each DAG file takes to parse once Airflow is imported, as the dag-processor parses it, and what it loads.

The dag-processor imports Airflow once and parses each DAG file in a forked child. This does the same: Airflow and
the Task SDK imported in the parent (with the provider's connection form, which Airflow reads at start-up), then
one forked child per file and round, timing ``runpy.run_path`` of the file and listing the heavy client libraries
the parse loaded (none should be: they load at a task's first action). Prints one line per file: the median parse
time over the rounds, the slowest, and the heavy modules; ``--json`` prints the figures as JSON (the unit test
reads the modules from it). A figure, not a verdict: the machine is shared, read medians.

Usage: python bench/dag_parse.py [--rounds N] [--json] [files ...]   (default: every dags/*.py)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

#: top-level packages a DAG file's parse must not load: the Kafka clients' admin halves, Spark, Kubernetes, SSH
HEAVY = ("kafka", "pyspark", "kubernetes", "paramiko", "kubernetes_asyncio")
REPO = Path(__file__).resolve().parent.parent


def _child(path: Path, out: int) -> None:
    import runpy

    before = set(sys.modules)
    started = time.perf_counter()
    runpy.run_path(str(path))
    seconds = time.perf_counter() - started
    loaded = sorted({m.split(".")[0] for m in set(sys.modules) - before} & set(HEAVY))
    os.write(out, json.dumps({"seconds": seconds, "heavy": loaded}).encode())


def parse_once(path: Path) -> dict[str, object]:
    """One parse of ``path`` in a forked child of this (Airflow-importing) process."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: parse, report, leave without running the parent's exit handlers
        os.close(read)
        code = 0
        try:
            _child(path, write)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(write, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            code = 1
        os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'{"error": "no answer"}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    files = args.files or sorted((REPO / "dags").glob("*.py"))
    started = time.perf_counter()
    import airflow  # noqa: F401 - what the dag-processor has imported before it parses a file
    import airflow.sdk  # noqa: F401

    from airflow_provider_kip848 import get_provider_info

    get_provider_info.get_provider_info()
    airflow_s = time.perf_counter() - started
    figures: dict[str, dict[str, object]] = {}
    for path in files:
        runs = [parse_once(path) for _ in range(max(1, args.rounds))]
        errors = [r["error"] for r in runs if "error" in r]
        seconds = [float(r["seconds"]) for r in runs if "seconds" in r]
        figures[path.name] = {
            "median_s": round(statistics.median(seconds), 3) if seconds else None,
            "max_s": round(max(seconds), 3) if seconds else None,
            "heavy": sorted({m for r in runs for m in r.get("heavy", [])}), "errors": errors}
    if args.json:
        print(json.dumps({"airflow_import_s": round(airflow_s, 3), "files": figures}))
        return 0
    print(f"DAG parse times once Airflow is imported ({airflow_s:.2f} s to import it here), {args.rounds} round(s):")
    for name, f in figures.items():
        heavy = ", ".join(f["heavy"]) or "none"  # type: ignore[arg-type]
        print(f"  {name:48} median {f['median_s']} s, max {f['max_s']} s; heavy modules loaded: {heavy}"
              + (f"; ERRORS: {f['errors']}" if f["errors"] else ""))
    return 1 if any(f["errors"] for f in figures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

"""A wave's validation: one Spark session per group vs one job for the wave, locally and on a 2-worker cluster.

The same validation (record continuity by key, per-partition counts and the
output timing) of a wave of ``--groups`` groups, each over its own topic (2
partitions, ``--records / --groups`` small records), run side by side in this
run on a local broker and a local Spark standalone cluster (one master, two
workers, from the installed pyspark):

* a plain confluent-kafka consumer reading the same records (the floor: it
  reads, it judges nothing);
* one local job (``local[2]``) for the whole wave, in a fresh process, as a
  task runs it: its SparkSession start (JVM launch, the connector resolved
  from the ivy cache) is timed apart from the job (everything from the spec to
  the report, the first job's JIT warm-up included), and the job's records/s
  and its ratio to the plain consumer's are computed on the job's time; then
  the same job again on the same session (a process that keeps its session,
  ``spark.session.job_session``). The session is the one ``job_session`` starts for a task
  (``short_lived``: C1 only, the class-data archive; whether the driver mapped the archive is printed);
* one local Spark session per group, one after another, each in a fresh
  Python process as one task per group runs today (a JVM start each);
* one job on the 2-worker cluster, submitted in cluster mode through the
  master's REST API (the driver on a worker), timed from the submission to
  the report read back.

``--local-only`` runs the first two only (no cluster, no session per group);
``--rounds N`` repeats them (the consumer, then a fresh job) N times and
reports medians. Every Spark run must pass every group (the data is clean), so
a fast wrong answer cannot count. Wall times include each run's Spark start-up:
that is what a wave pays.

Usage: KIP848_CACHE_DIR=.cache python bench/spark_cluster.py [--groups 20] [--records 1000000] [--local-only]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyspark
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.spark import wave
from airflow_provider_kip848.spark.standalone import PythonSubmission, RestSubmissionClient, StandaloneMaster
from airflow_provider_kip848.spark.submit import connector_conf, runner_jar, stage_wave
from kip848_harness.clients import create_topics
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.spark_cluster import LocalSparkCluster
from kip848_harness.waiting import wait_until

PARTITIONS = 2


def produce_wave(bootstrap: str, groups: int, per_group: int) -> None:
    """Topic ``wave-<n>`` per group: ids 0..per_group-1 as keys, a small JSON value."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 500000, "compression.type": "lz4"})
    for g in range(groups):
        topic = f"wave-{g}"
        for i in range(per_group):
            while True:
                try:
                    producer.produce(topic, key=str(i).encode(), value=b'{"id":%d}' % i, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0


def wave_spec(bootstrap: str, ranges: dict[str, dict[str, list[int]]]) -> dict[str, Any]:
    groups = []
    for topic, rng in sorted(ranges.items(), key=lambda kv: int(kv[0].split("-")[1])):
        n = sum(e - s for s, e in rng.values())
        groups.append({"group_id": f"bench-{topic}", "continuity": {"ranges": rng, "id_source": "key",
                                                                    "expected_min": 0, "expected_max": n - 1},
                       "counts": {"ranges": rng}, "output_timing": {"ranges": rng}})
    return {"format": wave.WAVE_FORMAT, "title": "bench wave", "bootstrap_servers": bootstrap,
            "reader": "connector", "groups": groups}


def plain_consumer(bootstrap: str, ranges: dict[str, dict[str, list[int]]]) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    ends = {(t, int(k.rsplit(":", 1)[1])): e for t, rng in ranges.items() for k, (_, e) in rng.items()}
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in ends])
    remaining = dict(ends)
    n = 0
    while remaining:
        for msg in consumer.consume(10000, 1.0):
            if msg.error():
                continue
            n += 1
            key = (msg.topic(), msg.partition())
            if key in remaining and msg.offset() >= remaining[key] - 1:
                del remaining[key]
    consumer.close()
    return n


def local_run(spec_path: Path) -> dict[str, Any]:
    """A fresh Python process (a fresh JVM, as one Airflow task) running the wave job locally: its outcome,
    ``session_s`` (the SparkSession's start) and ``job_s`` (the job on it, from the spec to the report)."""
    out = subprocess.run([sys.executable, __file__, "--run-local", str(spec_path)], capture_output=True, text=True,
                         timeout=1800, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    if out.returncode != 0:
        raise RuntimeError(f"local run failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_local_child(spec_path: str) -> None:
    """The child of :func:`local_run`: the session as ``wave.run`` starts one (``job_session``), timed apart;
    the job on it (the first job of a fresh JVM), then the same job again on the same session."""
    from airflow_provider_kip848.spark.session import class_data_status, local_session, stop_session

    t0 = time.perf_counter()
    spark = local_session("kip848-wave-validation", kafka_connector=True, short_lived=True)
    session_s = time.perf_counter() - t0
    cds = class_data_status(spark)
    spec = json.loads(Path(spec_path).read_text())
    t0 = time.perf_counter()
    report = wave.run(spec, spark)
    job_s = time.perf_counter() - t0
    # the same job again on the same session: what a process that keeps its session (job_session) pays
    t0 = time.perf_counter()
    again = wave.run(spec, spark)
    warm_s = time.perf_counter() - t0
    assert again["passed"] == report["passed"]
    stop_session(spark)  # the first session of a jar set dumps the class-data archive here (after the jobs)
    ids = [g["group_id"] for g in report["groups"]]
    print(json.dumps({**wave.outcome(ids, report), "session_s": session_s, "job_s": job_s, "warm_s": warm_s, "cds": cds,
                      "checks": sorted({v["check"] for g in report["groups"] for v in g["verdicts"]})}))


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(spec, fh)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--local-only", action="store_true",
                        help="only the plain consumer and the one local job (no cluster, no session per group)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the plain consumer and the local job (a fresh process each) this many times")
    parser.add_argument("--run-local", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_local:  # the child process of local_run
        run_local_child(args.run_local)
        return

    per_group = args.records // args.groups
    results: dict[str, float] = {}
    consumer_s: list[float] = []
    local: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kip848-bench-") as tmp, \
            LocalKafka(Path(tmp) / "kafka", die_with_parent=True, heap="768m") as kafka, \
            (contextlib.nullcontext() if args.local_only else LocalSparkCluster(Path(tmp) / "spark", workers=2)) \
            as cluster:
        bs = kafka.bootstrap_servers
        topics = [f"wave-{g}" for g in range(args.groups)]
        create_topics(bs, dict.fromkeys(topics, PARTITIONS))
        with KafkaAdmin(ClientSettings(bs)) as admin:
            wait_until(lambda: len(admin.topic_offsets(topics)) == len(topics) * PARTITIONS, 60, "topic leaders")
            t0 = time.perf_counter()
            produce_wave(bs, args.groups, per_group)
            print(f"produced {per_group * args.groups:,} records into {args.groups} topics in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
            offsets = admin.topic_offsets(topics)
        ranges: dict[str, dict[str, list[int]]] = {}
        for tp, (start, end) in offsets.items():
            ranges.setdefault(tp.topic, {})[str(tp)] = [start, end]
        total = sum(e - s for s, e in offsets.values())
        assert total == per_group * args.groups, total
        spec = wave_spec(bs, ranges)
        ids = [g["group_id"] for g in spec["groups"]]

        for n in range(args.rounds):
            t0 = time.perf_counter()
            assert plain_consumer(bs, ranges) == total
            consumer_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            whole = local_run(write_spec(Path(tmp) / "wave.json", spec))
            whole["wall_s"] = time.perf_counter() - t0
            assert whole["verdict"] == "pass" and list(whole["groups"]) == ids, whole["summary"]
            local.append(whole)
            print(f"round {n + 1}: plain consumer {consumer_s[-1]:.2f} s ({total / consumer_s[-1]:,.0f} records/s); "
                  f"local wave job {whole['job_s']:.2f} s ({total / whole['job_s']:,.0f} records/s) after a "
                  f"{whole['session_s']:.1f} s SparkSession start, {whole['wall_s']:.1f} s wall; again on the same "
                  f"session {whole['warm_s']:.2f} s ({total / whole['warm_s']:,.0f} records/s); "
                  f"CDS archive: {whole['cds']} (checks: {', '.join(whole['checks'])})", flush=True)
        results["plain confluent-kafka consumer"] = statistics.median(consumer_s)
        results["one local job (local[2]), wall"] = statistics.median(w["wall_s"] for w in local)

        if cluster is not None:
            t0 = time.perf_counter()
            for n, group in enumerate(spec["groups"]):
                one = local_run(write_spec(Path(tmp) / f"one-{n}.json", {**spec, "groups": [group]}))
                assert one["verdict"] == "pass", one
            results[f"{args.groups} local sessions, one per group"] = time.perf_counter() - t0
            print(f"{args.groups} sessions: {results[f'{args.groups} local sessions, one per group']:.1f} s",
                  flush=True)

            t0 = time.perf_counter()
            staged = stage_wave(spec, Path(tmp) / "cluster")
            master = StandaloneMaster(cluster.master_url, cluster.rest_url)
            request = PythonSubmission(
                str(staged.main_py), [str(staged.py_files)], ["--spec", str(staged.spec)], app_name="kip848-bench",
                spark_properties={**connector_conf(), "spark.executor.memory": "1g", "spark.driver.memory": "768m",
                                  "spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false"},
                environment={"PYSPARK_PYTHON": sys.executable}).request(
                master, spark_version=pyspark.__version__, runner_jar=runner_jar())
            client = RestSubmissionClient(master.rest_url)
            sid = client.create(request)
            status = wait_until(lambda: (s := client.status(sid)).terminal and s, 1800, f"driver {sid}", interval=0.5)
            assert status.state == "FINISHED", status
            report, reason = wave.read_report(staged.report)
            on_cluster = wave.outcome(ids, report, reason=reason)
            assert on_cluster["verdict"] == "pass" and on_cluster["master"] == cluster.master_url, \
                on_cluster["summary"]
            results["one job on the 2-worker cluster (cluster mode)"] = time.perf_counter() - t0
            staged.remove_spec()
            executors = sorted(n for n in (1, 2)
                               if (cluster.worker_dir(n) / str(on_cluster["application_id"])).is_dir())
            print(f"cluster job: {results['one job on the 2-worker cluster (cluster mode)']:.1f} s "
                  f"(application {on_cluster['application_id']}, executors on worker(s) {executors})", flush=True)

    print(f"\n{total:,} records, {args.groups} groups ({per_group:,} each, {PARTITIONS} partitions), "
          f"continuity + counts + output timing per group, Spark {pyspark.__version__}, {os.cpu_count()} CPU(s), "
          f"load average {os.getloadavg()[0]:.1f}")
    base = total / results["plain confluent-kafka consumer"]
    job_s = statistics.median(w["job_s"] for w in local)
    session_s = statistics.median(w["session_s"] for w in local)
    rounds = f" (median of {args.rounds} rounds)" if args.rounds > 1 else ""
    print(f"\nlocal wave job vs the plain consumer, same records, same run{rounds}:")
    print(f"  plain confluent-kafka consumer   {results['plain confluent-kafka consumer']:7.2f} s "
          f"{base:12,.0f} records/s")
    warm_s = statistics.median(w["warm_s"] for w in local)
    print(f"  local wave job (job only)        {job_s:7.2f} s {total / job_s:12,.0f} records/s   "
          f"ratio {total / job_s / base:.2f}x (target >= 0.25x; a fresh process: the JVM's first job)")
    print(f"  the same job again, same session {warm_s:7.2f} s {total / warm_s:12,.0f} records/s   "
          f"ratio {total / warm_s / base:.2f}x (the same short-lived session again: C1 only, warm)")
    print(f"  SparkSession start-up            {session_s:7.2f} s   (apart: not in the job's records/s)")
    print(f"  CDS archive (driver JVM): {', '.join(w['cds'] for w in local)} (per round; 'building': that round's "
          f"session dumped it when it stopped)")
    print(f"  fresh process wall (Python, SparkSession, the job, its rerun, stop) "
          f"{results['one local job (local[2]), wall']:.1f} s")
    if args.local_only:
        return
    per_group_wall = results[f"{args.groups} local sessions, one per group"]
    print(f"\n{'run':50s} {'wall s':>8s} {'records/s':>12s} {'vs consumer':>12s} {'vs sessions':>12s}")
    for name, seconds in results.items():
        rate = total / seconds
        print(f"{name:50s} {seconds:8.1f} {rate:12,.0f} {rate / base:11.2f}x {per_group_wall / seconds:11.1f}x")


if __name__ == "__main__":
    main()

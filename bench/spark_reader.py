"""Reader throughput: Spark's Kafka source vs the Python data source vs a plain confluent-kafka consumer.

All three read the same fixed ranges of the same 1,000,000 records (4
partitions, ~100-byte values) from a local broker, one after the other in
this run; the figures and ratios are printed last. Also printed: the cost of
starting a SparkSession with the connector (warm ivy cache).

Usage: KIP848_CACHE_DIR=.cache python bench/spark_reader.py [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics, produce
from kip848_harness.kafka_cluster import LocalKafka


def plain_consumer(bootstrap: str, ranges) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in ranges])
    remaining = {(tp.topic, tp.partition): end for tp, (_, end) in ranges.items()}
    n = size = 0
    while remaining:
        for msg in consumer.consume(10000, 1.0):
            if msg.error():
                continue
            n += 1
            size += len(msg.value())
            key = (msg.topic(), msg.partition())
            if key in remaining and msg.offset() >= remaining[key] - 1:
                del remaining[key]
    consumer.close()
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from airflow_provider_kip848.spark.reader import read_kafka
    from airflow_provider_kip848.spark.session import local_session

    with tempfile.TemporaryDirectory() as tmp, LocalKafka(tmp, die_with_parent=True, heap="1g") as kafka:
        bs = kafka.bootstrap_servers
        create_topics(bs, {"bench": 4})
        t0 = time.perf_counter()
        produce(bs, "bench", (f"{i:012d}-" + "x" * 87 for i in range(args.records)),
                keys=(str(i) for i in range(args.records)))
        print(f"produced {args.records} records in {time.perf_counter() - t0:.1f} s")
        with KafkaAdmin(ClientSettings(bs)) as admin:
            ranges = admin.topic_offsets(["bench"])
        total = sum(e - s for s, e in ranges.values())

        starts = []
        for _ in range(2):
            t0 = time.perf_counter()
            spark = local_session("bench")
            spark.range(1).count()
            starts.append(time.perf_counter() - t0)
            spark.stop()
        spark = local_session("bench")

        timings: dict[str, list[float]] = {"confluent-kafka consumer": [], "spark connector": [], "spark python source": []}
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            assert plain_consumer(bs, ranges) == total
            timings["confluent-kafka consumer"].append(time.perf_counter() - t0)
            for name, backend in (("spark connector", "connector"), ("spark python source", "python")):
                t0 = time.perf_counter()
                row = read_kafka(spark, ClientSettings(bs), ranges, backend=backend).selectExpr(
                    "count(*) AS n", "sum(length(value)) AS bytes").first()
                assert row.n == total
                timings[name].append(time.perf_counter() - t0)
        spark.stop()

    rates = {name: total / statistics.median(ts) for name, ts in timings.items()}
    print(f"SparkSession start with the Kafka connector: {starts[0]:.1f} s cold (JVM launch), "
          f"{starts[1]:.1f} s for a second session in the same process (JVM reused)")
    for name, rate in rates.items():
        print(f"{name:28s} median {statistics.median(timings[name]):6.2f} s  {rate:12,.0f} records/s")
    base = rates["confluent-kafka consumer"]
    print(f"ratio to the plain consumer: connector {rates['spark connector'] / base:.2f}x, "
          f"python source {rates['spark python source'] / base:.2f}x; "
          f"connector/python source {rates['spark connector'] / rates['spark python source']:.2f}x")


if __name__ == "__main__":
    main()

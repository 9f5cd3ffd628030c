"""Read fixed per-partition offset ranges of Kafka topics as a Spark DataFrame, with one of two backends.

Both return Spark's Kafka source schema with headers::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int, headers array<struct<key string, value binary>>

* ``connector``: Spark's own Kafka source (``spark-sql-kafka-0-10``), batch
  mode with ``assign`` and per-partition ``startingOffsets``/``endingOffsets``.
* ``python``: a Spark Python data source over confluent-kafka, one Spark task
  per partition range, for clusters without the connector. It assigns
  partitions explicitly: it never joins or commits to any consumer group.

Ranges are half-open ``[start, end)`` offsets from a snapshot, never
"latest", so a rerun reads exactly the same records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTP

from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.settings import ClientSettings

KAFKA_SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
BACKENDS = ("connector", "python")
PYTHON_SOURCE_NAME = "kip848_kafka"

Ranges = Mapping[TopicPartition, tuple[int, int]]


def read_kafka(spark, settings: ClientSettings, ranges: Ranges, *, backend: str = "connector",
               headers: bool = True):
    """Records of every ``[start, end)`` range, ordered by nothing (sort if you need order). ``headers=False``:
    the ``headers`` column is null (not read, for a caller that does not look at headers: cheaper)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    ranges = {tp: (int(a), int(b)) for tp, (a, b) in ranges.items() if int(b) > int(a)}
    if not ranges:
        return spark.createDataFrame([], KAFKA_SCHEMA_DDL)
    if backend == "connector":
        return _read_connector(spark, settings, ranges, headers)
    return _read_python(spark, settings, ranges, headers)


#: the connector's consumers fetch as the Python reader's do (up to 10 MB per partition and request)
CONNECTOR_FETCH = {"kafka.max.partition.fetch.bytes": str(10 * 1024 * 1024),
                   "kafka.fetch.max.bytes": str(50 * 1024 * 1024)}


def _read_connector(spark, settings: ClientSettings, ranges: Ranges, headers: bool = True):
    topics = sorted({tp.topic for tp in ranges})
    assign = {t: sorted(tp.partition for tp in ranges if tp.topic == t) for t in topics}
    start = {t: {str(tp.partition): ranges[tp][0] for tp in ranges if tp.topic == t} for t in topics}
    end = {t: {str(tp.partition): ranges[tp][1] for tp in ranges if tp.topic == t} for t in topics}
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(start))
        .option("endingOffsets", json.dumps(end))
        .option("includeHeaders", "true" if headers else "false")
        .option("failOnDataLoss", "true")
        .options(**CONNECTOR_FETCH)
    )
    for key, value in settings.java_client_properties().items():
        if key not in ("client.id",):
            reader = reader.option(f"kafka.{key}", value)
    columns = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    frame = reader.load()
    if headers:
        return frame.select(*columns, "headers")
    from pyspark.sql.functions import lit  # noqa: PLC0415 - pyspark is the [spark] extra, imported where it runs

    return frame.select(*columns, lit(None).cast("array<struct<key: string, value: binary>>").alias("headers"))


def _read_python(spark, settings: ClientSettings, ranges: Ranges, headers: bool = True):
    register_python_source(spark)
    spec = {"config": settings.confluent_config(), "headers": headers,
            "ranges": [[tp.topic, tp.partition, a, b] for tp, (a, b) in sorted(ranges.items())]}
    return spark.read.format(PYTHON_SOURCE_NAME).option("spec", json.dumps(spec)).schema(KAFKA_SCHEMA_DDL).load()


def register_python_source(spark) -> None:
    spark.dataSource.register(KafkaRangeDataSource)


# -- the Python data source ------------------------------------------------------------------

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402


class KafkaRange(InputPartition):
    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaRangeDataSource(DataSource):
    """``spark.read.format("kip848_kafka").option("spec", json)``: fixed offset ranges through confluent-kafka."""

    @classmethod
    def name(cls) -> str:
        return PYTHON_SOURCE_NAME

    def schema(self) -> str:
        return KAFKA_SCHEMA_DDL

    def reader(self, schema) -> KafkaRangeReader:
        return KafkaRangeReader(json.loads(self.options["spec"]))


class KafkaRangeReader(DataSourceReader):
    def __init__(self, spec: dict[str, Any]) -> None:  # Any: JSON of several shapes (XCom, reports)
        self.spec = spec

    def partitions(self):
        return [KafkaRange(t, p, a, b) for t, p, a, b in self.spec["ranges"]]

    def read(  # Any: pyspark's objects (an optional extra, untyped here)
            self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if not isinstance(partition, KafkaRange):
            raise TypeError(f"not a partition of this source: {partition!r}")
        yield from read_range(self.spec["config"], partition.topic, partition.partition, partition.start, partition.end,
                              headers=self.spec.get("headers", True))


def read_range(config: dict[str, Any], topic: str, partition: int, start: int, end: int, *,
               # Any: pyspark's objects (an optional extra, untyped here)
               timeout: float = 120.0, headers: bool = True) -> Iterator[tuple[Any, ...]]:
    """Rows of one ``[start, end)`` range; offsets missing inside it (compaction, transaction markers) are skipped."""
    consumer = Consumer({
        **config,
        "group.id": "kip848-range-reader",  # required by librdkafka; never joined (assign) nor committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "fetch.max.bytes": 52428800,
        "max.partition.fetch.bytes": 10485760,
    })
    deadline = time.monotonic() + timeout
    try:
        consumer.assign([CTP(topic, partition, start)])
        while True:
            batch = consumer.consume(num_messages=10000, timeout=1.0)
            if not batch:
                if (consumer.position([CTP(topic, partition)])[0].offset or 0) >= end:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}:{partition} did not reach offset {end} within {timeout} s")
                continue
            deadline = time.monotonic() + timeout
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if (msg.offset() or 0) >= end:
                            return
                        raise KafkaException(KafkaError(KafkaError._PARTITION_EOF,
                                             f"{topic}:{partition} ends at {msg.offset()}, before {end}"))
                    raise KafkaException(err)
                offset = msg.offset()
                if offset is None or offset >= end:
                    return
                ts_type, ts = msg.timestamp()
                # as Spark's own source: null, not [], when there are no headers
                raw_headers = msg.headers() if headers else None
                yield (msg.key(), msg.value(), topic, partition, offset,
                       datetime.fromtimestamp(ts / 1000, tz=UTC), ts_type - 1 if ts_type > 0 else -1,
                       list(raw_headers) if isinstance(raw_headers, list) and raw_headers else None)
                if offset >= end - 1:
                    return
    finally:
        consumer.close()

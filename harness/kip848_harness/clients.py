"""Small real-client workloads for the demo, tests and benchmarks (confluent-kafka).

These are the applications whose groups the provider administers: a producer
writing keyed records, and consumers joining a group with
``group.protocol=classic`` or ``group.protocol=consumer`` (KIP-848).
"""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    #: the record's timestamp (epoch s) and whether the broker set it (LogAppendTime) or the producer
    timestamp: float | None = None
    log_append_time: bool = False


def create_topics(bootstrap_servers: str, topics: dict[str, int], timeout: float = 30.0) -> None:
    """Create topics (name -> partitions) with the brokers' default replication factor (1 on one node, 3 on
    three); existing ones are left alone."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=parts, replication_factor=-1) for name, parts in topics.items()],
        request_timeout=timeout,
    )
    for fut in futures.values():
        try:
            fut.result(timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    _wait_topics_visible(admin, set(topics), timeout)


def set_topic_configs(bootstrap_servers: str, topic: str, configs: dict[str, str], timeout: float = 30.0) -> None:
    """Set dynamic configs of a topic (e.g. ``message.timestamp.type=LogAppendTime`` on an output topic, so its
    records carry the broker's append time)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    for fut in admin.incremental_alter_configs([resource], request_timeout=timeout).values():
        fut.result(timeout)


def _wait_topics_visible(admin: AdminClient, names: set[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=5)
        ready = {n for n in names if n in md.topics and not md.topics[n].error and md.topics[n].partitions}
        if ready == names:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topics {sorted(names)} not visible after {timeout} s")


def produce(
    bootstrap_servers: str,
    topic: str,
    values: Iterable[bytes | str],
    *,
    keys: Iterable[bytes | str | None] | None = None,
    partition: int | None = None,
) -> int:
    """Produce values (optionally keyed), wait for every delivery, return how many were written."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5, "enable.idempotence": True})
    errors: list[KafkaError] = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    n = 0
    key_iter = iter(keys) if keys is not None else None
    for value in values:
        key = next(key_iter) if key_iter is not None else None
        while True:
            try:  # partition -1: the partitioner picks one
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery,
                                 partition=-1 if partition is None else partition)
                break
            except BufferError:
                producer.poll(0.1)
        n += 1
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or errors:
        raise RuntimeError(f"{remaining} undelivered and {len(errors)} failed records, first error: {errors[:1]}")
    return n


def consume(
    bootstrap_servers: str,
    group_id: str,
    topics: list[str],
    count: int,
    *,
    group_protocol: str = "consumer",
    timeout: float = 60.0,
    extra: dict | None = None,
) -> list[Record]:
    """Join ``group_id`` with the given protocol, read ``count`` records, commit them, leave the group."""
    conf = {
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        "group.protocol": group_protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if group_protocol == "classic":
        conf["session.timeout.ms"] = 6000
    conf.update(extra or {})
    consumer = Consumer(conf)
    records: list[Record] = []
    try:
        consumer.subscribe(topics)
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(error)
            records.append(_record(msg))
        if records:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return records


def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    until: Callable[[list[Record]], bool],
    timeout: float = 60.0,
) -> list[Record]:
    """Read ``topic`` from the beginning of every partition, without joining or committing to any group.

    Stops when ``until(records_so_far)`` is true or after ``timeout``; the
    caller checks the result. Verification readers must not create groups of
    their own: they would show up in the very group listings being verified.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "kip848-unused-reader",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    records: list[Record] = []
    try:
        md = consumer.list_topics(topic, timeout=10)
        partitions = sorted(md.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not until(records):
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            records.append(_record(msg))
    finally:
        consumer.close()
    return records


def _record(msg: Message) -> Record:
    """A consumed record (a message without error always has its topic, partition and offset)."""
    kind, ms = msg.timestamp()
    return Record(msg.topic() or "", msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value(),
                  None if kind == TIMESTAMP_NOT_AVAILABLE else ms / 1000, kind == TIMESTAMP_LOG_APPEND_TIME)


def latest_by_key(records: list[Record]) -> dict[bytes, bytes | None]:
    """The last value per key (a changelog or count topic read as a table)."""
    return {r.key: r.value for r in records if r.key is not None}


def decode_long(value: bytes) -> int:
    """Kafka's LongSerializer format (8 bytes, big-endian), as WordCountDemo writes its counts."""
    return struct.unpack(">q", value)[0]


class ConsumerProcess:
    """A running :mod:`~kip848_harness.consumer_app` process (a real group member)."""

    def __init__(self, process: subprocess.Popen, record_file: str | None, log_file: str) -> None:
        self.process = process
        self.record_file = record_file
        self.log_file = log_file

    @classmethod
    def start(
        cls,
        bootstrap_servers: str,
        group_id: str,
        topics: list[str],
        *,
        protocol: str = "consumer",
        client_id: str = "kip848-consumer-app",
        instance_id: str | None = None,
        session_timeout_ms: int | None = None,
        assignor: str | None = None,
        record_file: str | None = None,
        log_file: str,
        properties: dict[str, str] | None = None,
        output_topic: str | None = None,
        extra_args: list[str] | None = None,
    ) -> ConsumerProcess:
        """Start one instance; ``extra_args`` go to the app as they are (e.g. its faults: ``--poll-pause-s``,
        ``--exit-after-s``)."""
        cmd = [sys.executable, "-m", "kip848_harness.consumer_app",
               "--bootstrap-servers", bootstrap_servers, "--group", group_id, "--topics", ",".join(topics),
               "--protocol", protocol, "--client-id", client_id]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        if session_timeout_ms:
            cmd += ["--session-timeout-ms", str(session_timeout_ms)]
        if assignor:
            cmd += ["--assignor", assignor]
        if record_file:
            cmd += ["--record-file", record_file]
        if output_topic:
            cmd += ["--output-topic", output_topic]
        for k, v in (properties or {}).items():
            cmd += ["--property", f"{k}={v}"]
        cmd += list(extra_args or ())
        log = open(log_file, "ab")
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        return cls(proc, record_file, log_file)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: the consumer closes and leaves its group."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait(10)

    def kill(self) -> int:
        """SIGKILL: a crash; the member stays in the group until its session times out."""
        if self.running:
            self.process.kill()
        return self.process.wait(10)

    def records(self) -> list[dict]:
        if not self.record_file:
            return []
        try:
            with open(self.record_file) as fh:
                return [json.loads(line) for line in fh if line.strip()]
        except FileNotFoundError:
            return []

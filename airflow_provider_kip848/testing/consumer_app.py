"""A small real consumer application, run as its own process, for demos, tests and benchmarks.

It is what a migration moves between protocols: a confluent-kafka consumer in
a group, with ``group.protocol`` classic or consumer (KIP-848), optional static
membership, committing synchronously after each processed batch, and writing
every record it processed to a JSON-lines file (so tests can prove continuity:
no gap, no unexpected duplicate). SIGTERM closes it cleanly (it leaves the
group); SIGKILL is a crash (its membership stays until the session times out).

    python -m airflow_provider_kip848.testing.consumer_app --bootstrap-servers B --group G \\
        --topics t1,t2 --protocol consumer [--client-id C] [--instance-id I] [--record-file F]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topics", required=True, help="comma-separated")
    p.add_argument("--protocol", choices=["classic", "consumer"], default="consumer")
    p.add_argument("--client-id", default="kip848-consumer-app")
    p.add_argument("--instance-id", default=None, help="group.instance.id (static membership)")
    p.add_argument("--session-timeout-ms", type=int, default=None, help="classic protocol only")
    p.add_argument("--assignor", default=None,
                   help="classic: partition.assignment.strategy; consumer: group.remote.assignor")
    p.add_argument("--record-file", default=None)
    p.add_argument("--output-topic", default=None,
                   help="produce every processed record (same key and value) here before committing")
    p.add_argument("--property", action="append", default=[], metavar="K=V", help="extra client property")
    return p


def consumer_config(args: argparse.Namespace) -> dict[str, object]:
    """The librdkafka config of the member the arguments describe."""
    conf: dict[str, object] = {
        "bootstrap.servers": args.bootstrap_servers,
        "group.id": args.group,
        "group.protocol": args.protocol,
        "client.id": args.client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if args.protocol == "classic":
        if args.session_timeout_ms:
            conf["session.timeout.ms"] = args.session_timeout_ms
        if args.assignor:
            conf["partition.assignment.strategy"] = args.assignor
    elif args.assignor:
        conf["group.remote.assignor"] = args.assignor
    conf.update(kv.split("=", 1) for kv in args.property)
    return conf


def _record_line(msg: Any, args: argparse.Namespace) -> str:
    return json.dumps({
        "topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
        "key": msg.key().decode(errors="replace") if msg.key() is not None else None,
        "value": msg.value().decode(errors="replace") if msg.value() is not None else None,
        "client_id": args.client_id, "protocol": args.protocol, "at": time.time(),
    }) + "\n"


def _records(batch: list[Any]) -> list[Any]:
    """The batch's records (end-of-partition events skipped; any other error raised)."""
    processed = []
    for msg in batch:
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                continue
            raise KafkaException(msg.error())
        processed.append(msg)
    return processed


def _commit(consumer: Consumer) -> bool:
    """Commit the consumed positions synchronously; False when the broker refused (e.g. a rebalance in
    progress). The caller retries on its next turn: without that, an application whose last batch's
    commit failed would hold its lag until the next record arrives, which may be never in a test."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError._NO_OFFSET:  # nothing consumed since the last commit
            return True
        print(f"commit failed: {exc}", flush=True)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stopping = False

    def on_term(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    consumer = Consumer(consumer_config(args))
    consumer.subscribe(args.topics.split(","))
    producer = None
    if args.output_topic:
        producer = Producer({"bootstrap.servers": args.bootstrap_servers, "enable.idempotence": True,
                             "linger.ms": 5})
    out = open(args.record_file, "a", buffering=1) if args.record_file else None
    print(f"started group={args.group} protocol={args.protocol} client.id={args.client_id}", flush=True)
    uncommitted = False  # a commit failed (e.g. in a rebalance): retry it even when no new record comes
    try:
        while not stopping:
            processed = _records(consumer.consume(num_messages=500, timeout=0.5))
            if not processed:
                if uncommitted:
                    uncommitted = not _commit(consumer)
                continue
            if producer is not None:  # at-least-once: the output is durable before the input is committed
                for msg in processed:
                    producer.produce(args.output_topic, key=msg.key(), value=msg.value())
                    producer.poll(0)
                if producer.flush(30):
                    raise RuntimeError("output not delivered within 30 s")
            if out:
                out.writelines(_record_line(msg, args) for msg in processed)
            uncommitted = not _commit(consumer)
    finally:
        consumer.close()
        if out:
            out.close()
        print("closed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

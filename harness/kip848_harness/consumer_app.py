"""A small real consumer application, run as its own process, for demos, tests and benchmarks.

It is what a migration moves between protocols: a confluent-kafka consumer in
a group, with ``group.protocol`` classic or consumer (KIP-848), optional static
membership, committing synchronously after each processed batch, and writing
every record it processed to a JSON-lines file (so tests can prove continuity:
no gap, no unexpected duplicate). SIGTERM closes it cleanly (it leaves the
group); SIGKILL is a crash (its membership stays until the session times out).

    python -m kip848_harness.consumer_app --bootstrap-servers B --group G \\
        --topics t1,t2 --protocol consumer [--client-id C] [--instance-id I] [--record-file F]

At start it prints its client library's release, as a real application's start banner does
(``client library: confluent-kafka 2.16.1, librdkafka 2.16.0``): librdkafka itself prints nothing at start
unless ``debug`` is set, and the preflight's ``client_release`` check reads that line from the instance's log.

It can also read its client configuration from Java properties files, as an
application deployed by an operator does (``--config-file``, repeatable, merged
in order after the built-in defaults and ``--property``): then a file's
``group.protocol`` decides the protocol, and ``bootstrap.servers`` and
``group.id`` may come from a file instead of the command line::

    python -m kip848_harness.consumer_app --config-file app.properties \\
        --config-file consumer.properties --topics t1 --client-id app-0

Two faults for tests: ``--poll-pause-s`` (a slow consumer: it sleeps after each
consume call) and ``--exit-after-s`` (a crash: after that long the process dies
with exit status 3 without closing its consumer, so its member stays in the
group until its session times out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, libversion, version


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap-servers", default=None,
                   help="required unless a --config-file or --property gives bootstrap.servers")
    p.add_argument("--group", default=None, help="required unless a --config-file or --property gives group.id")
    p.add_argument("--topics", required=True, help="comma-separated")
    p.add_argument("--protocol", choices=PROTOCOLS, default="consumer",
                   help="group.protocol when neither --property nor a --config-file sets it")
    p.add_argument("--client-id", default="kip848-consumer-app")
    p.add_argument("--instance-id", default=None, help="group.instance.id (static membership)")
    p.add_argument("--session-timeout-ms", type=int, default=None, help="classic protocol only")
    p.add_argument("--assignor", default=None,
                   help="classic: partition.assignment.strategy; consumer: group.remote.assignor")
    p.add_argument("--record-file", default=None)
    p.add_argument("--output-topic", default=None,
                   help="produce every processed record (same key and value) here before committing")
    p.add_argument("--property", action="append", default=[], metavar="K=V", help="extra client property")
    p.add_argument("--config-file", action="append", default=[], metavar="PATH",
                   help="Java properties file of client properties (repeatable; merged in order, after the "
                        "defaults and --property: a file's group.protocol decides the protocol)")
    p.add_argument("--poll-pause-s", type=float, default=0.0, metavar="SECONDS",
                   help="sleep this long after each consume call (a slow consumer)")
    p.add_argument("--exit-after-s", type=float, default=None, metavar="SECONDS",
                   help="die with exit status 3 after this long, without closing the consumer (a crash that "
                        "leaves its member in the group)")
    return p


#: the group protocols this consumer speaks
PROTOCOLS = ("classic", "consumer")
#: the exit status of the crash --exit-after-s simulates
CRASH_EXIT_STATUS = 3
_PROPERTY_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    """A properties file's escapes (``\\t``, ``\\uXXXX``, ``\\=`` ...) resolved."""
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_PROPERTY_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    """The file's logical lines: comments and blank lines dropped, continuation lines (an odd number of
    trailing backslashes) joined, leading whitespace of each continuation dropped."""
    lines, pending = [], ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line.startswith(("#", "!"))):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments, continuation
    lines, escapes) as a dict; a later duplicate key wins, as in ``java.util.Properties``."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    props = {}
    for line in _logical_lines(text):
        i = 0
        while i < len(line):  # the key ends at an unescaped '=', ':' or whitespace
            if line[i] == "\\":
                i += 2
                continue
            if line[i] in "=: \t\f":
                break
            i += 1
        key, rest = line[:i], line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def _file_properties(paths: list[str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for path in paths:
        merged.update(read_properties(path))
    return merged


def _command_line_properties(args: argparse.Namespace) -> dict[str, str]:
    props = {}
    for kv in args.property:
        key, sep, value = kv.partition("=")
        if not sep:
            raise ValueError(f"--property {kv!r}: expected K=V")
        props[key] = value
    return props


def consumer_config(args: argparse.Namespace) -> dict[str, object]:
    """The librdkafka config of the member the arguments describe: the built-in defaults, then ``--property``,
    then each ``--config-file`` in turn. The protocol is the final config's ``group.protocol`` (``--protocol``
    when nothing sets it); the protocol-specific defaults (``--session-timeout-ms``, ``--assignor``) follow it."""
    given = _command_line_properties(args)
    files = _file_properties(args.config_file)
    protocol = str(files.get("group.protocol", given.get("group.protocol", args.protocol))).strip().lower()
    if protocol not in PROTOCOLS:
        raise ValueError(f"group.protocol {protocol!r} is not one this consumer speaks ({', '.join(PROTOCOLS)})")
    conf: dict[str, object] = {"group.protocol": protocol, "client.id": args.client_id,
                               "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if args.bootstrap_servers:
        conf["bootstrap.servers"] = args.bootstrap_servers
    if args.group:
        conf["group.id"] = args.group
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if protocol == "classic":
        if args.session_timeout_ms:
            conf["session.timeout.ms"] = args.session_timeout_ms
        if args.assignor:
            conf["partition.assignment.strategy"] = args.assignor
    elif args.assignor:
        conf["group.remote.assignor"] = args.assignor
    conf.update(given)
    conf.update(files)
    conf["group.protocol"] = protocol  # as validated (a file's "Consumer" is librdkafka's "consumer")
    missing = [key for key in ("bootstrap.servers", "group.id") if not conf.get(key)]
    if missing:
        raise ValueError(f"{', '.join(missing)} not given (--bootstrap-servers / --group, --property or a "
                         "--config-file)")
    return conf


def _record_line(msg: Any, args: argparse.Namespace) -> str:
    return json.dumps({
        "topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
        "key": msg.key().decode(errors="replace") if msg.key() is not None else None,
        "value": msg.value().decode(errors="replace") if msg.value() is not None else None,
        "client_id": args.client_id, "protocol": args.protocol, "at": time.time(),
    }) + "\n"


#: errors librdkafka hands the application (without an error_cb) while a broker is down or a coordinator moves,
#: and recovers from by itself: a real application logs them and polls on, as confluent-kafka's examples do.
#: Raising on them can make an instance exit when a node of a 3-node cluster is killed or paused: suspected (not
#: shown) in CI runs of test_instance_roll_faults where, after a roll that had ended right, the group did not show
#: both instances within 120 s (the test now prints the group and the processes when that recurs). A refusal by
#: the group coordinator (an unsupported protocol, an unknown group type) is not among them: the instance exits.
TRANSIENT_ERRORS = frozenset({
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE, KafkaError._TIMED_OUT,
    KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
})


def _records(batch: list[Any]) -> list[Any]:
    """The batch's records (end-of-partition events skipped, transient errors printed and skipped; any other
    error raised). A slow consumer's
    ``_MAX_POLL_EXCEEDED`` is printed and skipped, as a real application does: librdkafka has left the group
    and joins again on this poll, so the instance runs on (raising here made a slow instance exit just after it
    rejoined, which a test of a member coming back then raced against)."""
    processed = []
    for msg in batch:
        error = msg.error()
        if error:
            if error.code() == KafkaError._PARTITION_EOF:
                continue
            if error.code() == KafkaError._MAX_POLL_EXCEEDED:
                print(f"rejoining: {error.str()}", flush=True)
                continue
            if error.code() in TRANSIENT_ERRORS and not error.fatal():
                print(f"transient: {error.str()}", flush=True)
                continue
            raise KafkaException(error)
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


def _sleep_unless(stopping: Any, seconds: float) -> None:
    """Sleep ``seconds`` in short slices, returning early once ``stopping()`` (a SIGTERM must not wait)."""
    end = time.monotonic() + seconds
    while not stopping() and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))


def _crash_after(seconds: float) -> threading.Timer:
    def crash() -> None:
        print(f"exiting after {seconds:g} s without closing (a crash)", flush=True)
        os._exit(CRASH_EXIT_STATUS)

    timer = threading.Timer(seconds, crash)
    timer.daemon = True
    timer.start()
    return timer


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = consumer_config(args)
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    # what is recorded and printed follows the final config (a file may set them)
    args.protocol, args.group = config["group.protocol"], config["group.id"]
    args.client_id = str(config.get("client.id", args.client_id))
    stopping = False

    def on_term(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    # the start banner a real application prints: its client library's release (librdkafka prints none unless
    # debug is set), which the preflight's client_release check reads from the instance's log
    binding = version()  # a (text, number) pair in older releases, the text alone in 2.16
    print(f"client library: confluent-kafka {binding[0] if isinstance(binding, tuple) else binding}, "
          f"librdkafka {libversion()[0]}", flush=True)
    consumer = Consumer(config)
    consumer.subscribe(args.topics.split(","))
    producer = None
    if args.output_topic:
        producer = Producer({"bootstrap.servers": config["bootstrap.servers"], "enable.idempotence": True,
                             "linger.ms": 5})
    out = open(args.record_file, "a", buffering=1) if args.record_file else None
    print(f"started group={args.group} protocol={args.protocol} client.id={args.client_id}", flush=True)
    if args.exit_after_s is not None:
        _crash_after(args.exit_after_s)
    uncommitted = False  # a commit failed (e.g. in a rebalance): retry it even when no new record comes
    try:
        while not stopping:
            processed = _records(consumer.consume(num_messages=500, timeout=0.5))
            if args.poll_pause_s > 0:
                _sleep_unless(lambda: stopping, args.poll_pause_s)
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

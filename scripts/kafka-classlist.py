#!/usr/bin/env python3
"""Regenerate airflow_provider_kip848/kafka/cli/resources/kafka-classes.txt: the classes a Kafka JVM loads.

The list is what the class-data archive (``KafkaDistribution.class_data_archive``) holds: every JVM the package
starts on a release's classpath (CLI tools, the embedded broker, Streams apps) maps those classes from one archive
instead of parsing and verifying them from the jars again (about half of a short CLI tool's CPU).

It is recorded, not guessed: this script starts a broker, runs each CLI tool the package uses and Kafka's
WordCountDemo Streams app with ``-XX:DumpLoadedClassList`` (through ``JAVA_TOOL_OPTIONS``) and merges what each JVM
loaded, in load order, first seen first. Run it after moving ``DEFAULT_KAFKA_VERSION``:

    .venv/bin/python scripts/kafka-classlist.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kip848_harness.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC  # noqa: E402
from kip848_harness.kafka_cluster import LocalKafka  # noqa: E402

TARGET = REPO / "airflow_provider_kip848" / "kafka" / "cli" / "resources" / "kafka-classes.txt"

#: One call per tool the package runs (read-only ones: enough to load the admin client and each command's classes).
TOOL_CALLS: tuple[tuple[str, ...], ...] = (
    ("kafka-features", "describe"),
    ("kafka-configs", "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"),
    ("kafka-configs", "--describe", "--entity-type", "groups", "--entity-name", "classlist-group"),
    ("kafka-topics", "--list"),
    ("kafka-topics", "--create", "--topic", "classlist-topic", "--partitions", "2"),
    ("kafka-groups", "--list"),
    ("kafka-consumer-groups", "--list"),
    ("kafka-consumer-groups", "--describe", "--all-groups", "--members", "--verbose"),
    ("kafka-streams-groups", "--list"),
    ("kafka-streams-groups", "--describe", "--all-groups"),
    ("kafka-get-offsets", "--topic", "classlist-topic"),
    ("kafka-broker-api-versions",),
    ("kafka-metadata-quorum", "describe", "--status"),
)


def read_list(path: Path) -> list[str]:
    """The classes of one JVM's list; lambda lines (``@lambda-proxy``, long and tied to one release's bytecode) are
    left out: an archive of the classes alone keeps nearly all the gain."""
    return [line for line in path.read_text().splitlines() if line and not line.startswith(("#", "@"))]


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="kafka-classlist-"))
    lists = work / "lists"
    lists.mkdir()
    counter = iter(range(1000))

    def record(name: str) -> None:
        os.environ["JAVA_TOOL_OPTIONS"] = f"-XX:DumpLoadedClassList={lists / f'{next(counter):03d}-{name}.lst'}"

    record("broker")  # the storage format runs first under this name too: its classes are wanted as well
    kafka = LocalKafka(work / "kafka", die_with_parent=True)
    kafka.start()
    try:
        for call in TOOL_CALLS:
            record(call[0])
            kafka.run_tool(call[0], list(call[1:]))
        for topic in (WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC):
            kafka.run_tool("kafka-topics", ["--create", "--topic", topic, "--partitions", "2"])
        record("streams-app")
        app = kafka.start_wordcount("classlist-wordcount")
        try:
            if not app.wait_for_log("State transition from REBALANCING to RUNNING", timeout=120):
                raise SystemExit(f"the Streams app did not reach RUNNING: {app.log_text()[-2000:]}")
        finally:
            app.stop()
    finally:
        os.environ.pop("JAVA_TOOL_OPTIONS", None)
        kafka.stop()
    seen: dict[str, None] = {}
    for path in sorted(lists.glob("*.lst")):
        for line in read_list(path):
            seen.setdefault(line, None)
    header = ("# Classes Kafka JVMs load (broker, CLI tools, a Streams app), recorded from Kafka "
              f"{kafka.distribution.version} by scripts/kafka-classlist.py: do not edit by hand.\n")
    partial = TARGET.with_suffix(".txt.partial")
    partial.write_text(header + "".join(f"{line}\n" for line in seen))
    partial.replace(TARGET)
    print(f"{len(seen)} entries from {len(list(lists.glob('*.lst')))} JVMs -> {TARGET.relative_to(REPO)}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Real Kafka Streams applications for demos and tests, without writing Java.

``WordCountDemo`` from ``org.apache.kafka:kafka-streams-examples`` is a real
Streams topology (a repartition topic and a changelogged state store), so it
exercises everything a streams-group migration touches: committed offsets,
internal topics, and the switch between ``group.protocol=classic`` and
``group.protocol=streams``. It takes one properties file as its only argument.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution
from kip848_harness.processes import die_with_parent as _die_with_parent

WORDCOUNT_MAIN_CLASS = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"

WORDCOUNT_INPUT_TOPIC = "streams-plaintext-input"
WORDCOUNT_OUTPUT_TOPIC = "streams-wordcount-output"
#: the static method of WordCountDemo that adds its topology to a StreamsBuilder (package-private)
WORDCOUNT_TOPOLOGY_METHOD = "createWordCountStream"

#: A single-file Java program (run by the JDK's source launcher, nothing to build): it calls an application's
#: static ``method(StreamsBuilder)``, the one its ``main`` builds its topology with, and prints the
#: ``Topology#describe()`` of the result, exactly what the running application executes. The demo's WordCountDemo
#: neither prints nor logs its description, so this is how the demo's controller reports it.
DESCRIBE_TOPOLOGY_JAVA = """\
import java.lang.reflect.Method;
import org.apache.kafka.streams.StreamsBuilder;

public class DescribeTopology {
    public static void main(String[] args) throws Exception {
        Method build = Class.forName(args[0]).getDeclaredMethod(args[1], StreamsBuilder.class);
        build.setAccessible(true);
        StreamsBuilder builder = new StreamsBuilder();
        build.invoke(null, builder);
        System.out.print(builder.build().describe());
    }
}
"""


def wordcount_properties(
    bootstrap_servers: str,
    application_id: str,
    *,
    group_protocol: str,
    state_dir: Path,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """Client properties for WordCountDemo; ``extra`` wins over the defaults here."""
    props = {
        "application.id": application_id,
        "bootstrap.servers": bootstrap_servers,
        "group.protocol": group_protocol,
        "state.dir": str(state_dir),
        # Commit often so that offsets (the only thing that survives a protocol
        # switch) are close to what was processed when the app is stopped.
        "commit.interval.ms": "200",
        "statestore.cache.max.bytes": "0",
        "replication.factor": "-1",  # the brokers' default: 1 on one node, 3 on three
    }
    props.update(extra or {})
    return props


def describe_topology(distribution: KafkaDistribution, workdir: Path, main_class: str = WORDCOUNT_MAIN_CLASS,
                      method: str = WORDCOUNT_TOPOLOGY_METHOD) -> str:
    """The ``TopologyDescription`` text of ``main_class``'s topology, as this release of Kafka Streams builds it.

    Kept in ``workdir`` once read (a JVM with the source launcher takes seconds; the topology of a release's demo
    never changes). Fails, with the JVM's output, when the program does not print a description.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    cached = workdir / f"topology-{distribution.version}-{main_class}.{method}.txt"
    if cached.is_file():
        return cached.read_text()
    source = workdir / "DescribeTopology.java"
    if not source.is_file() or source.read_text() != DESCRIBE_TOPOLOGY_JAVA:
        source.write_text(DESCRIBE_TOPOLOGY_JAVA)
    cmd = distribution.java_command(str(source), [main_class, method], jvm_options=["-XX:TieredStopAtLevel=1"])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=workdir)
    if proc.returncode != 0 or not proc.stdout.startswith("Topologies:"):
        raise RuntimeError(f"describing the topology of {main_class} failed (exit {proc.returncode}): "
                           f"{(proc.stdout + proc.stderr)[-2000:]}")
    partial = cached.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(proc.stdout)
    partial.replace(cached)  # another process reading the cache never sees half a description
    return proc.stdout


@dataclass
class StreamsApp:
    """A running Java Streams application process started by the launcher."""

    name: str
    process: subprocess.Popen
    properties_path: Path
    log_path: Path

    @classmethod
    def start(
        cls,
        distribution: KafkaDistribution,
        properties: dict[str, str],
        *,
        workdir: Path,
        name: str,
        main_class: str = WORDCOUNT_MAIN_CLASS,
        die_with_parent: bool = False,
    ) -> StreamsApp:
        workdir.mkdir(parents=True, exist_ok=True)
        props_path = workdir / f"{name}.properties"
        props_path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        log_path = workdir / f"{name}.log"
        cmd = distribution.java_command(
            main_class,
            [str(props_path)],
            log_config="app",
            jvm_options=["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dkip848.app={workdir / name}"],
        )
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=workdir,
                preexec_fn=_die_with_parent if die_with_parent else None,
            )
        (workdir / f"{name}.pid").write_text(str(proc.pid))  # lets another process find and stop it
        return cls(name, proc, props_path, log_path)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float = 60.0) -> bool:
        """Wait until ``pattern`` (a plain substring) appears in the app's log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pattern in self.log_text():
                return True
            if not self.running:
                return pattern in self.log_text()
            time.sleep(0.2)
        return False

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the demo's shutdown hook closes KafkaStreams cleanly), SIGKILL after ``timeout``."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait(10)

    def kill(self) -> int:
        """SIGKILL: the app dies without leaving its group (a crash)."""
        if self.running:
            os.kill(self.process.pid, signal.SIGKILL)
        return self.process.wait(10)

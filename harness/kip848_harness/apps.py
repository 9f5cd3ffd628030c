"""Real Kafka Streams applications for demos and tests, without a Java build.

The word count (``java/WordCount.java``, Kafka's own ``WordCountDemo`` line for line) is a real Streams topology
(a repartition topic and a changelogged state store), so it exercises everything a streams-group migration
touches: committed offsets, internal topics, and the switch between ``group.protocol=classic`` and
``group.protocol=streams``. It takes one properties file as its only argument. The harness compiles it against the
``kafka-streams`` jar of the release under test (:func:`wordcount_jar`): Kafka does not publish
``kafka-streams-examples`` for every release (none for 4.1.x, 4.2.1, 4.2.2 or 4.4.0).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution, file_lock, tail_lines
from airflow_provider_kip848.kafka.cli.java import find_java
from kip848_harness.processes import die_with_parent as _die_with_parent

WORDCOUNT_MAIN_CLASS = "kip848.harness.WordCount"
WORDCOUNT_SOURCE = "java/WordCount.java"

WORDCOUNT_INPUT_TOPIC = "streams-plaintext-input"
WORDCOUNT_OUTPUT_TOPIC = "streams-wordcount-output"
#: the word count's argument that prints ``Topology#describe()`` of the topology it runs, and exits
DESCRIBE_TOPOLOGY_ARG = "--describe-topology"
#: JVM options of an application: a small heap, serial GC and C1 only (a test machine runs several at once)
APP_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def compiled_jar(source_name: str, *, classpath: str, built_for: str, folder: Path, stem: str, what: str) -> Path:
    """The harness's Java source ``source_name`` compiled against ``classpath`` into ``folder/<stem>-<key>.jar``, built
    once per source, ``built_for`` (the release it is compiled against) and JDK.

    Built under a lock with ``javac`` (the JDK's, beside ``java``) into a temporary folder and renamed into place:
    several test workers may ask at once, and none ever runs half a jar. A build that fails raises with javac's
    output, naming ``what`` was built (a release whose API lacks what the source calls: say so, do not run another
    program). The word count and the plain Java consumer are built by it.
    """
    source = resources.files("kip848_harness").joinpath(source_name).read_text()
    java = find_java()
    key = hashlib.sha256("\0".join([source, built_for, java.version]).encode()).hexdigest()[:16]
    target = folder / f"{stem}-{key}.jar"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / ".lock"):
        if target.is_file():
            return target
        javac = Path(java.executable).resolve().with_name("javac")
        with tempfile.TemporaryDirectory(dir=folder, prefix="build-") as build:
            src = Path(build) / Path(source_name).name
            src.write_text(source)
            classes = Path(build) / "classes"
            cmd = [str(javac), "-proc:none", "-nowarn", "-d", str(classes), "-cp", classpath, str(src)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise RuntimeError(f"building {what} failed (javac exit {proc.returncode}): "
                                   f"{tail_lines(proc.stdout + proc.stderr, 12)}")
            partial = Path(build) / f"{stem}.jar"
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
                jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
                for cls in sorted(classes.rglob("*.class")):
                    jar.write(cls, cls.relative_to(classes).as_posix())
            shutil.move(str(partial), target)  # same file system: a rename
    return target


def wordcount_jar(distribution: KafkaDistribution) -> Path:
    """The word count compiled against this release's jars (:func:`compiled_jar`), once per release."""
    distribution.ensure()
    return compiled_jar(WORDCOUNT_SOURCE, classpath=distribution.classpath, built_for=distribution.version,
                        folder=distribution.home / "harness", stem="wordcount",
                        what=f"the word count against Kafka {distribution.version}")


def wordcount_command(distribution: KafkaDistribution, args: Sequence[str], *,
                      jvm_options: Sequence[str] = APP_JVM_OPTIONS, log_config: str = "app") -> list[str]:
    """The java command line of the word count on this release (never a shell string)."""
    return distribution.java_command(WORDCOUNT_MAIN_CLASS, list(args), log_config=log_config,
                                     jvm_options=list(jvm_options), extra_classpath=[wordcount_jar(distribution)])


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


def describe_topology(distribution: KafkaDistribution, workdir: Path) -> str:
    """The ``TopologyDescription`` text of the word count's topology, as this release of Kafka Streams builds it.

    Kept in ``workdir`` once read (a JVM takes seconds; the topology of a release's word count never changes).
    Fails, with the JVM's output, when the program does not print a description.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    cached = workdir / f"topology-{distribution.version}-{WORDCOUNT_MAIN_CLASS}.txt"
    if cached.is_file():
        return cached.read_text()
    cmd = wordcount_command(distribution, [DESCRIBE_TOPOLOGY_ARG], log_config="tools")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=workdir)
    if proc.returncode != 0 or not proc.stdout.startswith("Topologies:"):
        raise RuntimeError(f"describing the topology of {WORDCOUNT_MAIN_CLASS} failed (exit {proc.returncode}): "
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
        die_with_parent: bool = False,
    ) -> StreamsApp:
        workdir.mkdir(parents=True, exist_ok=True)
        props_path = workdir / f"{name}.properties"
        props_path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        log_path = workdir / f"{name}.log"
        cmd = wordcount_command(distribution, [str(props_path)],
                                jvm_options=[*APP_JVM_OPTIONS, f"-Dkip848.app={workdir / name}"])
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
        """SIGTERM (the word count's shutdown hook closes KafkaStreams cleanly), SIGKILL after ``timeout``."""
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

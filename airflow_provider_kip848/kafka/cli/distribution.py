"""A Kafka release assembled from Maven Central: the jars, a classpath and the tools' main classes.

Apache Kafka publishes the broker (``kafka_2.13``), the CLI tools
(``kafka-tools``) and Kafka Streams (``kafka-streams``) to Maven Central.
Resolving those with Maven gives everything the binary tarball has but the
Streams examples (not published for every release: none for 4.1.x, 4.2.1,
4.2.2 or 4.4.0; the test harness builds its own word count), and the SLF4J
binding the POMs leave out, which is added here.
The jars land in ``<cache>/kafka-<version>/libs`` and are reused while the
generated POM is unchanged, so only the first start of a version downloads.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

from airflow_provider_kip848.kafka.cache import default_cache_dir
from airflow_provider_kip848.kafka.cli.java import JavaRuntime, find_java, find_maven
from airflow_provider_kip848.kafka.errors import ArtifactResolutionError, ToolchainError, UnsupportedKafkaVersion

DEFAULT_KAFKA_VERSION = "4.4.0"
LOG4J_VERSION = "2.25.3"

#: Kafka CLI scripts of the binary distribution -> their main classes (4.x).
KAFKA_TOOLS: dict[str, str] = {
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
}

#: Tools whose main class moved between 4.x releases -> the class of the older releases, used when the release's
#: ``kafka-tools`` jar lacks the one above (ConfigCommand moved from the Scala core to ``kafka-tools`` in 4.4.0).
FORMER_TOOL_CLASSES: dict[str, str] = {
    "kafka-configs": "kafka.admin.ConfigCommand",
}

#: Tools that talk to a running cluster (and so take ``--bootstrap-server``).
CLUSTER_TOOLS = frozenset(KAFKA_TOOLS) - {"kafka-storage"}

#: Short-lived admin tools: small heap, serial GC and C1 only. A tool call that
#: lives a second is ~1.2x faster than with JVM defaults (bench/local_broker_start.py).
TOOL_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

#: The classes Kafka JVMs load (broker, CLI tools, a Streams app), recorded by scripts/kafka-classlist.py: what the
#: release's class-data archive holds (see :meth:`KafkaDistribution.class_data_archive`).
CLASS_LIST_RESOURCE = "resources/kafka-classes.txt"

_VERSION_RE = re.compile(r"^4\.(\d+)\.(\d+)$")


def validate_version(version: str) -> str:
    if not _VERSION_RE.match(version):
        raise UnsupportedKafkaVersion(
            f"Kafka version {version!r} is not supported by the embedded broker "
            "or the CLI backend (they run KRaft-only Kafka 4.x releases)."
        )
    return version


@dataclass(frozen=True)
class ResolveReport:
    version: str
    libs_dir: Path
    jars: int
    fetched: bool
    seconds: float


class KafkaDistribution:
    """One Kafka release's jars in the cache, and the commands that run them."""

    def __init__(self, version: str = DEFAULT_KAFKA_VERSION, cache_dir: Path | str | None = None, *,
                 class_data_sharing: bool = True) -> None:
        self.version = validate_version(version)
        self.cache_dir = Path(cache_dir).resolve() if cache_dir else default_cache_dir()
        self.home = self.cache_dir / f"kafka-{self.version}"
        self.libs_dir = self.home / "libs"
        self.config_dir = self.home / "config"
        self._marker = self.home / "resolved.json"
        #: build and use the release's class-data archive (:meth:`class_data_archive`)
        self.class_data_sharing = class_data_sharing

    def __repr__(self) -> str:
        return f"KafkaDistribution(version={self.version!r}, home={str(self.home)!r})"

    # -- resolution --------------------------------------------------------

    def pom(self) -> str:
        template = resources.files(__package__).joinpath("resources/pom.xml.template").read_text()
        return Template(template).substitute(
            kafka_version=self.version,
            log4j_version=LOG4J_VERSION,
        )

    def _pom_digest(self) -> str:
        return hashlib.sha256(self.pom().encode()).hexdigest()

    def is_resolved(self) -> bool:
        """True when the jars of this exact POM are all in the cache."""
        try:
            marker = json.loads(self._marker.read_text())
        except (OSError, ValueError):
            return False
        if marker.get("pom_sha256") != self._pom_digest():
            return False
        jars = marker.get("jars") or []
        return bool(jars) and all((self.libs_dir / j).is_file() for j in jars)

    def ensure(self) -> ResolveReport:
        """Make sure the jars and config files are in the cache; fetch with Maven if not.

        Safe to call from several processes at once: a file lock serialises the
        Maven run and the second caller reuses what the first fetched.
        """
        t0 = time.monotonic()
        self.home.mkdir(parents=True, exist_ok=True)
        fetched = False
        with file_lock(self.home / ".lock"):
            if not self.is_resolved():
                self._resolve_with_maven()
                fetched = True
            self._write_config_files()
            if self.class_data_sharing:
                with contextlib.suppress(ToolchainError):  # no usable Java: the commands will say so themselves
                    self._ensure_class_data_archive(find_java())
        jars = len(list(self.libs_dir.glob("*.jar")))
        return ResolveReport(self.version, self.libs_dir, jars, fetched, time.monotonic() - t0)

    def _resolve_with_maven(self) -> None:
        mvn = find_maven()
        find_java()  # Maven itself needs Java; say so before Maven does, less clearly.
        pom_path = self.home / "pom.xml"
        pom_path.write_text(self.pom())
        staging = self.home / "libs.partial"
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom_path),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired as exc:
            raise ArtifactResolutionError(
                f"Maven did not finish fetching Kafka {self.version} within 30 minutes."
            ) from exc
        if proc.returncode != 0:
            tail = tail_lines(proc.stdout + proc.stderr, 12)
            raise ArtifactResolutionError(
                f"Maven could not fetch Kafka {self.version} (exit {proc.returncode}): {tail}"
            )
        jars = sorted(p.name for p in staging.glob("*.jar"))
        if not any(j.startswith(f"kafka_2.13-{self.version}") for j in jars):
            raise ArtifactResolutionError(
                f"Maven finished but kafka_2.13-{self.version}.jar is missing from {staging}.")
        shutil.rmtree(self.libs_dir, ignore_errors=True)
        staging.rename(self.libs_dir)
        self._marker.write_text(
            json.dumps({"version": self.version, "pom_sha256": self._pom_digest(), "jars": jars}, indent=1)
        )

    def _write_config_files(self) -> None:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        for name in ("broker-log4j2.properties", "tools-log4j2.properties", "app-log4j2.properties"):
            text = resources.files(__package__).joinpath(f"resources/{name}").read_text()
            target = self.config_dir / name
            if not target.is_file() or target.read_text() != text:
                target.write_text(text)

    # -- class-data sharing ------------------------------------------------

    def class_data_archive(self, java: JavaRuntime) -> Path:
        """Where this release's class-data archive for ``java`` lives (whether or not it exists yet).

        Why: a JVM spends most of a one-second CLI tool call loading and verifying the same few thousand classes
        from the jars; mapped from a CDS archive (``-Xshare:dump`` of the classes in ``kafka-classes.txt``) a
        ``kafka-features describe`` takes half the CPU (2.1 -> 1.0 CPU-s, measured), and a broker or Streams app
        starts with less. An archive is only valid for the JVM build and classpath it was dumped with, so its
        name carries both (and the class list's content); a JVM that cannot use it runs without it, as before.
        """
        jars = sorted(p.name for p in self.libs_dir.glob("*.jar"))
        key = hashlib.sha256("\0".join(
            [str(Path(java.executable).resolve()), java.version, *jars, _class_list_digest()]
        ).encode()).hexdigest()[:16]
        return self.home / "cds" / f"kafka-{self.version}-java-{java.version}-{key}.jsa"

    def _ensure_class_data_archive(self, java: JavaRuntime) -> None:
        """Dump the class-data archive once (under :meth:`ensure`'s lock), written to a temporary name and renamed:
        a JVM never maps a half-written archive. A failed dump is remembered next to it (with the JVM's output) and
        not tried again; the commands then run without an archive."""
        archive = self.class_data_archive(java)
        failed = archive.with_suffix(".failed")
        if archive.is_file() or failed.is_file():
            return
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(".jsa.partial")
        with resources.as_file(_class_list()) as class_list:
            cmd = [java.executable, "-Xshare:dump", f"-XX:SharedClassListFile={class_list}",
                   f"-XX:SharedArchiveFile={partial}", "-cp", self.classpath]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
                ok = proc.returncode == 0 and partial.is_file()
                output = proc.stdout + proc.stderr
            except (OSError, subprocess.TimeoutExpired) as exc:
                ok, output = False, str(exc)
        if ok:
            partial.replace(archive)
        else:
            partial.unlink(missing_ok=True)
            failed.write_text(f"{' '.join(cmd)}\n{output[-4000:]}")

    def class_data_options(self, java: JavaRuntime) -> list[str]:
        """The JVM options that map this release's archive, or none when it does not exist (not dumped, or disabled).
        CDS's own messages are switched off: a tool's stdout is parsed, and a JVM that cannot map the archive
        (another build, a changed classpath) runs without it either way."""
        if not self.class_data_sharing:
            return []
        archive = self.class_data_archive(java)
        return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds*=off"] if archive.is_file() else []

    # -- commands ----------------------------------------------------------

    @property
    def classpath(self) -> str:
        return str(self.libs_dir / "*")

    def java_command(
        self,
        main_class: str,
        args: list[str] | tuple[str, ...] = (),
        *,
        log_config: str = "tools",
        jvm_options: list[str] | tuple[str, ...] = (),
        extra_classpath: list[Path] | tuple[Path, ...] = (),
    ) -> list[str]:
        """The argument list (never a shell string) that runs ``main_class`` on this release's classpath.

        ``extra_classpath`` entries come after the release's jars (an application built against them): the
        class-data archive, dumped with the release's classpath alone, stays valid for a classpath it prefixes.
        """
        if not self.is_resolved():
            raise ToolchainError(
                f"Kafka {self.version} is not in the cache ({self.home}).",
                remedy="Fetch it first: call KafkaDistribution.ensure() (in the project's checkout, where the "
                       "test harness is installed: python -m kip848_harness kafka fetch)",
            )
        java = find_java()
        return [
            java.executable,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.config_dir / f'{log_config}-log4j2.properties'}",
            *self.class_data_options(java),
            *jvm_options,
            "-cp",
            os.pathsep.join([self.classpath, *(str(p) for p in extra_classpath)]),
            main_class,
            *args,
        ]

    def tool_command(self, tool: str, args: list[str] | tuple[str, ...] = ()) -> list[str]:
        """Argument list for a Kafka CLI tool by its script name (``kafka-features`` ...)."""
        return self.java_command(self.tool_main_class(tool), list(args), jvm_options=TOOL_JVM_OPTIONS)

    def tool_main_class(self, tool: str) -> str:
        """The main class of a Kafka CLI tool in this release (a tool that moved between releases: where it is)."""
        name = tool.removesuffix(".sh")
        try:
            main_class = KAFKA_TOOLS[name]
        except KeyError:
            raise ToolchainError(
                f"Unknown Kafka tool {tool!r}.", remedy=f"Use one of: {', '.join(sorted(KAFKA_TOOLS))}."
            ) from None
        return tool_main_class_in(self.libs_dir, name, main_class)


def tool_main_class_in(libs_dir: Path, tool: str, main_class: str) -> str:
    """``main_class`` of ``tool``, or its former class when the release in ``libs_dir`` predates its move (no
    ``kafka-tools`` jar there holds it): the same tool name runs on every 4.x release."""
    former = FORMER_TOOL_CLASSES.get(tool)
    if former is None:
        return main_class
    if any(_jar_has_class(jar, main_class) for jar in sorted(libs_dir.glob("kafka-tools-*.jar"))):
        return main_class
    return former


def _jar_has_class(jar: Path, class_name: str) -> bool:
    """Whether ``jar`` holds ``class_name`` (its central directory only, read once per jar file and size)."""
    try:
        size = jar.stat().st_size
    except OSError:
        return False
    return class_name.replace(".", "/") + ".class" in _jar_entries(str(jar), size)


@functools.cache
def _jar_entries(jar: str, size: int) -> frozenset[str]:
    with zipfile.ZipFile(jar) as archive:
        return frozenset(archive.namelist())


def _class_list() -> Traversable:
    return resources.files(__package__).joinpath(CLASS_LIST_RESOURCE)


@functools.cache
def _class_list_digest() -> str:
    """The class list's content hash, part of every archive's name: read once per process, not on each command
    (a CLI tool call asks for the archive's name)."""
    return hashlib.sha256(_class_list().read_bytes()).hexdigest()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` across processes: one Maven run per cache entry at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def tail_lines(text: str, lines: int) -> str:
    """The last ``lines`` non-blank lines of a process's output, joined on one line for an error message."""
    kept = [ln.strip() for ln in text.strip().splitlines() if ln.strip()][-lines:]
    return " | ".join(kept) if kept else "(no output)"

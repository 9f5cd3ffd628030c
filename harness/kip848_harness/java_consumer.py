"""A plain Java consumer built against any kafka-clients release from Maven Central, run under supervisord.

The client-release check (``client_release`` in the preflight) must be shown refusing an instance that *runs*
an old client library, whatever the run declares. The confluent-kafka consumer cannot be one (the venv has
one librdkafka); a Java consumer can: :func:`client_jars` resolves ``org.apache.kafka:kafka-clients:<release>``
and its runtime dependencies with Maven (plus ``slf4j-simple``, so the client logs its ``Kafka version:`` line
at INFO, as an application with a logging backend does), :func:`consumer_jar` compiles
``java/PlainConsumer.java`` against them, and :class:`SupervisedJavaConsumer` runs ``instances`` of it under
the session's supervisord with the same files, commands and controller target as
:class:`~kip848_harness.supervised.SupervisedConsumerApp` (``client`` ``java``; ``declared_version`` is what
the target's ``client_version`` declares, which may differ from what runs: the point of the test).

Resolved once per release into ``<cache>/java-consumer/<release>/`` (under a lock: several test workers may ask).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from airflow_provider_kip848.kafka.cache import default_cache_dir
from airflow_provider_kip848.kafka.cli.distribution import file_lock, tail_lines
from airflow_provider_kip848.kafka.cli.java import find_java, find_maven
from kip848_harness.apps import APP_JVM_OPTIONS, compiled_jar
from kip848_harness.supervised import SupervisedConsumerApp, _q

MAIN_CLASS = "kip848.harness.PlainConsumer"
SOURCE = "java/PlainConsumer.java"
#: the SLF4J binding the consumer logs through (kafka-clients 3.x and 4.x both build on slf4j-api 1.7.36)
SLF4J_VERSION = "1.7.36"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>kip848.harness</groupId><artifactId>java-consumer-deps</artifactId><version>1</version>
<packaging>pom</packaging><dependencies>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-clients</artifactId><version>{release}</version>
</dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>{slf4j}</version></dependency>
</dependencies></project>
"""


def _home(release: str) -> Path:
    if not all(part.isdigit() for part in release.split(".")) or release.count(".") != 2:
        raise ValueError(f"release {release!r} is not a kafka-clients release like 3.9.1")
    return default_cache_dir() / "java-consumer" / release


def client_jars(release: str) -> list[Path]:
    """kafka-clients ``release`` and its runtime dependencies (with the SLF4J binding), fetched once."""
    home = _home(release)
    libs = home / "libs"
    if (home / "resolved").is_file():
        return sorted(libs.glob("*.jar"))
    home.mkdir(parents=True, exist_ok=True)
    with file_lock(home / ".lock"):
        if not (home / "resolved").is_file():
            pom = home / "pom.xml"
            pom.write_text(_POM.format(release=release, slf4j=SLF4J_VERSION))
            staging = home / "libs.partial"
            shutil.rmtree(staging, ignore_errors=True)
            find_java()  # Maven needs it: say so first
            proc = subprocess.run([find_maven(), "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
                                   f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                                  capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
            if proc.returncode != 0 or not (staging / f"kafka-clients-{release}.jar").is_file():
                raise RuntimeError(f"Maven could not fetch kafka-clients {release} (exit {proc.returncode}): "
                                   f"{tail_lines(proc.stdout + proc.stderr, 12)}")
            shutil.rmtree(libs, ignore_errors=True)
            staging.rename(libs)
            (home / "resolved").write_text(release)
    return sorted(libs.glob("*.jar"))


def consumer_jar(release: str) -> Path:
    """``PlainConsumer`` compiled against kafka-clients ``release`` (once per release, source and JDK)."""
    jars = client_jars(release)
    return compiled_jar(SOURCE, classpath=os.pathsep.join(map(str, jars)), built_for=release, folder=_home(release),
                        stem="plain-consumer", what=f"PlainConsumer against kafka-clients {release}")


class SupervisedJavaConsumer(SupervisedConsumerApp):
    """``instances`` Java consumers on kafka-clients ``release`` under supervisord (files, commands and target as
    :class:`~kip848_harness.supervised.SupervisedConsumerApp`'s); ``declared_version`` is the release the
    controller target declares (default: ``release``)."""

    stopwaitsecs = 30  # a consumer's close (it leaves the group) after a JVM's shutdown hook
    startsecs = 3  # a JVM's start

    def __init__(self, *args: object, release: str, declared_version: str | None = None,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.release, self.declared_version = release, declared_version or release
        classic = self.protocol_properties["classic"]
        if classic.get("partition.assignment.strategy") == "range":  # the Java client takes class names
            classic["partition.assignment.strategy"] = "org.apache.kafka.clients.consumer.RangeAssignor"

    def _exec_line(self) -> str:
        classpath = os.pathsep.join([*map(str, client_jars(self.release)), str(consumer_jar(self.release))])
        command = [shutil.which("java") or find_java().executable, *APP_JVM_OPTIONS,
                   "-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", classpath, MAIN_CLASS,
                   ",".join(self.topics), str(self.app_properties_path)]
        line = shlex.join(command) + f' {_q(self.workdir)}/"$protocol".properties "client.id=app-$n"'
        if self.static:
            line += " " + _q(f"group.instance.id={self.group_id}-") + '"$n"'
        return "exec " + line

    def _client(self) -> tuple[str, str]:
        return "java", self.declared_version


__all__ = ["MAIN_CLASS", "SupervisedJavaConsumer", "client_jars", "consumer_jar"]

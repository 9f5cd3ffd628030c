"""Find the Java runtime and Maven the Kafka CLI tools (and the embedded broker) need, or say what is missing.

Kafka 4.x brokers and CLI tools require Java 17+; Maven is needed only to
fetch the jars the first time. Both are looked up the way a user would expect:
``JAVA_HOME`` (then ``PATH``) for Java, ``KIP848_MVN`` (then ``PATH``) for Maven.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_kip848.kafka.errors import JavaNotFoundError, MavenNotFoundError

MIN_JAVA = 17
_VERSION_RE = re.compile(r'version "(?P<v>[^"]+)"')


@dataclass(frozen=True)
class JavaRuntime:
    executable: str
    version: str

    @property
    def major(self) -> int:
        return parse_java_major(self.version)


def parse_java_major(version: str) -> int:
    """``"1.8.0_392"`` -> 8, ``"17.0.15"`` -> 17, ``"21"`` -> 21."""
    parts = version.split(".")
    if parts[0] == "1" and len(parts) > 1:
        return int(parts[1])
    return int(re.match(r"\d+", parts[0]).group(0))  # type: ignore[union-attr]


def _java_candidate() -> tuple[str | None, str]:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate), f"JAVA_HOME={java_home}"
        return None, f"JAVA_HOME={java_home} has no bin/java"
    return shutil.which("java"), "PATH"


@functools.cache
def _probe_java(exe: str) -> str:
    proc = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=60)
    out = proc.stderr + proc.stdout
    m = _VERSION_RE.search(out)
    if proc.returncode != 0 or not m:
        raise JavaNotFoundError(f"{exe} -version failed (exit {proc.returncode}): {out.strip()[:200]}")
    return m.group("v")


def find_java() -> JavaRuntime:
    """Return the Java runtime to use, or raise :class:`JavaNotFoundError` saying what to install."""
    exe, where = _java_candidate()
    if not exe:
        raise JavaNotFoundError(f"Java not found ({where}): Kafka 4.x needs Java {MIN_JAVA}+.")
    version = _probe_java(exe)
    runtime = JavaRuntime(exe, version)
    if runtime.major < MIN_JAVA:
        raise JavaNotFoundError(
            f"Java {version} at {exe} is too old: Kafka 4.x brokers and tools need Java {MIN_JAVA}+."
        )
    return runtime


def find_maven() -> str:
    """Return the ``mvn`` executable, or raise :class:`MavenNotFoundError`."""
    exe = os.environ.get("KIP848_MVN") or shutil.which("mvn")
    if not exe or not (Path(exe).is_file() or shutil.which(exe)):
        raise MavenNotFoundError("Maven (mvn) not found on PATH: it is needed to fetch the Kafka jars.")
    return exe

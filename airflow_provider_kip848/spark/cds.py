"""A class-data archive (AppCDS) for the local Spark driver JVM of a validation task.

Why: a task's validation runs on a fresh JVM. Before its first record is read, that JVM loads some 23,000
classes (Spark, Scala, Catalyst, the Kafka client), about 15,000 of them from the 280 jars of pyspark and the
connector, each looked up through the class path and verified. Mapped from a CDS archive they cost almost
less: measured side by side on the shared 2-core machine, the SparkSession start took 15.0 CPU-s instead of
24.6 (7.7 with C1 only) and the first wave job 56 instead of 63 (docs/validation.md).

How: JDK 17's dynamic archive. The first short-lived local session of a jar set (pyspark's jars, the connector,
the Java build, the driver's JVM options: the archive's name carries their hash) runs with
``-XX:ArchiveClassesAtExit``: when the session stops, :func:`finish` ends that JVM and waits for it to write
the archive (about 20 s, once, after the job), which is renamed into place when complete; a JVM never maps a
half-written archive. Later sessions map it with ``-XX:SharedArchiveFile``; one that cannot (another class path,
a changed jar) runs without it, as before: CDS's messages go to a log file read by :func:`status`, never to the
task's output. A failed dump is remembered next to the archive (``.failed``, with the reason) and not tried
again; ``KIP848_SPARK_CDS=0`` switches the archive off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

#: a dump marker older than this is stale (its process died before it finished)
STALE_DUMP_S = 900
#: how long :func:`finish` waits for the JVM to write the archive
DUMP_TIMEOUT_S = 600


def spark_java() -> str | None:
    """The java that pyspark's launcher (``spark-class``) runs: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    exe = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return str(Path(exe).resolve()) if exe and Path(exe).is_file() else None


def archive_key(java: str, jars_dir: Path, extra: list[str]) -> str:
    """The hash naming an archive: the Java build (path, size, mtime), pyspark's jars (names, sizes) and
    ``extra`` (the connector's coordinates and the driver's JVM options). A change makes a new archive."""
    st = Path(java).stat()
    jars = sorted((p.name, p.stat().st_size) for p in jars_dir.glob("*.jar"))
    text = "\0".join([java, str(st.st_size), str(int(st.st_mtime)), *(f"{n}:{s}" for n, s in jars), *extra])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class DriverArchive:
    """The archive of one jar set, and what this session does with it (``mode``: ``use``, ``dump`` or ``off``)."""

    path: Path | None
    mode: str = "off"
    reason: str = ""
    partial: Path | None = None
    log: Path | None = None
    _marker: Path | None = field(default=None, repr=False)

    def options(self) -> list[str]:
        """The driver JVM options for this session (none when off)."""
        if self.mode == "use":
            return [f"-XX:SharedArchiveFile={self.path}", "-Xlog:cds*=off",
                    f"-Xlog:cds+dynamic=warning:file={self.log}"]
        if self.mode == "dump":
            return [f"-XX:ArchiveClassesAtExit={self.partial}", "-Xlog:cds*=off"]
        return []


def prepare(cache_dir: Path, pyspark_version: str, extra: list[str]) -> DriverArchive:
    """Use the jar set's archive if it exists, else dump it from this session unless another process is dumping
    it or a dump failed before; never raises (no archive is only slower)."""
    if os.environ.get("KIP848_SPARK_CDS", "1") in ("0", "false", "no", "off"):
        return DriverArchive(None, reason="switched off (KIP848_SPARK_CDS)")
    try:
        import pyspark  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

        java = spark_java()
        if java is None:
            return DriverArchive(None, reason="no java found")
        jars = Path(pyspark.__file__).parent / "jars"
        key = archive_key(java, jars, extra)
        folder = cache_dir / "spark-cds"
        path = folder / f"spark-{pyspark_version}-{key}.jsa"
        if path.is_file():
            log = Path(tempfile.mkstemp(prefix="kip848-cds-", suffix=".log")[1])
            return DriverArchive(path, "use", log=log)
        failed = path.with_suffix(".failed")
        if failed.is_file():
            return DriverArchive(path, reason=f"an earlier dump failed ({failed})")
        folder.mkdir(parents=True, exist_ok=True)
        marker = path.with_suffix(".dumping")
        with contextlib.suppress(FileNotFoundError):
            if time.time() - marker.stat().st_mtime > STALE_DUMP_S:
                marker.unlink()
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return DriverArchive(path, reason="another process is dumping it")
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        partial = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.partial")
        return DriverArchive(path, "dump", partial=partial, _marker=marker)
    except OSError as exc:
        return DriverArchive(None, reason=f"cache not writable: {exc}")


def status(archive: DriverArchive) -> str:
    """``used`` (the driver mapped the archive), ``unusable`` (it exists but the JVM could not map it),
    ``building`` (this session dumps it when it stops) or ``absent``."""
    if archive.mode == "dump":
        return "building"
    if archive.mode != "use":
        return "absent"
    try:
        text = archive.log.read_text() if archive.log else ""
    except OSError:
        text = ""
    return "unusable" if "Unable to use shared archive" in text or "failed to load" in text else "used"


def finish(archive: DriverArchive) -> None:
    """After the session stopped: when this session dumps the archive, end its JVM (pyspark's gateway exits when
    its stdin closes), wait for the dump and rename it into place; else only tidy up. Never raises."""
    if archive.log is not None:
        with contextlib.suppress(OSError):
            archive.log.unlink()
    if archive.mode != "dump" or archive.partial is None or archive.path is None:
        return
    try:
        from pyspark import SparkContext  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        code: int | None = None
        if gateway is not None and proc is not None and proc.stdin is not None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            with contextlib.suppress(OSError):
                proc.stdin.close()
            code = proc.wait(timeout=DUMP_TIMEOUT_S)
            # the next session of this process starts a JVM of its own
            SparkContext._gateway = None
            SparkContext._jvm = None
        if code == 0 and archive.partial.is_file() and archive.partial.stat().st_size > 0:
            archive.partial.replace(archive.path)
        else:
            archive.path.with_suffix(".failed").write_text(
                f"the driver JVM exited with {code} and left "
                f"{'no archive' if not archive.partial.is_file() else 'an empty archive'} at {archive.partial}\n")
    except Exception as exc:  # noqa: BLE001 - an archive is an optimisation: never fail the job for it
        with contextlib.suppress(OSError):
            archive.path.with_suffix(".failed").write_text(f"{type(exc).__name__}: {exc}\n")
    finally:
        with contextlib.suppress(OSError):
            archive.partial.unlink()
        if archive._marker is not None:
            with contextlib.suppress(OSError):
                archive._marker.unlink()

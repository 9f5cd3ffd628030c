"""A local SparkSession configured for validation jobs (and the Kafka connector, resolved from Maven Central)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_provider_kip848.kafka.cache import default_cache_dir
from airflow_provider_kip848.spark import cds
from airflow_provider_kip848.spark.jvm_output import forward_jvm_output

KAFKA_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"

#: the driver JVM of a short-lived session (one task's job, then the JVM ends): the client compiler only and the
#: serial collector. On 2 cores the server compiler's threads take a third of a fresh JVM's CPU compiling code the
#: job then runs once (measured: 33 of 76 CPU-s over a session start and the first wave job); C1 only cuts the
#: first job's CPU by about a quarter (docs/validation.md). A long-lived session keeps the JVM's defaults.
SHORT_LIVED_DRIVER_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def connector_coordinates() -> str:
    """The Kafka connector matching the installed Spark (its version must equal Spark's)."""
    import pyspark  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    return f"{KAFKA_CONNECTOR}:{pyspark.__version__}"


def local_session(app_name: str = "kip848-validation", *, kafka_connector: bool = True, cores: int = 2,
                  cache_dir: str | Path | None = None, short_lived: bool = False):
    """``local[cores]``, UTC, no UI, small shuffles; the connector's jars cached under ``cache_dir/ivy``.

    ``short_lived``: the session of one task's job (stop it with :func:`stop_session`): its driver JVM runs
    with :data:`SHORT_LIVED_DRIVER_OPTIONS` and maps the jar set's class-data archive (:mod:`.cds`), dumping it
    when there is none yet. ``spark.driver.extraJavaOptions`` is then this module's (a deployment's
    ``spark.driver.defaultJavaOptions`` still apply)."""
    import pyspark  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)
    from pyspark.sql import SparkSession  # noqa: PLC0415

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode: no hostname lookup, no warning about it
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cache = Path(cache_dir or default_cache_dir())
    ivy = cache / "ivy"
    builder = (
        SparkSession.builder.appName(app_name)
        .master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(cores * 2))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.jars.ivy", str(ivy))
    )
    if kafka_connector:
        builder = (builder.config("spark.jars.packages", connector_coordinates())
                   .config("spark.jars.ivySettings", str(ivy_settings(ivy))))
    archive = cds.DriverArchive(None)
    if short_lived:
        archive = cds.prepare(cache, pyspark.__version__,
                              [connector_coordinates() if kafka_connector else "", *SHORT_LIVED_DRIVER_OPTIONS])
        builder = builder.config("spark.driver.extraJavaOptions",
                                 " ".join([*SHORT_LIVED_DRIVER_OPTIONS, *archive.options()]))
    # the JVM inherits a pipe, not the task's stderr (which Airflow logs at ERROR): see spark.jvm_output
    try:
        spark = forward_jvm_output(builder.getOrCreate)
    except BaseException:
        cds.finish(archive)
        raise
    spark.sparkContext.setLogLevel("ERROR")
    spark._kip848_cds = archive  # type: ignore[attr-defined]  # what stop_session finishes
    return spark


def stop_session(spark) -> None:
    """Stop a session of :func:`local_session`; a short-lived one that dumps the class-data archive ends its JVM
    and waits for the archive (the first such session of a jar set only: about 20 s, after its job)."""
    spark.stop()
    archive = getattr(spark, "_kip848_cds", None)
    if archive is not None:
        cds.finish(archive)


def class_data_status(spark) -> str:
    """Whether the session's driver mapped the class-data archive: ``used``, ``unusable``, ``building`` (dumped
    when the session stops) or ``absent``."""
    archive = getattr(spark, "_kip848_cds", None)
    return cds.status(archive) if archive is not None else "absent"


@contextmanager
def job_session(  # Any: pyspark's objects (an optional extra, untyped here)
        app_name: str, *, kafka_connector: bool = True) -> Iterator[Any]:
    """The SparkSession a validation job runs on: the one this process already runs, if any, else a local one.

    A task process starts a local session and stops it when the job ends. A process that keeps a session
    (a notebook, a long-lived worker, a test session running many DAG runs) has its job run on that session,
    which the job leaves running: it is not the job's. Starting one costs 10-20 s of JVM start, connector
    resolution and first-job warm-up, several times a validation of a small migration. Such a session must
    have the Kafka connector when the job reads with it.
    """
    from pyspark.sql import SparkSession  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    running = SparkSession.getActiveSession()
    if running is not None:
        yield running
        return
    spark = local_session(app_name, kafka_connector=kafka_connector, short_lived=True)
    try:
        yield spark
    finally:
        stop_session(spark)


def ivy_settings(ivy_dir: Path) -> Path:
    """Ivy resolution from Maven Central only (or ``$KIP848_MAVEN_REPO``), without the spark-packages
    repository Spark also tries by default (unreachable from many build machines, and noisy)."""
    repo = os.environ.get("KIP848_MAVEN_REPO", "https://repo1.maven.org/maven2/")
    ivy_dir.mkdir(parents=True, exist_ok=True)
    path = ivy_dir / "ivysettings.xml"
    text = (
        '<ivysettings>\n  <settings defaultResolver="chain"/>\n  <resolvers>\n    <chain name="chain">\n'
        '      <ibiblio name="local-m2" m2compatible="true" root="file://${user.home}/.m2/repository/"/>\n'
        f'      <ibiblio name="central" m2compatible="true" root="{repo}"/>\n'
        '    </chain>\n  </resolvers>\n</ivysettings>\n'
    )
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def spark_versions(spark) -> dict[str, str]:
    """The Python package's and the JVM's Spark versions (they must match: a mixed install breaks jobs)."""
    import pyspark  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    return {"pyspark": pyspark.__version__, "jvm": spark.version}

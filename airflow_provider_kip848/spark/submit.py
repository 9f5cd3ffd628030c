"""Run the validation job with ``spark-submit`` (any master), shipping this package to the executors.

:func:`package_zip` zips ``airflow_provider_kip848`` for ``--py-files``;
:func:`submit_command` builds the argument list (the spec is a file: it may
carry secrets). ``SPARK_HOME/bin/spark-submit`` is used when ``SPARK_HOME`` is
set, else the one pyspark ships. The executors also need confluent-kafka for
the ``python`` reader (install it on the cluster's Python), and the Kafka
connector for the ``connector`` reader (added with ``--packages``).

:func:`stage_wave` lays out what a wave job needs in one directory (the spec,
mode 0600; the package zip; the job's main file; a fresh report directory) so
that a driver started anywhere that directory is mounted finds it all: the
same layout serves client mode (the driver is the worker's child) and cluster
mode (a Spark worker starts the driver).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import airflow_provider_kip848
from airflow_provider_kip848.kafka.cache import default_cache_dir
from airflow_provider_kip848.spark import job, wave
from airflow_provider_kip848.spark.session import connector_coordinates, ivy_settings


def package_zip(target: str | Path) -> Path:
    """A zip of the installed package (its Python files and data), for ``--py-files``."""
    root = Path(airflow_provider_kip848.__file__).parent
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, Path("airflow_provider_kip848") / path.relative_to(root))
    return target


def spark_submit_executable() -> str:
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "bin" / "spark-submit").exists():
        return str(Path(home) / "bin" / "spark-submit")
    import pyspark  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    bundled = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if bundled.exists():
        return str(bundled)
    found = shutil.which("spark-submit")
    if not found:
        raise FileNotFoundError("spark-submit not found: set SPARK_HOME or install pyspark")
    return found


def submit_command(spec_path: str | Path, py_files: str | Path, *, master: str = "local[2]",
                   connector: bool = True, conf: dict[str, str] | None = None, application: str | None = None,
                   app_args: list[str] | tuple[str, ...] = ()) -> list[str]:
    """``spark-submit`` of the single-group job (``application``: another job file of this package, e.g.
    :mod:`~airflow_provider_kip848.spark.wave`) with ``--spec spec_path`` and ``app_args``."""
    cmd = [spark_submit_executable(), "--master", master, "--py-files", str(py_files),
           "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
           "--conf", "spark.sql.session.timeZone=UTC"]
    if connector:
        ivy = default_cache_dir() / "ivy"
        cmd += ["--packages", connector_coordinates(), "--conf", f"spark.jars.ivy={ivy}",
                "--conf", f"spark.jars.ivySettings={ivy_settings(ivy)}"]
    for key, value in (conf or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, application or job.__file__, "--spec", str(spec_path), *app_args]


def connector_conf() -> dict[str, str]:
    """Spark properties that fetch the Kafka connector (``spark.jars.packages``) through this machine's ivy
    cache, from Maven Central only (as :func:`submit_command` does with ``--packages``)."""
    ivy = default_cache_dir() / "ivy"
    return {"spark.jars.packages": connector_coordinates(), "spark.jars.ivy": str(ivy),
            "spark.jars.ivySettings": str(ivy_settings(ivy))}


def runner_jar() -> str:
    """The installed pyspark's ``spark-core`` jar, which holds ``PythonRunner`` (the application a cluster-mode
    Python driver runs as)."""
    import pyspark  # noqa: PLC0415 - optional dependency pyspark ([spark] extra)

    found = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
    if not found:
        raise FileNotFoundError(f"no spark-core jar in {Path(pyspark.__file__).parent / 'jars'}: install pyspark "
                                "(not pyspark-client alone) or give runner_jar")
    return str(found[0])


@dataclass(frozen=True)
class StagedWave:
    """One run of the wave job laid out in ``directory``: ``spec`` (0600: it may hold the connection's
    secrets), ``py_files`` (the package zip), ``main_py`` (the job), ``output_dir`` (new, empty: a report
    found there can only be this run's)."""

    directory: Path
    spec: Path
    py_files: Path
    main_py: Path
    output_dir: Path

    @property
    def report(self) -> Path:
        return self.output_dir / "validation.json"

    def remove_spec(self) -> None:
        """Delete the spec (and its secrets) once the job has read it or will never run."""
        self.spec.unlink(missing_ok=True)

    def to_dict(self) -> dict[str, str]:
        return {k: str(getattr(self, k)) for k in ("directory", "spec", "py_files", "main_py", "output_dir")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StagedWave:  # Any: JSON read back (XCom, a file, a response)
        return cls(*(Path(str(data[k])) for k in ("directory", "spec", "py_files", "main_py", "output_dir")))


def stage_wave(  # Any: JSON of several shapes (XCom, reports)
        spec: Mapping[str, Any], directory: str | Path) -> StagedWave:
    """Write ``spec`` (a wave spec, snapshots inlined) and what the job needs into a new subdirectory of
    ``directory`` (``run-<random>``); the spec's ``output_dir`` becomes that run's ``report`` directory."""
    base = Path(directory).expanduser().resolve() / f"run-{uuid.uuid4().hex[:12]}"
    base.mkdir(parents=True, exist_ok=False)
    output = base / "report"
    spec_path = base / "wave-spec.json"
    fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({**spec, "output_dir": str(output)}, fh)
    main_py = base / "kip848_wave_main.py"
    shutil.copyfile(wave.__file__, main_py)
    return StagedWave(base, spec_path, package_zip(base / "airflow_provider_kip848.zip"), main_py, output)

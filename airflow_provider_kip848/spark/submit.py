"""Run the validation job with ``spark-submit`` (any master), shipping this package to the executors.

:func:`package_zip` zips ``airflow_provider_kip848`` for ``--py-files``;
:func:`submit_command` builds the argument list (the spec is a file: it may
carry secrets). ``SPARK_HOME/bin/spark-submit`` is used when ``SPARK_HOME`` is
set, else the one pyspark ships. The executors also need confluent-kafka for
the ``python`` reader (install it on the cluster's Python), and the Kafka
connector for the ``connector`` reader (added with ``--packages``).
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import airflow_provider_kip848
from airflow_provider_kip848.kafka.cache import default_cache_dir
from airflow_provider_kip848.spark import job
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

"""Where a run's artifacts go: one location per deployment, one folder per run.

A snapshot written by one worker is compared or restored by another (Celery
and Kubernetes executors give each task whichever worker is free), so the
default cannot be a worker's own disk. The location is given once per
deployment and every run writes under its own folder, so no run overwrites
another's:

1. the DAG's own Param (``snapshot_dir`` / ``report_dir``), when set;
2. the connection's extra ``artifacts_url`` (one per cluster);
3. ``$KIP848_ARTIFACTS_URL`` (one per deployment).

Each is a local path (for a shared volume mounted on every worker) or an
Airflow ObjectStorage URL (``s3://``, ``gs://``, ``file://`` ...). The run's
folder is ``<root>/<dag_id>/<run_id>/<kind>``. Without any of them a task
that must write an artifact fails at once saying how to configure one; the
embedded demo sets ``$KIP848_ARTIFACTS_URL`` to a folder of its own.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV, ARTIFACTS_EXTRA, run_location, safe_part
from airflow_provider_kip848.changecontrol.runpaths import given as _given
from airflow_provider_kip848.kafka.errors import ArtifactUnwritable

__all__ = ["ARTIFACTS_ENV", "ARTIFACTS_EXTRA", "MACROS", "artifact_root", "optional_run_location",
           "require_run_location", "run_location", "safe_part"]


def artifact_root(explicit: object = None, conn_id: object = None) -> str | None:
    """The configured root (see the module docstring), or None when there is none."""
    if (given := _given(explicit)) is not None:
        return given
    if (conn := _given(conn_id)) is not None:
        try:
            extra = BaseHook.get_connection(conn).extra_dejson or {}
        except AirflowNotFoundException:
            extra = {}
        if (from_conn := _given(extra.get(ARTIFACTS_EXTRA))) is not None:
            return from_conn
    return _given(os.environ.get(ARTIFACTS_ENV))


def require_run_location(explicit: object, conn_id: object, dag_id: str, run_id: str, kind: str) -> str:
    """The run's folder for ``kind`` (``snapshots``, ``report``), or :class:`ArtifactUnwritable` saying how
    to configure a location every worker reaches."""
    root = artifact_root(explicit, conn_id)
    if root is None:
        raise ArtifactUnwritable(
            f"No location for this run's {kind}: the DAG's Param is empty, the connection {conn_id!r} has no "
            f"extra {ARTIFACTS_EXTRA!r} and ${ARTIFACTS_ENV} is not set.",
            remedy=f"Set ${ARTIFACTS_ENV} (or the connection extra {ARTIFACTS_EXTRA}) to an ObjectStorage URL or a "
                   "shared path that every worker reaches, e.g. s3://aws_default@bucket/kip848.")
    storage.storage_path(root)  # a root that names no place, or a ~user the worker lacks: refused now
    return run_location(root, dag_id, run_id, kind)


def optional_run_location(explicit: object, conn_id: object, dag_id: str, run_id: str, kind: str) -> str | None:
    """Like :func:`require_run_location`, None without a configured location (a report is optional:
    it is also in the task log and XCom)."""
    root = artifact_root(explicit, conn_id)
    if root is None:
        return None
    storage.storage_path(root)
    return run_location(root, dag_id, run_id, kind)


def run_location_macro(explicit: object, conn_id: object, dag: Any,  # Any: the template's dag (only dag_id is read)
                       run_id: str, kind: str) -> str:
    """The Jinja macro the example DAGs use: ``{{ kip848_run_location(params.snapshot_dir,
    params.kafka_conn_id, dag, run_id, 'snapshots') }}``."""
    return require_run_location(explicit, conn_id, dag.dag_id, run_id, kind)


#: ``user_defined_macros`` of the example DAGs.
MACROS = {"kip848_run_location": run_location_macro}

"""Where a run's artifacts go: one location per deployment, one folder per run.

A snapshot written by one worker is compared or restored by another (Celery
and Kubernetes executors give each task whichever worker is free), so the
default cannot be a worker's own disk. The location is given once per
deployment, by whoever administers it, and every run writes under its own
folder, so no run overwrites another's:

1. the connection's extra ``artifacts_url`` (one per cluster);
2. ``$KIP848_ARTIFACTS_URL`` (one per deployment).

A run never names it: a Param that named a path or URL (``report_dir``,
``snapshot_dir`` ...) could make a read-only run replace any file the worker
can write, or pick another connection's bucket (docs/reliability.md, "No Param
names a path"). Each is a local path (for a shared volume mounted on every
worker) or an Airflow ObjectStorage URL (``s3://``, ``gs://``, ``file://`` ...).
The run's folder is ``<root>/<dag_id>/<run_id>/<kind>``. Without either a task
that must write an artifact fails at once saying how to configure one; the
embedded demo sets ``$KIP848_ARTIFACTS_URL`` to a folder of its own.
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.runpaths import (
    ARTIFACTS_ENV,
    ARTIFACTS_EXTRA,
    plain_name,
    run_location,
    safe_part,
)
from airflow_provider_kip848.changecontrol.runpaths import given as _given
from airflow_provider_kip848.kafka.errors import ArtifactUnwritable, InvalidArgument

__all__ = ["ARTIFACTS_ENV", "ARTIFACTS_EXTRA", "MACROS", "artifact_root", "optional_run_location",
           "require_run_location", "run_location", "safe_part", "write_run_file"]


def artifact_root(conn_id: object = None) -> str | None:
    """The configured root (see the module docstring), or None when there is none."""
    if (conn := _given(conn_id)) is not None:
        try:
            extra = BaseHook.get_connection(conn).extra_dejson or {}
        except AirflowNotFoundException:
            extra = {}
        if (from_conn := _given(extra.get(ARTIFACTS_EXTRA))) is not None:
            return from_conn
    return _given(os.environ.get(ARTIFACTS_ENV))


def require_run_location(conn_id: object, dag_id: str, run_id: str, kind: str) -> str:
    """The run's folder for ``kind`` (``snapshots``, ``report``), or :class:`ArtifactUnwritable` saying how
    to configure a location every worker reaches."""
    root = artifact_root(conn_id)
    if root is None:
        raise ArtifactUnwritable(
            f"No location for this run's {kind}: the connection {conn_id!r} has no extra {ARTIFACTS_EXTRA!r} and "
            f"${ARTIFACTS_ENV} is not set.",
            remedy=f"Set ${ARTIFACTS_ENV} (or the connection extra {ARTIFACTS_EXTRA}) to an ObjectStorage URL or a "
                   "shared path that every worker reaches, e.g. s3://aws_default@bucket/kip848.")
    storage.storage_path(root)  # a root that names no place, or a ~user the worker lacks: refused now
    return run_location(root, dag_id, run_id, kind)


def optional_run_location(conn_id: object, dag_id: str, run_id: str, kind: str) -> str | None:
    """Like :func:`require_run_location`, None without a configured location (a report is optional:
    it is also in the task log and XCom)."""
    root = artifact_root(conn_id)
    if root is None:
        return None
    storage.storage_path(root)
    return run_location(root, dag_id, run_id, kind)


def write_run_file(conn_id: object, dag_id: str, run_id: str, kind: str, name: object, text: str, *,
                   param: str) -> str:
    """Write ``text`` as the file ``name`` of the run's ``kind`` folder and return its location. ``name`` comes
    from a run (the Param ``param``): one plain file name (``runpaths.plain_name``), and a link in the folder
    pointing out of it is not followed (:class:`InvalidArgument`, nothing written); without a configured
    location, :class:`ArtifactUnwritable`."""
    where = f"this run's own {kind} folder of the deployment's artifact location"
    checked = plain_name(name, param, where=where)
    folder = require_run_location(conn_id, dag_id, run_id, kind)
    location = storage.inside(folder, checked)
    if location is None:
        raise InvalidArgument(f"{param}: {checked!r} leads out of {where} (a link): refused, nothing written.",
                              remedy=f"Give another file name in {param}.")
    storage.write_text(location, text)
    return location


def run_location_macro(conn_id: object, dag: Any,  # Any: the template's dag (only dag_id is read)
                       run_id: str, kind: str) -> str:
    """The Jinja macro the example DAGs use: ``{{ kip848_run_location(params.kafka_conn_id, dag, run_id,
    'snapshots') }}`` (the connection's location, else the deployment's: never one the run names)."""
    return require_run_location(conn_id, dag.dag_id, run_id, kind)


#: ``user_defined_macros`` of the example DAGs.
MACROS = {"kip848_run_location": run_location_macro}

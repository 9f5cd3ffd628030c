"""A finished run's report, found and read back for the UI: its folder, its files, its validation pages.

The report task of each DAG writes ``report.md``, ``report.json`` and its charts (``*.svg``) under the run's
own folder, ``<root>/<dag_id>/<run_id>/report`` (:mod:`.runpaths`), and returns where it wrote them
(``{"files": {"markdown": ..., ...}}`` in its XCom). The reports page (``plugins/reports.py``) reads them
back here. What the run itself recorded comes first: the root can be a connection's extra or the deployment's
environment *as the worker saw them*, which the API server may not see alike; the folder is computed
(:func:`report_folder`) only for a run whose report task recorded none, from the location the API server knows,
never from the run's conf (a run names no path).

A file is served by its name only (:func:`artifact_location`): one plain file name in that run's report
folder, never a path, so a request cannot reach another run's folder or anything else the API server can
read. The validation pages (the Spark job's ``validation.html``, written under the run's snapshots folder)
are found through the validate tasks' XComs (:func:`validation_pages`), by task id, never by a path from the
request.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.runpaths import given, run_location
from airflow_provider_kip848.kafka.errors import ArtifactRefused

#: where the reports app is mounted in the API server (the operator extra link and the fleet runs page link here)
REPORTS_URL_PREFIX = "/kip848-reports"
#: the report task of every DAG of the provider (single-group DAGs and the fleet DAG)
REPORT_TASK = "report"
#: the validation task of the single-group DAGs; the fleet DAG's are ``wave_<k>.validate``
VALIDATE_TASK = "validate"
#: the DAGs of the provider (dags/*.py; tests/unit/test_run_artifacts.py checks the list against the files)
PROVIDER_DAG_IDS = (
    "kafka_cluster_inventory", "kafka_disable_group_feature", "kafka_enable_streams_protocol",
    "kafka_group_config_change", "kip1071_delete_streams_group", "kip1071_streams_offline_migration",
    "kip1071_streams_rollback_to_classic", "kip848_consumer_offline_migration", "kip848_consumer_rolling_upgrade",
    "kip848_fleet_migration",
)
#: the Markdown report in the folder
REPORT_MARKDOWN = "report.md"
#: what a served file's name may be: one plain name, not hidden (no ``/``, ``\\``, ``..``, NUL)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,199}")
#: media types of what the report folder holds (anything else: plain text, never rendered by the browser)
MEDIA_TYPES = {".md": "text/markdown; charset=utf-8", ".json": "application/json", ".svg": "image/svg+xml",
               ".html": "text/html; charset=utf-8", ".jsonl": "text/plain; charset=utf-8",
               ".txt": "text/plain; charset=utf-8"}
#: where a report folder's location came from
RECORDED, COMPUTED = "recorded by the report task", "computed from the artifact location"


def report_page_path(dag_id: str, run_id: str) -> str:
    """``/kip848-reports/<dag_id>/<run_id>`` (each quoted): the run's report page, under the API server's root."""
    return f"{REPORTS_URL_PREFIX}/{quote(dag_id, safe='')}/{quote(run_id, safe='')}"


@dataclass(frozen=True)
class ReportFolder:
    """A run's report folder: its location (a local path or an ObjectStorage URL) and where that came from
    (:data:`RECORDED` or :data:`COMPUTED`)."""

    location: str
    source: str


def recorded_folder(report_xcom: object) -> str | None:
    """The folder the report task wrote its files to (the directory of ``files.markdown`` in its XCom), or None
    when it recorded none (it has not run, it failed before writing, or no location was configured)."""
    files = report_xcom.get("files") if isinstance(report_xcom, Mapping) else None
    markdown = files.get("markdown") if isinstance(files, Mapping) else None
    if not isinstance(markdown, str) or not markdown.strip():
        return None
    return posixpath.dirname(markdown.rstrip("/")) or None


def report_folder(dag_id: str, run_id: str, *, report_xcom: object = None,
                  root: object = None) -> ReportFolder | None:
    """The run's report folder: what its report task recorded, else ``<root>/<dag>/<run>/report`` (``root``: the
    artifact location the reader knows, never one from the run's conf), else None."""
    if (recorded := recorded_folder(report_xcom)) is not None:
        return ReportFolder(recorded, RECORDED)
    base = given(root)
    if base is None:
        return None
    return ReportFolder(run_location(base, dag_id, run_id, "report"), COMPUTED)


def check_name(name: str) -> str:
    """``name`` when it is one plain file name (see :data:`_NAME`); :class:`ArtifactRefused` otherwise."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise ArtifactRefused(f"{name!r} is not a file name of this run's report folder.")
    return name


def artifact_location(folder: str, name: str) -> str:
    """The location of ``name`` in the run's report ``folder``; :class:`ArtifactRefused` for anything that
    is not a plain name, or (local folders) a file whose real path is outside the folder (a symbolic link)."""
    check_name(name)
    location = f"{folder.rstrip('/')}/{name}"
    path, base = storage.storage_path(location), storage.storage_path(folder)
    if isinstance(path, Path) and isinstance(base, Path) and not path.resolve().is_relative_to(base.resolve()):
        raise ArtifactRefused(f"{name!r} leads out of this run's report folder.")
    return location


def list_artifacts(folder: str) -> list[str]:
    """The plain file names in the run's report folder, sorted (an unreadable folder: ``ArtifactUnwritable``;
    a folder that does not exist: [])."""

    def names() -> list[str]:
        path = storage.storage_path(folder)
        if not path.exists():
            return []
        return sorted(p.name for p in path.iterdir() if p.is_file() and _NAME.fullmatch(p.name))

    return storage.read_with(folder, names)


def media_type(name: str) -> str:
    """The Content-Type a report folder's file is served with."""
    return MEDIA_TYPES.get(posixpath.splitext(name)[1].lower(), "text/plain; charset=utf-8")


def is_validation_task(task_id: str) -> bool:
    """The single-group DAGs' ``validate`` or a fleet wave's ``wave_<k>.validate``."""
    return task_id == VALIDATE_TASK or bool(re.fullmatch(rf"wave_\d+\.{VALIDATE_TASK}", task_id))


def validation_pages(xcoms: Mapping[str, Any]) -> dict[str, str]:  # Any: JSON of several shapes (XCom, reports)
    """task id -> the ``validation.html`` its validation wrote, from the validate tasks' XComs
    (``{"files": {"html": ...}}``); tasks that recorded none are left out."""
    pages = {}
    for task_id, value in sorted(xcoms.items()):
        files = value.get("files") if isinstance(value, Mapping) else None
        page = files.get("html") if isinstance(files, Mapping) else None
        if is_validation_task(task_id) and isinstance(page, str) and page.endswith("/validation.html"):
            pages[task_id] = page
    return pages


def shown_location(location: str) -> str:
    """A location as a page may show it: the user part of a URL (a connection id, or credentials) left out."""
    return re.sub(r"^([a-zA-Z][\w+.-]*://)[^/@]*@", r"\1", location)


__all__ = ["COMPUTED", "MEDIA_TYPES", "PROVIDER_DAG_IDS", "RECORDED", "REPORTS_URL_PREFIX", "REPORT_MARKDOWN",
           "REPORT_TASK", "VALIDATE_TASK", "ReportFolder", "artifact_location", "check_name", "is_validation_task",
           "list_artifacts", "media_type", "recorded_folder", "report_folder", "report_page_path", "shown_location",
           "validation_pages"]

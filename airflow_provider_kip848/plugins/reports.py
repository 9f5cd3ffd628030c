"""The reports of the provider's DAG runs, as pages of the Airflow UI.

An Airflow 3 plugin (:class:`ReportsPlugin`) that the API server mounts at ``/kip848-reports``:

* ``GET /kip848-reports/``: the latest runs of the provider's DAGs (:data:`~.run_artifacts.PROVIDER_DAG_IDS`,
  those the user may read; ``dag_id`` filters on one DAG, any DAG the user may read), newest first, at most
  ``limit``; each with its report task's state and outcome, linking to its report;
* ``GET /kip848-reports/{dag_id}/{run_id}``: that run's report: ``report.md`` rendered to HTML (raw HTML
  disabled: group ids and broker messages stay text), its charts inline, links to its files and to the
  validation pages; the fleet DAG's report is the fleet report with its charts. A run without a report says
  why (still running, failed before its report, no location configured); a folder that cannot be read is an
  error banner (HTTP 502), never an empty page;
* ``GET /kip848-reports/{dag_id}/{run_id}/files/{name}``: one file of that run's report folder, by its plain
  name (anything else: 400, nothing read);
* ``GET /kip848-reports/{dag_id}/{run_id}/validation/{task_id}``: the ``validation.html`` a validate task of the
  run recorded, served sandboxed (a generated HTML file: no script, nothing loaded from elsewhere).

The run's folder is what its report task recorded (its XCom ``files``), else the one the DAGs compute
(``<$KIP848_ARTIFACTS_URL>/<dag_id>/<run_id>/report``, :mod:`~.run_artifacts`).

Authentication and permission: :mod:`.auth` (401 without a valid token; 403 unless the user may read the
DAG's runs, task instances and XComs). Served files carry a Content-Security-Policy with ``sandbox``: an SVG
or HTML file opened on its own runs no script in the API server's origin.

The UI entry is an external view in the navigation, "Kafka change reports" (``/plugin/kip848-reports``); the
report tasks' "Report" extra link (``operators/report_link.py``) and the fleet runs page open
``/kip848-reports/{dag_id}/{run_id}`` directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote, urlencode

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, Response
from markdown_it import MarkdownIt
from markupsafe import Markup

from airflow_provider_kip848.changecontrol import storage
from airflow_provider_kip848.changecontrol.run_artifacts import (
    COMPUTED,
    PROVIDER_DAG_IDS,
    REPORT_MARKDOWN,
    REPORT_TASK,
    REPORTS_URL_PREFIX,
    ReportFolder,
    artifact_location,
    check_name,
    is_validation_task,
    list_artifacts,
    media_type,
    report_folder,
    shown_location,
    validation_pages,
)
from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV
from airflow_provider_kip848.kafka.errors import ArtifactRefused, ArtifactUnwritable
from airflow_provider_kip848.plugins.auth import refused_access, require_dag_reader, signed_in_user
from airflow_provider_kip848.plugins.pages import render

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

URL_PREFIX = REPORTS_URL_PREFIX
#: the external view's route in the UI (``/plugin/<route>``)
UI_ROUTE = "kip848-reports"
#: runs on the list page: by default, at most
DEFAULT_RUNS, MAX_RUNS = 25, 200
#: a run page reloads itself this often while its run is not finished
REFRESH_SECONDS = 15
#: run states after which nothing more is written
FINISHED = ("success", "failed")
#: served files and validation pages: nothing runs, nothing is loaded from elsewhere (inline styles and images)
FILE_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; sandbox"


# -- facts from the metadata DB -----------------------------------------------------------------


@dataclass(frozen=True)
class RunFacts:
    """One run as the reports pages need it: its state and conf, the report task's state and XCom, the validate
    tasks' XComs (task id -> value)."""

    dag_id: str
    run_id: str
    state: str | None
    run_type: str | None = None
    run_after: datetime | None = None
    start_date: datetime | None = None
    end_date: datetime | None = None
    conf: Mapping[str, Any] = field(default_factory=dict)  # Any: the run's conf, JSON of the DAG's Params
    report_state: str | None = None
    report_xcom: Any = None  # Any: the report task's XCom as stored (JSON), checked where read
    validation_xcoms: Mapping[str, Any] = field(default_factory=dict)  # Any: XComs as stored (JSON)


def _state(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def read_runs(dag_ids: Iterable[str], limit: int, run_id: str | None = None) -> list[RunFacts]:
    """The latest ``limit`` runs of ``dag_ids``, newest first (or only ``run_id``), from the metadata DB."""
    # The metadata DB's models: only the API server reads them; every Airflow process (scheduler, each task)
    # loads the plugin, so they are imported where a request is served.
    from airflow.models.dagrun import DagRun  # noqa: PLC0415 - see above
    from airflow.models.taskinstance import TaskInstance  # noqa: PLC0415 - see above
    from airflow.models.xcom import XComModel  # noqa: PLC0415 - see above
    from airflow.utils.session import create_session  # noqa: PLC0415 - see above
    from sqlalchemy import or_, select  # noqa: PLC0415 - see above

    dag_ids = list(dag_ids)
    if not dag_ids:
        return []
    with create_session(scoped=False) as session:
        query = select(DagRun).where(DagRun.dag_id.in_(dag_ids))
        if run_id is not None:
            query = query.where(DagRun.run_id == run_id)
        runs = list(session.scalars(query.order_by(DagRun.run_after.desc(), DagRun.id.desc()).limit(limit)))
        keys = {(r.dag_id, r.run_id) for r in runs}
        states: dict[tuple[str, str], str | None] = {}
        xcoms: dict[tuple[str, str], dict[str, Any]] = {k: {} for k in keys}
        if runs:
            run_ids = sorted({r.run_id for r in runs})
            for row in session.execute(
                    select(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.state)
                    .where(TaskInstance.dag_id.in_(dag_ids), TaskInstance.run_id.in_(run_ids),
                           TaskInstance.task_id == REPORT_TASK, TaskInstance.map_index == -1)):
                states[(row.dag_id, row.run_id)] = _state(row.state)
            for row in session.execute(
                    select(XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.value)
                    .where(XComModel.dag_id.in_(dag_ids), XComModel.run_id.in_(run_ids),
                           XComModel.key == "return_value", XComModel.map_index == -1,
                           or_(XComModel.task_id == REPORT_TASK, XComModel.task_id.like("%validate")))):
                if (row.dag_id, row.run_id) in keys and (row.task_id == REPORT_TASK or is_validation_task(row.task_id)):
                    # stored by the Task Execution API as JSON (or as a JSON string by XComModel.set): decoded alike
                    xcoms[(row.dag_id, row.run_id)][row.task_id] = XComModel.deserialize_value(row)
        return [RunFacts(dag_id=r.dag_id, run_id=r.run_id, state=_state(r.state), run_type=_state(r.run_type),
                         run_after=r.run_after, start_date=r.start_date, end_date=r.end_date,
                         conf=dict(r.conf or {}), report_state=states.get((r.dag_id, r.run_id)),
                         report_xcom=xcoms[(r.dag_id, r.run_id)].pop(REPORT_TASK, None),
                         validation_xcoms=xcoms[(r.dag_id, r.run_id)]) for r in runs]


def read_run(dag_id: str, run_id: str) -> RunFacts | None:
    """One run (None: Airflow has no such run)."""
    found = read_runs([dag_id], 1, run_id)
    return found[0] if found else None


# -- rules (pure) -------------------------------------------------------------------------------


def listed_dag_ids(dag_filter: str | None, readable: Callable[[str], bool]) -> list[str]:
    """The DAGs the list page reads: ``dag_filter`` alone when given (any DAG: a copy of a runbook under its own
    id too), else the provider's; only those ``readable(dag_id)`` allows."""
    candidates = [dag_filter] if dag_filter else list(PROVIDER_DAG_IDS)
    return [d for d in candidates if readable(d)]


def report_status(run: RunFacts) -> tuple[str, str]:
    """(key, sentence) of what the run has as a report, from its report task: ``written`` (files recorded),
    ``no_file`` (the task ran and wrote none), ``pending`` (not run yet), ``failed`` (failed without files)."""
    files = run.report_xcom.get("files") if isinstance(run.report_xcom, Mapping) else None
    if files:
        outcome = run.report_xcom.get("outcome")
        return "written", f"report written{f', outcome {outcome}' if outcome else ''}"
    state = run.report_state
    if state in ("success", "failed") and isinstance(run.report_xcom, Mapping):
        # the provider's report tasks leave out "files" only when no location was configured (report.finish)
        return "no_file", ("the report task ran but wrote no file: no artifact location was configured (the "
                           f"connection's artifacts_url or ${ARTIFACTS_ENV}); the report is in its log and XCom")
    if state in ("success", "failed") and run.report_xcom is not None:
        return "no_file", "the report task recorded no report folder; what it reported is in its log and XCom"
    if state == "failed":
        return "failed", "the report task failed before it recorded a report (see its log)"
    if state in (None, "scheduled", "queued", "running", "deferred", "up_for_retry", "up_for_reschedule",
                 "awaiting_input"):
        if run.state in FINISHED:
            return "no_file", f"the run ended ({run.state}) without running its report task"
        return "pending", ("the run has not reached its report task yet"
                           + (f" (report task {state})" if state else ""))
    return "no_file", f"the report task is {state}: it wrote no report"


def artifact_root() -> str | None:
    """The deployment's artifact location as the API server sees it (``$KIP848_ARTIFACTS_URL``)."""
    return os.environ.get(ARTIFACTS_ENV)


def run_folder(run: RunFacts) -> ReportFolder | None:
    """The run's report folder: recorded by its report task, else computed from the deployment's location (never
    from the run's conf: a run names no path)."""
    return report_folder(run.dag_id, run.run_id, report_xcom=run.report_xcom, root=artifact_root())


# -- Markdown (pure) ----------------------------------------------------------------------------

#: CommonMark with tables, raw HTML off: ``<script>`` in a group id or a broker message is shown as text
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")


def render_markdown(text: str, file_url: Callable[[str], str]) -> Markup:
    """``text`` (a report's Markdown) as HTML; images and links naming a file of the report folder by its plain
    name (``downtime.svg``) point at ``file_url(name)``; other links keep markdown-it's own checks (no
    ``javascript:``)."""
    env: dict[str, Any] = {}
    tokens = _markdown.parse(text, env)
    for token in tokens:
        for child in token.children or ():
            attr = "src" if child.type == "image" else "href" if child.type == "link_open" else None
            target = child.attrGet(attr) if attr else None
            if attr and isinstance(target, str):
                try:
                    child.attrSet(attr, file_url(check_name(target)))
                except ArtifactRefused:
                    pass  # not a file of the folder: a link elsewhere, left as markdown-it rendered it
    # Markup: markdown-it escaped every text and attribute (raw HTML off), the template must not escape it again
    return Markup(_markdown.renderer.render(tokens, _markdown.options, env))


# -- the pages ----------------------------------------------------------------------------------


def _root(request: Request) -> str:
    """Where this app is mounted (``/kip848-reports`` under the API server's root path)."""
    return (request.scope.get("root_path", "") or "").rstrip("/")


def _ui_base(request: Request) -> str:
    """The Airflow UI's base path, for links into it."""
    return _root(request).removesuffix(URL_PREFIX).rstrip("/") + "/"


def _q(value: str) -> str:
    return quote(value, safe="")


def run_urls(request: Request, dag_id: str, run_id: str) -> dict[str, str]:
    root, ui = _root(request), _ui_base(request)
    page = f"{root}/{_q(dag_id)}/{_q(run_id)}"
    return {"page": page, "files": f"{page}/files/", "validation": f"{page}/validation/",
            "run": f"{ui}dags/{_q(dag_id)}/runs/{_q(run_id)}",
            "report_task": f"{ui}dags/{_q(dag_id)}/runs/{_q(run_id)}/tasks/{REPORT_TASK}",
            "list": f"{root}/?{urlencode({'dag_id': dag_id})}", "all": f"{root}/"}


def _when(value: datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def _row(request: Request, run: RunFacts) -> dict[str, Any]:
    key, sentence = report_status(run)
    outcome = run.report_xcom.get("outcome") if isinstance(run.report_xcom, Mapping) else None
    return {"dag_id": run.dag_id, "run_id": run.run_id, "state": run.state or "none", "run_type": run.run_type,
            "when": _when(run.run_after), "report": key, "report_text": sentence, "outcome": outcome,
            "urls": run_urls(request, run.dag_id, run.run_id)}


def _list_page(request: Request, user: BaseUser, dag_id: str | None, limit: int) -> tuple[int, str]:
    if dag_id:
        require_dag_reader(user, dag_id, "the reports page")
    dag_ids = listed_dag_ids(dag_id, lambda d: not refused_access(user, d))
    runs = read_runs(dag_ids, limit)
    active = any(r.state not in FINISHED for r in runs)
    return status.HTTP_200_OK, render(
        "reports.html", refresh_seconds=REFRESH_SECONDS if active else None, dag_id=dag_id or "", limit=limit,
        max_runs=MAX_RUNS, dag_ids=dag_ids, provider_dag_ids=PROVIDER_DAG_IDS, rows=[_row(request, r) for r in runs],
        root=_root(request))


def _report_page(request: Request, dag_id: str, run_id: str) -> tuple[int, str]:
    urls = run_urls(request, dag_id, run_id)
    run = read_run(dag_id, run_id)
    context: dict[str, Any] = {"dag_id": dag_id, "run_id": run_id, "urls": urls, "run": None, "error": None,
                               "absent": None, "folder": None, "files": [], "validations": [], "body": None}
    if run is None:
        context["absent"] = f"Airflow has no run {run_id!r} of DAG {dag_id!r}."
        return status.HTTP_404_NOT_FOUND, render("report.html", **context)
    key, sentence = report_status(run)
    context["run"] = _row(request, run)
    context["validations"] = sorted(validation_pages(run.validation_xcoms))
    refresh = REFRESH_SECONDS if run.state not in FINISHED else None
    folder = run_folder(run)
    if folder is None:
        context["absent"] = (f"No report for this run: {sentence}." if key != "written" else
                             "The report task recorded files, but no folder could be derived from them.")
        return status.HTTP_200_OK, render("report.html", refresh_seconds=refresh, **context)
    context["folder"] = {"location": shown_location(folder.location), "source": folder.source}
    try:
        context["files"] = list_artifacts(folder.location)
        markdown = (storage.read_text(artifact_location(folder.location, REPORT_MARKDOWN))
                    if REPORT_MARKDOWN in context["files"] else None)
    except (ArtifactUnwritable, ArtifactRefused) as exc:
        context["error"] = f"The report folder of this run could not be read: {exc}"
        return status.HTTP_502_BAD_GATEWAY, render("report.html", refresh_seconds=refresh, **context)
    if markdown is None:
        if key == "written" and folder.source != COMPUTED:
            context["error"] = (f"The report task recorded a report in {shown_location(folder.location)}, but there "
                                f"is no {REPORT_MARKDOWN} there (moved or deleted, or a location this API server "
                                "does not see).")
            return status.HTTP_502_BAD_GATEWAY, render("report.html", refresh_seconds=refresh, **context)
        context["absent"] = f"No report for this run: {sentence}."
        return status.HTTP_200_OK, render("report.html", refresh_seconds=refresh, **context)
    context["body"] = render_markdown(markdown, lambda name: urls["files"] + _q(name))
    return status.HTTP_200_OK, render("report.html", refresh_seconds=refresh, **context)


def _file_response(text: str, media: str) -> Response:
    return Response(text, media_type=media, headers={"Content-Security-Policy": FILE_CSP,
                                                     "X-Content-Type-Options": "nosniff",
                                                     "Cache-Control": "no-store"})


def _readable_run(user: BaseUser, dag_id: str, run_id: str) -> RunFacts:
    require_dag_reader(user, dag_id, "the report page")
    run = read_run(dag_id, run_id)
    if run is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"Airflow has no run {run_id!r} of DAG {dag_id!r}")
    return run


# -- the app ------------------------------------------------------------------------------------

UserDep = Annotated[Any, Depends(signed_in_user)]
DagFilterQuery = Annotated[str | None, Query(description="only this DAG's runs")]
LimitQuery = Annotated[int, Query(ge=1, le=MAX_RUNS, description="runs, newest first")]

app = FastAPI(title="Kafka change reports (airflow-provider-kip848)", docs_url=None, redoc_url=None,
              openapi_url=None)


@app.get("/", response_class=HTMLResponse)
def reports_list(request: Request, user: UserDep, dag_id: DagFilterQuery = None,
                 limit: LimitQuery = DEFAULT_RUNS) -> HTMLResponse:
    """The latest runs of the provider's DAGs the user may read, each linking to its report."""
    code, page = _list_page(request, user, dag_id or None, limit)
    return HTMLResponse(page, status_code=code)


@app.get("/{dag_id}/{run_id}", response_class=HTMLResponse)
def report_page(request: Request, user: UserDep, dag_id: str, run_id: str) -> HTMLResponse:
    """One run's report (or why it has none; an error banner when its folder cannot be read)."""
    require_dag_reader(user, dag_id, "the report page")
    code, page = _report_page(request, dag_id, run_id)
    return HTMLResponse(page, status_code=code)


@app.get("/{dag_id}/{run_id}/files/{name}")
def report_file(user: UserDep, dag_id: str, run_id: str, name: str) -> Response:
    """One file of the run's report folder, by its plain name (400 for anything else, 404 when absent)."""
    run = _readable_run(user, dag_id, run_id)
    folder = run_folder(run)
    try:
        check_name(name)
        if folder is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "this run has no report folder")
        location = artifact_location(folder.location, name)
        if not storage.exists(location):
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no file {name!r} in this run's report folder")
        return _file_response(storage.read_text(location), media_type(name))
    except ArtifactRefused as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from exc
    except ArtifactUnwritable as exc:
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(exc)) from exc


@app.get("/{dag_id}/{run_id}/validation/{task_id}")
def validation_page(user: UserDep, dag_id: str, run_id: str, task_id: str) -> Response:
    """The validation page a validate task of the run recorded, sandboxed (404 when it recorded none)."""
    run = _readable_run(user, dag_id, run_id)
    page = validation_pages(run.validation_xcoms).get(task_id)
    if page is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"task {task_id!r} of this run recorded no validation page")
    try:
        return _file_response(storage.read_text(page), media_type(page))
    except ArtifactUnwritable as exc:
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(exc)) from exc


class ReportsPlugin(AirflowPlugin):
    """The reports pages: the app under ``/kip848-reports`` and its entry in the UI's navigation."""

    name = "kip848_reports"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Kafka change reports (KIP-848 / KIP-1071)"}]
    external_views = [{
        "name": "Kafka change reports",
        # relative: resolved against the UI's base URL, so it works behind a path prefix too
        "href": f"{URL_PREFIX.lstrip('/')}/",
        "url_route": UI_ROUTE,
        "destination": "nav",
        "category": "browse",
    }]


__all__ = ["FILE_CSP", "UI_ROUTE", "URL_PREFIX", "ReportsPlugin", "RunFacts", "app", "listed_dag_ids", "read_run",
           "read_runs", "render_markdown", "report_status", "run_folder"]

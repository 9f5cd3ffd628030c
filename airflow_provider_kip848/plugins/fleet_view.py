"""The fleet view: every group of a cluster by type, state, owner and readiness, as pages of the Airflow UI.

An Airflow 3 plugin (:class:`FleetViewPlugin`) that the API server mounts at ``/kip848``:

* ``GET /kip848/fleet``: an HTML page with the counts by type, state and readiness of each migration, and
  every group in a table grouped by type and state (members, lag, its application and team from the ownership
  map, a readiness badge per migration with its reason, links into the Airflow UI and to the fleet runs that
  move it), filtered on the server by application, team, readiness, type and state;
* ``GET /kip848/fleet.json``: the same summary as JSON (:mod:`.fleet_data` reads and summarises it);
* ``GET /kip848/runs``: the latest runs of the fleet migration DAG (``kip848_fleet_migration``), or those whose
  plan moves one group (``group_id``): per run its plan's waves, each wave's status, and per application and
  group its progress (the mapped task instance's state, the step its move is in, its result, its rollback),
  with links to the task instances in the Airflow UI and to the run's report;
* ``GET /kip848/runs.json``: the same as JSON (:mod:`.fleet_runs` summarises what :mod:`.run_facts` reads).

The HTML comes from Jinja2 templates (``plugins/templates/fleet_view.html``, ``fleet_runs.html``) extending the
plugin pages' frame (``base.html``, rendered by :mod:`.pages`: autoescape, dark mode following Airflow's
theme, and the reload while something moves): the fleet page reloads every :data:`FLEET_REFRESH_S` s while a
run of the provider's DAGs is queued or running, the runs page every :data:`RUNS_REFRESH_S` s while one of the
runs it shows is; neither reloads once none is.

The fleet pages take ``conn_id`` (a ``kafka_admin`` connection, default ``kafka_admin_default``), optionally
``group_ids`` (comma-separated: only those groups; given but empty: a 400, never every group), ``timeout_s``,
``ownership_variable`` (the Variable holding the ownership map, default ``kip848_ownership_map``: the fleet
DAG's) and the filters ``app``, ``team``, ``readiness``, ``type``, ``state`` (empty: any; a readiness, type or
state that no group can have: a 400). A cluster that does not answer is an error banner with its message (HTTP
502), never an empty fleet; a fact that could not be read is shown as ``unknown``.

The runs pages take ``dag_id`` (default ``kip848_fleet_migration``), ``limit`` (runs, newest first, default
5) and optionally ``run_id`` (that run only) and ``group_id`` (the runs whose plan moves it). Their facts come
from Airflow's metadata DB, read in the API server's process with Airflow's own models: no cluster is read.

The UI entries are external views in the navigation: "Kafka fleet" (the Airflow UI shows the page in a
frame under ``/plugin/kip848-fleet``) and "Fleet migration runs" (``/plugin/kip848-fleet-runs``); each page
links to the other.

Authentication: Airflow does not protect plugin apps. Every request here goes through the same
check as the REST API (the JWT of the ``Authorization: Bearer`` header or of the UI's session
cookie, resolved by the API server's ``get_user``), and the user must be allowed to read the
connection (``is_authorized_connection(GET)``): the page reads the cluster with that connection's
credentials. The owners are read only when the user may also read the ownership map's Variable
(``is_authorized_variable(GET)``); otherwise they show ``unknown`` and the page says why. The runs pages need
instead the permission to read the DAG's runs, task instances and XComs (``is_authorized_dag(GET)`` for each of
these access entities, with the DAG's team). Without a valid token: 401; without the permission: 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.hooks.ownership import DEFAULT_OWNERSHIP_VARIABLE
from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.plugins.auth import require_dag_reader, signed_in_user
from airflow_provider_kip848.plugins.fleet_data import (
    FILTER_NAMES,
    FILTERS,
    MIGRATION_DAGS,
    PROVIDER_DAGS,
    READINESS_ORDER,
    UNOWNED,
    URL_PREFIX,
    error_summary,
    filter_query,
    fleet_summary,
    group_ids_param,
    group_links,
    read_fleet,
)
from airflow_provider_kip848.plugins.fleet_runs import FLEET_DAG_ID, read_runs, runs_summary
from airflow_provider_kip848.plugins.pages import render
from airflow_provider_kip848.plugins.run_facts import count_active_runs

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

#: the external views' routes in the UI (``/plugin/<route>``)
UI_ROUTE = "kip848-fleet"
RUNS_UI_ROUTE = "kip848-fleet-runs"
#: runs on the runs page: by default, at most
DEFAULT_RUNS, MAX_RUNS = 5, 50
#: seconds between reloads while a run is active: the fleet page reads the cluster each time (one batched
#: inventory), the runs page only the metadata DB
FLEET_REFRESH_S, RUNS_REFRESH_S = 30, 10
UNKNOWN = "unknown"


# -- the pages (pure) ---------------------------------------------------------------------------


def _state(state: str) -> str:
    return UNKNOWN if state == GroupState.UNKNOWN.value else state


def _sections(groups: list[dict[str, Any]]) -> list[tuple[tuple[str, str], list[dict[str, Any]]]]:
    """The groups by (type, state), each with the text the narrowing box searches."""
    sections: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for g in sorted(groups, key=lambda g: (g["type"], _state(g["state"]), g["group_id"])):
        owner = g["owner"]
        names = [owner["app"], owner["team"], *(c["app"] for c in owner["claims"]), owner["status"]]
        search = " ".join([g["group_id"], g["type"], _state(g["state"]), *(n for n in names if n),
                           *(v["readiness"] for v in g["verdicts"])]).lower()
        sections.setdefault((g["type"], _state(g["state"])), []).append({**g, "search": search})
    return list(sections.items())


def _filter_options(summary: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """Each filter's choices: the ownership map's applications and teams (and unowned), the verdicts, the types
    and states a group can have."""
    ownership = summary["ownership"]
    return [("app", [*ownership["apps"], UNOWNED]), ("team", [*ownership["teams"], UNOWNED]),
            ("readiness", READINESS_ORDER), ("type", [t.value for t in GroupType]),
            ("state", sorted({_state(s.value) for s in GroupState}))]


def render_page(summary: dict[str, Any],  # Any: fleet_data.fleet_summary's JSON
                *, group_ids: str | None = None, refresh_seconds: int | None = None,
                ownership_variable: str = DEFAULT_OWNERSHIP_VARIABLE) -> str:
    """The fleet page for a :func:`~.fleet_data.fleet_summary` (or an :func:`~.fleet_data.error_summary`: the
    error banner only). ``group_ids``, ``ownership_variable``: the page's own parameters, kept by its forms."""
    ok = summary.get("error") is None
    variable = summary["ownership"]["variable"] if ok else ownership_variable
    return render("fleet_view.html", refresh_seconds=refresh_seconds, summary=summary, current="fleet",
                  ownership_variable=variable,
                  readiness_order=READINESS_ORDER, filter_names=FILTER_NAMES, group_ids=group_ids,
                  sections=_sections(summary["groups"]) if ok else [],
                  filter_options=_filter_options(summary) if ok else [],
                  clear_query=filter_query({}, conn_id=summary["conn_id"], group_ids=group_ids,
                                           ownership_variable=variable))


def render_runs_page(summary: dict[str, Any], *, refresh_seconds: int | None = None) -> str:  # Any: runs JSON
    """The fleet runs page for a :func:`~.fleet_runs.runs_summary` (or an error: the banner only)."""
    return render("fleet_runs.html", refresh_seconds=refresh_seconds, summary=summary, current="runs",
                  limit=DEFAULT_RUNS, max_runs=MAX_RUNS)


# -- the app ------------------------------------------------------------------------------------

async def authorized_user(user: Annotated[Any, Depends(signed_in_user)],  # Any: FastAPI reads it at runtime
                          conn_id: Annotated[str, Query()] = DEFAULT_CONN_ID) -> BaseUser:
    """The signed-in user (the REST API's own check: bearer token or the UI's cookie), allowed to read
    ``conn_id``; 401 without a valid token, 403 without the permission."""
    # The API server's auth manager: imported where a request is served (plugins/auth.py says why).
    from airflow.api_fastapi.app import get_auth_manager  # noqa: PLC0415 - see above
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails  # noqa: PLC0415

    if not get_auth_manager().is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=conn_id),
                                                       user=user):
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"Forbidden: the fleet view reads the cluster with connection {conn_id!r}, "
                            "which this user may not read")
    return user


async def authorized_dag_reader(user: Annotated[Any, Depends(signed_in_user)],  # Any: as authorized_user
                                dag_id: Annotated[str, Query()] = FLEET_DAG_ID) -> BaseUser:
    """The signed-in user, allowed to read ``dag_id``'s runs, task instances and XComs (``is_authorized_dag(GET)``
    for each, with the DAG's team, as the REST API checks them: :func:`~.auth.require_dag_reader`); 401 without
    a valid token, 403 without the permission."""
    require_dag_reader(user, dag_id, "the fleet runs view")
    return user


def _ui_base(request: Request) -> str:
    """The Airflow UI's base path, from where the API server mounted this app."""
    root = request.scope.get("root_path", "") or ""
    return root.removesuffix(URL_PREFIX).rstrip("/") + "/"


def may_read_variable(user: BaseUser, key: str) -> bool:
    """Whether ``user`` may read the Airflow Variable ``key`` (``is_authorized_variable(GET)``, as the REST API
    checks it): the owners come from the ownership map's Variable."""
    from airflow.api_fastapi.app import get_auth_manager  # noqa: PLC0415 - see plugins/auth.py
    from airflow.api_fastapi.auth.managers.models.resource_details import VariableDetails  # noqa: PLC0415

    return bool(get_auth_manager().is_authorized_variable(method="GET", details=VariableDetails(key=key), user=user))


def _active_runs() -> int | None:
    """Runs of the provider's DAGs queued or running (None: the metadata DB did not answer: no reload)."""
    from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415 - with the models, where a request is served

    try:
        return count_active_runs(PROVIDER_DAGS)
    except SQLAlchemyError:
        return None


def read_fleet_runs(dag_id: str, limit: int, run_id: str | None, ui_base: str,
                    group_id: str | None = None) -> tuple[int, dict[str, Any]]:  # Any: the runs page's JSON
    """(HTTP status, summary) of the latest runs of ``dag_id`` (``group_id``: those whose plan moves it): 200,
    or 503 with the error when the metadata DB could not be read."""
    from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415 - with the models, where a request is served

    try:
        dag_exists, runs = read_runs(dag_id, limit, run_id, group_id=group_id)
    except SQLAlchemyError as exc:
        return status.HTTP_503_SERVICE_UNAVAILABLE, {"dag_id": dag_id, "limit": limit, "run_id": run_id,
                                                     "group_id": group_id, "error": str(exc),
                                                     "error_type": type(exc).__name__, "runs": None}
    return status.HTTP_200_OK, runs_summary(dag_id, dag_exists, runs, ui_base, limit=limit, run_id=run_id,
                                            group_id=group_id)


UserDep = Annotated[Any, Depends(authorized_user)]
DagReaderDep = Annotated[Any, Depends(authorized_dag_reader)]
DagIdQuery = Annotated[str, Query(description="the fleet migration DAG")]
LimitQuery = Annotated[int, Query(ge=1, le=MAX_RUNS, description="runs, newest first")]
RunIdQuery = Annotated[str | None, Query(description="only this run")]
GroupIdQuery = Annotated[str | None, Query(description="only the runs whose plan moves this group")]
ConnIdQuery = Annotated[str, Query(description="a kafka_admin connection")]
GroupIdsQuery = Annotated[str | None, Query(description="comma-separated group ids (default: every group)")]
TimeoutQuery = Annotated[float | None, Query(gt=0, le=600, description="seconds (default: the connection's)")]
VariableQuery = Annotated[str, Query(min_length=1, description="the Variable holding the ownership map")]
FilterQuery = Annotated[str | None, Query(description="only the groups with this value (empty: any)")]

app = FastAPI(title="Kafka fleet (airflow-provider-kip848)", docs_url=None, redoc_url=None, openapi_url=None)


def _fleet(request: Request, user: Any, conn_id: str, group_ids: str | None, timeout_s: float | None,
           ownership_variable: str, filters: dict[str, str | None]) -> tuple[int, dict[str, Any]]:
    return read_fleet(conn_id, group_ids_param(group_ids), timeout_s, _ui_base(request), filters=filters,
                      ownership_variable=ownership_variable,
                      may_read_ownership=may_read_variable(user, ownership_variable), active_runs=_active_runs())


@app.get("/fleet.json")
def fleet_json(request: Request, user: UserDep, conn_id: ConnIdQuery = DEFAULT_CONN_ID,
               group_ids: GroupIdsQuery = None, timeout_s: TimeoutQuery = None,
               ownership_variable: VariableQuery = DEFAULT_OWNERSHIP_VARIABLE, app: FilterQuery = None,
               team: FilterQuery = None, readiness: FilterQuery = None, type: FilterQuery = None,  # noqa: A002
               state: FilterQuery = None) -> JSONResponse:
    """The fleet summary as JSON (``error`` set, with an HTTP error status, when there is none)."""
    filters = {"app": app, "team": team, "readiness": readiness, "type": type, "state": state}
    code, summary = _fleet(request, user, conn_id, group_ids, timeout_s, ownership_variable, filters)
    return JSONResponse(summary, status_code=code)


@app.get("/fleet", response_class=HTMLResponse)
def fleet_page(request: Request, user: UserDep, conn_id: ConnIdQuery = DEFAULT_CONN_ID,
               group_ids: GroupIdsQuery = None, timeout_s: TimeoutQuery = None,
               ownership_variable: VariableQuery = DEFAULT_OWNERSHIP_VARIABLE, app: FilterQuery = None,
               team: FilterQuery = None, readiness: FilterQuery = None, type: FilterQuery = None,  # noqa: A002
               state: FilterQuery = None) -> HTMLResponse:
    """The fleet page (an error banner, with an HTTP error status, when the cluster could not be read); it
    reloads itself while a run of the provider's DAGs is active."""
    filters = {"app": app, "team": team, "readiness": readiness, "type": type, "state": state}
    code, summary = _fleet(request, user, conn_id, group_ids, timeout_s, ownership_variable, filters)
    refresh = FLEET_REFRESH_S if summary.get("active_runs") else None
    return HTMLResponse(render_page(summary, group_ids=group_ids, refresh_seconds=refresh,
                                    ownership_variable=ownership_variable), status_code=code)


@app.get("/runs.json")
def runs_json(request: Request, user: DagReaderDep, dag_id: DagIdQuery = FLEET_DAG_ID,
              limit: LimitQuery = DEFAULT_RUNS, run_id: RunIdQuery = None,
              group_id: GroupIdQuery = None) -> JSONResponse:
    """The latest runs of the fleet migration DAG as JSON: waves, their status, each application's progress."""
    code, summary = read_fleet_runs(dag_id, limit, run_id, _ui_base(request), group_id)
    return JSONResponse(summary, status_code=code)


@app.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, user: DagReaderDep, dag_id: DagIdQuery = FLEET_DAG_ID,
              limit: LimitQuery = DEFAULT_RUNS, run_id: RunIdQuery = None,
              group_id: GroupIdQuery = None) -> HTMLResponse:
    """The fleet runs page; it reloads itself while one of the runs it shows is queued or running."""
    code, summary = read_fleet_runs(dag_id, limit, run_id, _ui_base(request), group_id)
    refresh = RUNS_REFRESH_S if summary.get("active") else None
    return HTMLResponse(render_runs_page(summary, refresh_seconds=refresh), status_code=code)


class FleetViewPlugin(AirflowPlugin):
    """The fleet view: the app under ``/kip848`` and its entry in the UI's navigation."""

    name = "kip848_fleet_view"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Kafka fleet (KIP-848 / KIP-1071)"}]
    external_views = [{
        "name": "Kafka fleet",
        # relative: resolved against the UI's base URL, so it works behind a path prefix too
        "href": f"{URL_PREFIX.lstrip('/')}/fleet",
        "url_route": UI_ROUTE,
        "destination": "nav",
        "category": "browse",
    }, {
        # not "Kafka fleet ...": a viewer, who may not open the fleet page, may follow its runs
        "name": "Fleet migration runs",
        "href": f"{URL_PREFIX.lstrip('/')}/runs",
        "url_route": RUNS_UI_ROUTE,
        "destination": "nav",
        "category": "browse",
    }]


__all__ = ["FILTERS", "FLEET_REFRESH_S", "MIGRATION_DAGS", "RUNS_REFRESH_S", "RUNS_UI_ROUTE", "UI_ROUTE", "URL_PREFIX",
           "FleetViewPlugin", "app", "authorized_dag_reader", "authorized_user", "error_summary", "fleet_summary",
           "group_links", "may_read_variable", "read_fleet", "read_fleet_runs", "render_page", "render_runs_page"]

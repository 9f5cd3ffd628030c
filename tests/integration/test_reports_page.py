"""The reports pages (plugins/reports.py), served by Airflow's own API app with the REST API's own tokens.

Runs of a stand-in DAG (a ``validate`` and a ``report`` task, as the provider's DAGs have) are written to the
test session's Airflow DB with the XComs their tasks record, and their report folders to disk as the report
task writes them: a report with a chart and a validation page, a run still running, a recorded folder that
cannot be read, a folder computed from the deployment's artifact location (never from the run's conf: a
``report_dir`` it still carries is not read). The pages render them, serve their files by
plain name only, and refuse requests without a token (401) and users who may not read the DAG (403).
"""

from __future__ import annotations

import os
import tomllib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from airflow_provider_kip848.changecontrol.run_artifacts import report_page_path
from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV, run_location
from airflow_provider_kip848.operators.report_link import ReportLink, with_report_link
from airflow_provider_kip848.plugins.reports import FILE_CSP, URL_PREFIX, ReportsPlugin

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "kip848_reports_page_test"
GROUP = "orders-<script>alert(1)</script>-app"
SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><rect width='10' height='10'/></svg>"


@pytest.fixture(scope="module")
def api(airflow_db):
    """Airflow's API app (UI, REST API, plugins, auth manager) with real users, as in test_fleet_view.py."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient
    from starlette.routing import Mount

    from airflow_provider_kip848.plugins import docs
    from airflow_provider_kip848.plugins.reports import app as reports_app

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
        app = create_app("core")
        for prefix, plugin_app in ((URL_PREFIX, reports_app), (docs.URL_PREFIX, docs.app)):
            if not any(getattr(r, "path", None) == prefix for r in app.routes):
                # a venv whose editable install predates the plugin's entry point (its metadata is read at install
                # time): mounted where the API server mounts plugin apps, before the UI's catch-all route; the
                # deploy tier installs the wheel and finds it by its entry point
                app.router.routes.insert(0, Mount(prefix, app=plugin_app))
        manager = get_auth_manager()
        tokens = {role: manager.generate_jwt(SimpleAuthManagerUser(username=f"{role}-user", role=role))
                  for role in ("admin", "viewer")}
        tokens["nobody"] = manager.generate_jwt(SimpleAuthManagerUser(username="nobody", role=None))
        yield TestClient(app), tokens


def _get(api, path: str, role: str | None = "admin", **params):
    client, tokens = api
    headers = {"Authorization": f"Bearer {tokens[role]}"} if role else {}
    return client.get(f"{URL_PREFIX}{path}", params=params, headers=headers)


@pytest.fixture(scope="module")
def stand_in(airflow_db):
    """The stand-in DAG, serialized in the test DB; deleted (with its runs) afterwards."""
    from airflow.api.common.delete_dag import delete_dag
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.models.dagbag import DBDagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.sdk import DAG, task
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with DAG(DAG_ID, schedule=None, start_date=datetime(2025, 1, 1, tzinfo=UTC), catchup=False) as dag:
        @task(task_id="validate")
        def validate():
            return {}

        @task(task_id="report", trigger_rule="all_done")
        def report():
            return {}

        validate() >> with_report_link(report())
    DagBundlesManager().sync_bundles_to_db()
    with create_session() as session:
        update_dag_parsing_results_in_db("test-dags", None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(),
                                         session=session)
    with create_session() as session:
        sdag = DBDagBag().get_latest_version_of_dag(DAG_ID, session=session)
    yield sdag
    with create_session() as session:
        # delete_dag refuses a DAG with running task instances (run B's)
        session.execute(update(TaskInstance).where(TaskInstance.dag_id == DAG_ID).values(state=None))
    with create_session() as session:
        delete_dag(DAG_ID, session=session)


def _make_run(sdag, run_id: str, run_after: datetime, state: str, tis: dict, xcoms: dict, conf=None) -> None:
    """A run with these task states and return-value XComs, stored as the Task Execution API stores them."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType
    from sqlalchemy import select

    with create_session() as session:
        run = sdag.create_dagrun(run_id=run_id, run_after=run_after, logical_date=None, run_type=DagRunType.MANUAL,
                                 triggered_by=DagRunTriggeredByType.TEST, triggering_user_name="reports-test",
                                 state=DagRunState.RUNNING, start_date=run_after, conf=conf or {}, session=session)
        session.flush()
        existing = {ti.task_id: ti for ti in session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id))}
        for task_id, ti_state in tis.items():
            existing[task_id].state = ti_state
        run.state = state
        session.flush()
        for task_id, value in xcoms.items():
            XComModel.set("return_value", value, dag_id=DAG_ID, task_id=task_id, run_id=run_id, map_index=-1,
                          serialize=False, session=session)
        if tis.get("report") in ("success", "failed"):  # what the task runner pushes when the task ends
            XComModel.set(ReportLink().xcom_key, report_page_path(DAG_ID, run_id), dag_id=DAG_ID, task_id="report",
                          run_id=run_id, map_index=-1, serialize=False, session=session)


def _report_folder(folder: Path, markdown: str) -> dict:
    folder.mkdir(parents=True)
    (folder / "report.md").write_text(markdown)
    (folder / "report.json").write_text('{"outcome": "migrated"}\n')
    (folder / "downtime.svg").write_text(SVG)
    return {"outcome": "migrated", "title": "t", "files": {"markdown": str(folder / "report.md"),
                                                          "json": str(folder / "report.json"),
                                                          "downtime_chart": str(folder / "downtime.svg")}}


@pytest.fixture(scope="module")
def runs(stand_in, tmp_path_factory):
    """Four runs, oldest first: A with its report, chart and validation page; B running, before its report;
    C whose recorded report.md cannot be read; D with no XCom, its folder computed from the deployment's artifact
    location ($KIP848_ARTIFACTS_URL, the session's), while its conf names another folder (not read)."""
    tmp = tmp_path_factory.mktemp("reports")
    uid = uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    ids = {k: f"reports_{k}_{uid}" for k in "ABC"}
    ids["D"] = f"manual__{now.isoformat()}_{uid}"  # ':' and '+' as in Airflow's own run ids
    a = _report_folder(tmp / DAG_ID / ids["A"] / "report",
                       f"# Rolling upgrade of {GROUP}\n\n<b>broker said</b>: `<img src=x onerror=alert(1)>`\n\n"
                       "![group timeline](downtime.svg)\n\n[the JSON](report.json)\n")
    validation = tmp / DAG_ID / ids["A"] / "snapshots" / "validation" / "validation.html"
    validation.parent.mkdir(parents=True)
    validation.write_text("<html><body><h2>Wave: PASSED</h2><script>parent.document.title='x'</script></body></html>")
    (tmp / "secret.txt").write_text("not a report")
    (tmp / DAG_ID / ids["A"] / "report" / "leak.txt").symlink_to(tmp / "secret.txt")
    _make_run(stand_in, ids["A"], now - timedelta(hours=3), "success", {"validate": "success", "report": "success"},
              {"report": a, "validate": {"passed": True, "files": {"html": str(validation)}}})
    _make_run(stand_in, ids["B"], now - timedelta(hours=2), "running", {"validate": "running"}, {})
    c = tmp / DAG_ID / ids["C"] / "report"
    (c / "report.md").mkdir(parents=True)  # recorded, but not a file: unreadable
    _make_run(stand_in, ids["C"], now - timedelta(hours=1), "success", {"report": "success"},
              {"report": {"outcome": "changed", "files": {"markdown": str(c / "report.md")}}})
    _report_folder(Path(run_location(os.environ[ARTIFACTS_ENV], DAG_ID, ids["D"], "report")),
                   "# Computed\n\nfrom the artifact location\n")
    decoy = tmp / "named-by-the-run"  # a run's conf names no folder (issue 45.1): this one is never read
    _report_folder(Path(run_location(str(decoy), DAG_ID, ids["D"], "report")), "# Decoy\n\nfrom the run's conf\n")
    _make_run(stand_in, ids["D"], now, "failed", {"report": "failed"}, {}, conf={"report_dir": str(decoy)})
    return ids


def _page(run_id: str) -> str:
    return f"/{DAG_ID}/{quote(run_id, safe='')}"


def test_the_plugin_has_its_entry_point_and_nav_entry():
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["airflow.plugins"]
    assert eps["kip848_reports"] == "airflow_provider_kip848.plugins.reports:ReportsPlugin"
    (view,) = ReportsPlugin.external_views
    assert (view["name"], view["href"], view["url_route"], view["destination"]) == (
        "Kafka change reports", "kip848-reports/", "kip848-reports", "nav")
    assert ReportsPlugin.fastapi_apps[0]["url_prefix"] == "/kip848-reports"


def test_the_list_shows_runs_newest_first_with_their_reports(api, runs):
    page = _get(api, "/", dag_id=DAG_ID)
    assert page.status_code == 200, page.text
    order = [page.text.index(f'data-run-id="{runs[k]}"') for k in "DCBA"]
    assert order == sorted(order)
    assert f'href="{URL_PREFIX}{_page(runs["A"])}"' in page.text
    assert 'data-run-id="{}" data-report="written"'.format(runs["A"]) in page.text
    assert "not reached its report task" in page.text
    assert "refreshing every 15 s" in page.text  # B is running
    two = _get(api, "/", dag_id=DAG_ID, limit=2).text
    assert runs["D"] in two and runs["C"] in two and runs["B"] not in two
    # without a filter: the provider's DAGs only
    assert runs["A"] not in _get(api, "/").text
    assert _get(api, "/", limit=0).status_code == 422


def test_a_report_rendered_with_its_chart_files_and_validation_page(api, runs):
    page = _get(api, _page(runs["A"]))
    assert page.status_code == 200, page.text
    assert "<h1>Rolling upgrade of orders-&lt;script&gt;alert(1)&lt;/script&gt;-app</h1>" in page.text
    assert "&lt;b&gt;broker said&lt;/b&gt;" in page.text and "<script>alert(1)" not in page.text
    chart = f"{URL_PREFIX}{_page(runs['A'])}/files/downtime.svg"
    assert f'<img src="{chart}" alt="group timeline" />' in page.text
    for name in ("downtime.svg", "report.json", "report.md"):
        assert f'data-file="{name}"' in page.text
    svg = api[0].get(chart, headers={"Authorization": f"Bearer {api[1]['viewer']}"})
    assert svg.status_code == 200 and svg.text == SVG
    assert svg.headers["content-type"] == "image/svg+xml" and svg.headers["content-security-policy"] == FILE_CSP
    validation = _get(api, f"{_page(runs['A'])}/validation/validate")
    assert validation.status_code == 200 and "Wave: PASSED" in validation.text
    assert "sandbox" in validation.headers["content-security-policy"]
    assert "script-src" not in validation.headers["content-security-policy"]
    assert _get(api, f"{_page(runs['A'])}/validation/report").status_code == 404


@pytest.mark.parametrize("name", ["%2E%2E", ".env", "..%5Creport.md", "leak.txt", "report.md%00"])
def test_files_outside_the_folder_are_refused(api, runs, name):
    refused = _get(api, f"{_page(runs['A'])}/files/{name}")
    assert refused.status_code == 400, (name, refused.status_code, refused.text)
    assert "not a report" not in refused.text


def test_a_path_is_never_a_file_name(api, runs):
    for path in ("/files/..%2F..%2Fsecret.txt", "/files/../../secret.txt", "/files/sub/report.md"):
        response = _get(api, f"{_page(runs['A'])}{path}")
        assert response.status_code in (400, 404) and "not a report" not in response.text, path
    assert _get(api, f"{_page(runs['A'])}/files/nothing.svg").status_code == 404


def test_runs_without_a_report_or_with_an_unreadable_one_say_so(api, runs):
    running = _get(api, _page(runs["B"]))
    assert running.status_code == 200 and 'id="no-report"' in running.text
    assert "not reached its report task" in running.text and '<meta http-equiv="refresh" content="15">' in running.text
    unreadable = _get(api, _page(runs["C"]))
    assert unreadable.status_code == 502 and 'id="error"' in unreadable.text and "Report unreadable" in unreadable.text
    computed = _get(api, _page(runs["D"]))
    assert computed.status_code == 200 and "<h1>Computed</h1>" in computed.text and "Decoy" not in computed.text
    assert "computed from the artifact location" in computed.text and "refreshing every" not in computed.text
    unknown = _get(api, f"/{DAG_ID}/no-such-run")
    assert unknown.status_code == 404 and "has no run" in unknown.text


def test_unauthenticated_and_unauthorized_requests_are_refused(api, runs):
    paths = ("/", _page(runs["A"]), f"{_page(runs['A'])}/files/report.md", f"{_page(runs['A'])}/validation/validate")
    for path in paths:
        assert _get(api, path, role=None).status_code == 401, path
    for path in paths[1:]:
        refused = _get(api, path, role="nobody")
        assert refused.status_code == 403 and DAG_ID in refused.text, path
        assert _get(api, path, role="viewer").status_code == 200, path
    assert _get(api, "/", role="nobody", dag_id=DAG_ID).status_code == 403
    nothing = _get(api, "/", role="nobody")
    assert nothing.status_code == 200 and "may read none of these DAGs" in nothing.text


def test_the_documentation_asks_for_sign_in_as_the_reports_pages_do(api):
    """The plugin's docs (plugins/docs.py) are answered as the reports pages are: 401 without a session (no token,
    no cookie; 403 for a token Airflow did not sign), the page with one (the REST API's bearer token, or the UI's cookie); any
    signed-in user may read them, and a page that is not there stays a 404 once signed in."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    client, tokens = api
    pages = ("/kip848-docs/", "/kip848-docs/index.md", "/kip848-docs/deploy.md",
             "/kip848-docs/screenshots/trigger_form.png", "/kip848-docs/no-such-page.md")
    # no session: 401; a token that is not Airflow's: what Airflow answers (403), as the reports pages answer
    for headers, code in (({}, 401), ({"Authorization": "Bearer not-a-token"}, 403)):
        assert client.get(f"{URL_PREFIX}/", headers=headers).status_code == code
        for path in pages:
            refused = client.get(path, headers=headers, follow_redirects=False)
            assert refused.status_code == code, (path, headers, refused.status_code)
            assert "airflow-provider-kip848" not in refused.text and "<table>" not in refused.text
    for role in ("viewer", "nobody"):
        headers = {"Authorization": f"Bearer {tokens[role]}"}
        index = client.get("/kip848-docs/index.md", headers=headers)
        assert index.status_code == 200 and "<h1>airflow-provider-kip848</h1>" in index.text, role
        image = client.get("/kip848-docs/screenshots/trigger_form.png", headers=headers)
        assert image.status_code == 200 and image.headers["content-type"] == "image/png"
        assert client.get("/kip848-docs/no-such-page.md", headers=headers).status_code == 404
    redirect = client.get("/kip848-docs/", headers={"Authorization": f"Bearer {tokens['viewer']}"},
                          follow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["location"] == "/kip848-docs/index.md"
    client.cookies.set(COOKIE_NAME_JWT_TOKEN, tokens["viewer"])  # the UI's session, as a browser sends it
    try:
        assert "<table>" in client.get("/kip848-docs/deploy.md").text
    finally:
        client.cookies.clear()


def test_the_report_task_has_its_extra_link(api, runs):
    """The REST API the UI reads a task instance's extra links from (the link as the worker stored it)."""
    client, tokens = api
    links = client.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(runs['A'], safe='')}/taskInstances/report/links",
                       headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert links.status_code == 200, links.text
    assert links.json()["extra_links"] == {"Report": report_page_path(DAG_ID, runs["A"])}

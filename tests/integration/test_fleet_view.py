"""The fleet view plugin, served by Airflow's own API app (as the api-server builds it), on the real broker.

The plugin is found the way every deployment finds it (the package's ``airflow.plugins`` entry point),
mounted by ``create_app``, and called with the REST API's own tokens: its JSON counts equal what
``native.inventory()`` says about the test's groups, its page shows them, a request without a token is
refused, a user who may not read the connection is refused, and a cluster that does not answer is an
error banner, never an empty fleet.

The fleet runs view reads the fleet migration DAG's runs from the test session's Airflow DB: runs of
``kip848_fleet_migration`` (the stand-in below, with the DAG's task ids, unless the session already knows
a DAG of that id with those tasks), their task instances (mapped ones with their map indexes) and XComs
written as the Task Execution API writes them, from the records of ``fleet.results``.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from urllib.parse import quote

import pytest

from airflow_provider_kip848.fleet.budget import WaveVerdict
from airflow_provider_kip848.fleet.results import ApplicationResult, GroupOutcome, StepRecord, WaveRecord
from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.plugins.fleet_runs import FLEET_DAG_ID
from airflow_provider_kip848.plugins.fleet_view import URL_PREFIX, FleetViewPlugin, group_links
from kip848_harness.clients import ConsumerProcess, consume, create_topics, produce
from tests.conftest import set_kafka_connection, wait_until


@pytest.fixture(scope="module")
def api(airflow_db):
    """Airflow's API app with its core part (UI, REST API, plugins, auth manager), as the api-server has it,
    with real users (not the test session's everyone-is-admin mode, which signs every request in)."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
        app = create_app("core")
        manager = get_auth_manager()
        tokens = {role: manager.generate_jwt(SimpleAuthManagerUser(username=f"{role}-user", role=role))
                  for role in ("admin", "viewer")}
        # a signed-in user without a role: no permission at all
        tokens["nobody"] = manager.generate_jwt(SimpleAuthManagerUser(username="nobody", role=None))
        yield TestClient(app), tokens


def _get(api, path: str, role: str | None = "admin", **params):
    client, tokens = api
    headers = {"Authorization": f"Bearer {tokens[role]}"} if role else {}
    return client.get(f"{URL_PREFIX}{path}", params=params, headers=headers)


class _Rows(HTMLParser):
    """group id -> the text of its row in the page's table."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._current: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self._current = a.get("data-group") if "group" in (a.get("class") or "").split() else None
            if self._current:
                self.rows[self._current] = []

    def handle_data(self, data):
        if self._current and data.strip():
            self.rows[self._current].append(data.strip())


def test_the_plugin_is_registered_for_the_api_server_and_the_ui():
    from airflow import plugins_manager

    plugins, _ = plugins_manager._get_plugins()
    assert any(isinstance(p, FleetViewPlugin) for p in plugins)
    apps, _ = plugins_manager.get_fastapi_plugins()
    assert any(a["url_prefix"] == URL_PREFIX for a in apps)
    views, _ = plugins_manager._get_ui_plugins()
    view = next(v for v in views if v["url_route"] == "kip848-fleet")
    assert (view["destination"], view["href"]) == ("nav", "kip848/fleet")
    runs = next(v for v in views if v["url_route"] == "kip848-fleet-runs")
    assert (runs["destination"], runs["href"], runs["name"]) == ("nav", "kip848/runs", "Fleet migration runs")


def test_fleet_json_and_page_show_the_real_groups(api, kafka_conn, native, bootstrap, unique, tmp_path, monkeypatch):
    topic = unique("fleet")
    create_topics(bootstrap, {topic: 2})
    for partition in (0, 1):  # 10 records on each partition, so a group that read 15 has committed both
        produce(bootstrap, topic, (f"v{partition}-{i}" for i in range(10)), partition=partition)
    classic, consumer, live = unique("fleet-classic"), unique("fleet-consumer"), unique("fleet-live")
    consume(bootstrap, classic, [topic], 20, group_protocol="classic")  # Empty classic, lag 0
    # Empty consumer group, lag 5: 15 read means both partitions committed (at most 10 come from one), so the lag
    # over the committed partitions is 5 whatever order the records came in
    consume(bootstrap, consumer, [topic], 15, group_protocol="consumer")
    member = ConsumerProcess.start(bootstrap, live, [topic], protocol="classic", client_id="fleet-live-0",
                                   assignor="range", log_file=str(tmp_path / "live.log"))
    ours = [classic, consumer, live]
    try:
        wait_until(lambda: (d := native.describe_group(live)).state == "Stable" and len(d.members) == 1,
                   timeout=90, what="the live classic group is Stable with its member")
        # and done committing, so the two inventories below see the same offsets
        wait_until(lambda: native.inventory([live]).entries[0].lag == 0, timeout=90,
                   what="the live member has committed every record")
        expected = native.inventory(ours)
        assert expected.complete and {e.group_id for e in expected.entries} == set(ours)

        response = _get(api, "/fleet.json", conn_id=kafka_conn, group_ids=",".join(ours))
        assert response.status_code == 200, response.text
        got = response.json()
        assert got["error"] is None and got["conn_id"] == kafka_conn and got["group_count"] == 3
        assert got["by_type"] == dict(Counter(e.type.value for e in expected.entries))
        assert got["by_state"] == dict(Counter(e.state.value for e in expected.entries))
        assert got["readiness"] == expected.readiness_counts()
        assert got["by_type_state"] == {"classic": {"Empty": 1, "Stable": 1}, "consumer": {"Empty": 1}}
        rows = {g["group_id"]: g for g in got["groups"]}
        for e in expected.entries:
            row = rows[e.group_id]
            assert (row["type"], row["state"], row["members"], row["lag"]) == (
                e.type.value, e.state.value, e.member_count, e.lag)
            assert [(v["migration"], v["readiness"]) for v in row["verdicts"]] == [
                (v.migration, v.readiness.value) for v in e.verdicts]
            assert row["links"] == group_links(e, "/")
        assert (rows[live]["type"], rows[live]["state"], rows[live]["members"]) == ("classic", "Stable", 1)
        assert rows[consumer]["lag"] == 5 and rows[classic]["lag"] == 0
        assert rows[live]["links"]["runs"] == f"/dag_runs?conf_contains=%22{live}%22"
        assert rows[live]["links"]["dags"]["classic_to_consumer"]["dag_id"] == "kip848_consumer_rolling_upgrade"

        # owners from the ownership map's Variable (here from the environment's secrets backend), as the fleet DAG
        # reads it: the first matching rule, unowned when none matches, both applications when two claim a group
        monkeypatch.setenv("AIRFLOW_VAR_KIP848_TEST_OWNERS", json.dumps({"rules": [
            {"prefix": classic, "app": "billing", "team": "finance"},
            {"prefix": consumer, "app": "orders", "team": "commerce"},
            {"regex": f"{consumer}|{live}", "app": "audit", "team": "finance"}]}))
        owned = _get(api, "/fleet.json", conn_id=kafka_conn, group_ids=",".join(ours),
                     ownership_variable="kip848_test_owners").json()
        owners = {g["group_id"]: g["owner"] for g in owned["groups"]}
        assert (owners[classic]["app"], owners[classic]["team"], owners[classic]["conflict"]) == (
            "billing", "finance", False)
        assert owners[consumer]["conflict"] and [c["app"] for c in owners[consumer]["claims"]] == ["orders", "audit"]
        assert owned["ownership"]["conflicts"] == [consumer] and owners[live]["app"] == "audit"
        finance = _get(api, "/fleet.json", conn_id=kafka_conn, group_ids=",".join(ours), team="finance",
                       ownership_variable="kip848_test_owners").json()
        assert sorted(g["group_id"] for g in finance["groups"]) == sorted(ours)  # audit claims the consumer too
        nobody = _get(api, "/fleet", conn_id=kafka_conn, group_ids=",".join(ours), team="nobody",
                      ownership_variable="kip848_test_owners")
        assert nobody.status_code == 200 and "No group matches team &#39;nobody&#39;." in nobody.text
        parsed_nobody = _Rows()
        parsed_nobody.feed(nobody.text)
        assert parsed_nobody.rows == {}  # never every group
        assert _get(api, "/fleet.json", conn_id=kafka_conn, group_ids=classic, state="Sleeping").status_code == 400
        # no such Variable: the owners are unknown and the page says why, the groups are still shown
        unread = _get(api, "/fleet.json", conn_id=kafka_conn, group_ids=classic,
                      ownership_variable="kip848_no_such_variable").json()
        assert unread["groups"][0]["owner"]["status"] == "unknown"
        assert "no Airflow Variable 'kip848_no_such_variable'" in unread["ownership"]["error"]

        # the whole fleet (no group_ids): our groups are in it, as the inventory says
        whole = _get(api, "/fleet.json", conn_id=kafka_conn).json()
        assert whole["group_count"] >= 3 and sum(whole["by_type"].values()) == whole["group_count"]
        assert set(ours) <= {g["group_id"] for g in whole["groups"]}

        page = _get(api, "/fleet", conn_id=kafka_conn, group_ids=",".join(ours))
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "<link" not in page.text and "src=" not in page.text  # no external asset
        parsed = _Rows()
        parsed.feed(page.text)
        assert set(parsed.rows) == set(ours)
        assert parsed.rows[live][:4] == [live, "Stable", "1", "0"]
        assert parsed.rows[consumer][:4] == [consumer, "Empty", "0", str(rows[consumer]["lag"])]
        for e in expected.entries:
            for v in e.verdicts:
                assert f"{v.migration}: {v.readiness.value}" in parsed.rows[e.group_id]
        assert "classic &middot; Stable (1)" in page.text and "consumer &middot; Empty (1)" in page.text
        assert 'id="filter"' in page.text or "id='filter'" in page.text
        assert '<a href="runs" id="nav-runs">Fleet migration runs</a>' in page.text  # the runs page, in the frame
    finally:
        member.stop()


def test_unauthenticated_and_unauthorized_requests_are_refused(api, kafka_conn):
    for path in ("/fleet", "/fleet.json"):
        assert _get(api, path, role=None, conn_id=kafka_conn).status_code == 401
        client, _ = api
        bad = client.get(f"{URL_PREFIX}{path}", headers={"Authorization": "Bearer not-a-jwt"})
        assert bad.status_code in (401, 403)
        # a viewer may not read connections: the page reads the cluster with one
        refused = _get(api, path, role="viewer", conn_id=kafka_conn)
        assert refused.status_code == 403 and "connection" in refused.text


def test_a_cluster_that_does_not_answer_is_an_error_banner(api, monkeypatch, kafka_conn):
    dead = set_kafka_connection(monkeypatch, "kafka_fleet_dead", "127.0.0.1:1", request_timeout_ms=3000)
    response = _get(api, "/fleet.json", conn_id=dead)
    assert response.status_code == 502
    body = response.json()
    assert body["groups"] is None and "127.0.0.1:1" in body["error"], body
    page = _get(api, "/fleet", conn_id=dead)
    assert page.status_code == 502
    assert 'class="banner error"' in page.text and "127.0.0.1:1" in page.text and 'id="groups"' not in page.text

    missing = _get(api, "/fleet.json", conn_id="kafka_fleet_no_such_connection")
    assert missing.status_code == 404 and "kafka_fleet_no_such_connection" in missing.json()["error"]
    bad_id = _get(api, "/fleet.json", conn_id=kafka_conn, group_ids="orders\u200b")  # an invisible character
    assert bad_id.status_code == 400 and "orders" in bad_id.json()["error"]
    for nobody in ("", " , "):  # group_ids given but naming no group: refused, never the whole fleet
        named_none = _get(api, "/fleet.json", conn_id=kafka_conn, group_ids=nobody)
        assert named_none.status_code == 400 and "group_ids is empty" in named_none.json()["error"], nobody
    absent = _get(api, "/fleet", conn_id=kafka_conn, group_ids="kip848-fleet-no-such-group")
    assert absent.status_code == 200 and "Not found on the cluster: kip848-fleet-no-such-group" in absent.text


def test_groups_whose_facts_are_unknown_show_unknown():
    """An entry the coordinator did not describe (error set) renders unknown members, lag and verdicts."""
    from datetime import UTC, datetime

    from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, MigrationVerdict, Readiness
    from airflow_provider_kip848.plugins.fleet_view import fleet_summary, render_page

    entry = InventoryEntry(group_id="g-unknown", type=GroupType.CLASSIC, protocol_type="consumer",
                           state=GroupState.UNKNOWN, coordinator_id=None, member_count=None, members=None,
                           assignor=None, offsets=None, error="coordinator 2 did not answer",
                           verdicts=(MigrationVerdict("classic_to_consumer", Readiness.UNKNOWN,
                                                      "coordinator 2 did not answer"),))
    inv = GroupInventory(taken_at=datetime.now(UTC), entries=(entry,), elapsed_s=0.1,
                         unanswered_brokers={2: "timed out"})
    summary = fleet_summary(inv, "c")
    assert summary["complete"] is False and "did not answer ListGroups" in summary["warnings"][0]
    assert json.loads(json.dumps(summary))["groups"][0]["members"] is None
    parsed = _Rows()
    parsed.feed(render_page(summary))
    assert parsed.rows["g-unknown"][:5] == ["g-unknown", "coordinator 2 did not answer", "unknown", "unknown",
                                            "unknown"]
    assert "classic_to_consumer: unknown" in parsed.rows["g-unknown"]
    assert summary["groups"][0]["links"]["dags"] == {}  # nothing to run until the facts are known


# -- the fleet runs view ------------------------------------------------------------------------

WAVE_SLOTS = 3
MIGRATE_TIME = 1_750_000_000.0


def _stand_in_dag():
    """A DAG with the fleet migration DAG's id and task ids (``plan``, ``wave_{k}.open`` ... ``report``), mapped
    where it maps; its tasks do nothing: the test writes their states and XComs itself."""
    from airflow.sdk import DAG, TaskGroup, task

    with DAG(FLEET_DAG_ID, schedule=None, start_date=datetime(2025, 1, 1, tzinfo=UTC), catchup=False,
             tags=["kip848-test-stand-in"]) as dag:
        @task(task_id="plan")
        def plan():
            return {}

        @task(task_id="report", trigger_rule="all_done")
        def report():
            return {}

        upstream = plan()
        for k in range(1, WAVE_SLOTS + 1):
            with TaskGroup(f"wave_{k}"):
                @task(task_id="open")
                def open_wave():
                    return []

                @task(task_id="approval")
                def approval():
                    return True

                @task(task_id="recheck")
                def recheck(apps):
                    return apps

                @task(task_id="migrate")
                def migrate(app):
                    return app

                @task(task_id="judge", trigger_rule="all_done")
                def judge():
                    return {}

                @task(task_id="to_roll_back", trigger_rule="all_done")
                def to_roll_back():
                    return []

                @task(task_id="rollback")
                def rollback(app):
                    return app

                opened = open_wave()
                checked = recheck(opened)
                moved = migrate.expand(app=checked)
                judged = judge()
                sent_back = to_roll_back()
                upstream >> opened
                opened >> approval() >> checked
                moved >> judged >> sent_back
                back = rollback.expand(app=sent_back)
                upstream = back
        upstream >> report()
    return dag


def _task_ids(k: int) -> set[str]:
    return {f"wave_{k}.{t}" for t in ("open", "approval", "recheck", "migrate", "judge", "to_roll_back", "rollback")}


@pytest.fixture(scope="module")
def fleet_dag(airflow_db):
    """The serialized fleet migration DAG in the test DB: the one the session already has (the real DAG, when a
    test ran it) if it has the task ids, else the stand-in. The runs the tests create are deleted afterwards."""
    from airflow.api.common.delete_dag import delete_dag
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.models.dagbag import DBDagBag
    from airflow.models.dagrun import DagRun
    from airflow.serialization.serialized_objects import LazyDeserializedDAG
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    needed = {"plan", "report"}.union(*(_task_ids(k) for k in range(1, WAVE_SLOTS + 1)))
    with create_session() as session:
        existing = DBDagBag().get_latest_version_of_dag(FLEET_DAG_ID, session=session)
    stand_in = existing is None or not needed <= set(existing.task_dict)
    if stand_in:
        DagBundlesManager().sync_bundles_to_db()
        with create_session() as session:
            update_dag_parsing_results_in_db("test-dags", None, [LazyDeserializedDAG.from_dag(_stand_in_dag())], {},
                                             None, set(), session=session)
    with create_session() as session:
        sdag = DBDagBag().get_latest_version_of_dag(FLEET_DAG_ID, session=session)
    created: list[str] = []
    yield sdag, created
    with create_session() as session:
        if stand_in:
            delete_dag(FLEET_DAG_ID, session=session)
        else:
            session.execute(delete(DagRun).where(DagRun.dag_id == FLEET_DAG_ID, DagRun.run_id.in_(created)))


def _make_run(fleet_dag, run_id: str, run_after: datetime, state: str, tis: dict, xcoms: dict) -> None:
    """A run of the fleet DAG with these task instance states ((task_id, map_index) -> state; a mapped task's
    map indexes replace its unexpanded instance) and XComs ((task_id, map_index, key) -> value, stored as
    the Task Execution API stores them: JSON)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType
    from sqlalchemy import delete, select

    sdag, created = fleet_dag
    with create_session() as session:
        run = sdag.create_dagrun(run_id=run_id, run_after=run_after, logical_date=None, run_type=DagRunType.MANUAL,
                                 triggered_by=DagRunTriggeredByType.TEST, triggering_user_name="fleet-view-test",
                                 state=DagRunState.RUNNING, start_date=run_after, session=session)
        created.append(run_id)
        session.flush()
        mapped = {t for (t, i) in tis if i >= 0}
        session.execute(delete(TaskInstance).where(TaskInstance.dag_id == FLEET_DAG_ID,
                                                   TaskInstance.run_id == run_id, TaskInstance.task_id.in_(mapped)))
        existing = {(ti.task_id, ti.map_index): ti for ti in session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == FLEET_DAG_ID, TaskInstance.run_id == run_id))}
        for (task_id, index), ti_state in tis.items():
            ti = existing.get((task_id, index))
            if ti is None:
                ti = TaskInstance(sdag.get_task(task_id), dag_version_id=run.created_dag_version_id, run_id=run_id,
                                  map_index=index)
                session.add(ti)
            ti.state = ti_state
            ti.try_number = 0 if ti_state is None else (2 if ti_state == "up_for_retry" else 1)
            if ti_state is not None:
                ti.start_date = run_after
        run.state = state
        if state in ("success", "failed"):
            run.end_date = run_after + timedelta(minutes=30)
        session.flush()
        for (task_id, index, key), value in xcoms.items():
            XComModel.set(key, value, dag_id=FLEET_DAG_ID, task_id=task_id, run_id=run_id, map_index=index,
                          serialize=False, session=session)


def _plan():
    """A plan of three waves: canary [billing], [orders (2 groups), payments], [search]."""
    from airflow_provider_kip848.fleet import Application, PlannedGroup, Wave, WaveLimits, WavePlan

    def app(name, team, *groups):
        planned = tuple(PlannedGroup(group_id=g, type="classic", state="Stable", member_count=2, status="pending",
                                     readiness="ready_online", reason="ready", path="online") for g in groups)
        return Application(app=name, team=team, rule_index=0, groups=planned, status="ready", path="online",
                           reason="every group can roll")

    billing, orders = app("billing", "finance", "billing-app"), app("orders", "commerce", "orders-eu", "orders-us")
    payments, search = app("payments", "finance", "payments-app"), app("search", "search", "search-app")
    waves = (Wave(1, "classic_to_consumer", (billing,), canary=True),
             Wave(2, "classic_to_consumer", (orders, payments)), Wave(3, "classic_to_consumer", (search,)))
    return WavePlan(migration="classic_to_consumer", waves=waves, limits=WaveLimits(canary=1, wave_size=2))


def _result(app, team, wave, ok, groups, *, kind="migrate", detail="", gap=None, map_index=None):
    """An ApplicationResult dict: ``groups`` (group_id, ok, type_after)."""
    outcomes = tuple(GroupOutcome(group_id=g, ok=g_ok, type_before="classic" if kind == "migrate" else "consumer",
                                  type_after=after, state_after="Stable", members_after=2,
                                  detail="" if g_ok else "members did not rejoin on the consumer protocol")
                     for g, g_ok, after in groups)
    steps = (StepRecord("roll", MIGRATE_TIME, MIGRATE_TIME + 60, ok),)
    return ApplicationResult(app=app, team=team, wave=wave, kind=kind, path="online", ok=ok, groups=outcomes,
                             steps=steps, started_at=MIGRATE_TIME, ended_at=MIGRATE_TIME + 90, gap_s=gap,
                             detail=detail, map_index=map_index,
                             task_id=f"wave_{wave}.{kind}").to_dict()


def _record(wave, results, *, proceed=True, failed=(), reason="within the error budget"):
    plan_wave = _plan().wave(wave)
    verdict = WaveVerdict(wave=wave, proceed=proceed, reason=reason, failed_apps=tuple(failed),
                          succeeded_apps=tuple(a for a in plan_wave.apps if a not in failed),
                          failed_groups={"orders-eu": "members did not rejoin"} if failed else {},
                          rollback_groups=tuple(g for a in plan_wave.applications if a.app in failed
                                                for g in a.group_ids))
    return WaveRecord(number=wave, canary=plan_wave.canary, wave_hash=plan_wave.wave_hash, apps=plan_wave.apps,
                      group_ids=plan_wave.group_ids,
                      results=tuple(ApplicationResult.from_dict(r) for r in results), verdict=verdict,
                      started_at=MIGRATE_TIME, ended_at=MIGRATE_TIME + 120, approved_by="alice",
                      approved_at="2025-06-15T10:00:00+00:00", types_after={"consumer": 1}).to_dict()


def _plan_xcom():
    plan = _plan()
    return {("plan", -1, "return_value"): {"plan": plan.to_dict(), "markdown": plan.render_markdown(),
                                           "types_before": {"classic": 5}}}


def _units(*apps):
    """What the recheck returns (the moves map over it) and the judge sends back: one unit per application."""
    return [{"app": a, "wave": 0, "path": "online", "groups": []} for a in apps]


def _approved(k, by="alice"):
    return {(f"wave_{k}.approval", -1, "decision"): {"decision": "Approve", "by": by, "at": "2025-06-15T10:00:00+00:00",
                                                      "plan_hash": _plan().wave(k).wave_hash}}


def _wave_1_done():
    """Wave 1 (the canary, billing) migrated, judged ok, nothing to roll back."""
    billing = _result("billing", "finance", 1, True, [("billing-app", True, "consumer")], gap=None, map_index=0)
    tis = {("wave_1.open", -1): "success", ("wave_1.approval", -1): "success", ("wave_1.recheck", -1): "success",
           ("wave_1.migrate", 0): "success", ("wave_1.judge", -1): "success", ("wave_1.to_roll_back", -1): "success",
           ("wave_1.rollback", -1): "skipped"}
    xcoms = {**_approved(1), ("wave_1.recheck", -1, "return_value"): _units("billing"),
             ("wave_1.migrate", 0, "fleet_result"): billing, ("wave_1.migrate", 0, "return_value"): billing,
             ("wave_1.judge", -1, "return_value"): _record(1, [billing]),
             ("wave_1.judge", -1, "rollback_units"): [], ("wave_1.to_roll_back", -1, "return_value"): []}
    return tis, xcoms


def _runs(fleet_dag):
    """Four runs, oldest first: A stopped by the budget in wave 2 (orders failed, rolled back), B in wave 2's
    migrations, C waiting for wave 1's approval, D whose plan task failed (no plan recorded)."""
    uid = uuid.uuid4().hex[:8]
    now = datetime.now(UTC).replace(microsecond=0)
    ids = {k: f"fleet_view_{k}_{uid}" for k in "ABC"}
    ids["D"] = f"manual__{now.isoformat()}_{uid}"  # ':' and '+' as in Airflow's own run ids: quoted in links

    w1_tis, w1_xcoms = _wave_1_done()
    orders_failed = _result("orders", "commerce", 2, False, [("orders-eu", False, "classic"),
                                                             ("orders-us", True, "consumer")],
                            detail="orders-eu: members did not rejoin", map_index=1)
    payments_ok = _result("payments", "finance", 2, True, [("payments-app", True, "consumer")], gap=12.5,
                          map_index=0)
    orders_back = _result("orders", "commerce", 2, True, [("orders-eu", True, "classic"), ("orders-us", True, "classic")],
                          kind="rollback", map_index=0)
    skipped_3 = {(t, -1): "skipped" for t in _task_ids(3)}
    _make_run(fleet_dag, ids["A"], now - timedelta(hours=3), "failed", {
        ("plan", -1): "success", **w1_tis,
        ("wave_2.open", -1): "success", ("wave_2.approval", -1): "success", ("wave_2.recheck", -1): "success",
        # the DAG maps in plan order; here payments got index 0: each is found by its result's app
        ("wave_2.migrate", 0): "success", ("wave_2.migrate", 1): "failed", ("wave_2.judge", -1): "success",
        ("wave_2.to_roll_back", -1): "success", ("wave_2.rollback", 0): "success", **skipped_3,
        ("report", -1): "success",
    }, {
        **_plan_xcom(), **w1_xcoms, **_approved(2), ("wave_2.recheck", -1, "return_value"): _units("orders", "payments"),
        ("wave_2.judge", -1, "rollback_units"): _units("orders"),
        ("wave_2.migrate", 0, "fleet_result"): payments_ok, ("wave_2.migrate", 0, "return_value"): payments_ok,
        ("wave_2.migrate", 1, "fleet_result"): orders_failed,
        ("wave_2.judge", -1, "return_value"): _record(2, [orders_failed, payments_ok], proceed=False,
                                                      failed=["orders"], reason="1 failed application, budget 0"),
        ("wave_2.rollback", 0, "fleet_result"): orders_back,
    })
    payments_try_1 = _result("payments", "finance", 2, False, [("payments-app", False, "classic")],
                             detail="timed out waiting for the members", map_index=1)
    _make_run(fleet_dag, ids["B"], now - timedelta(hours=2), "running", {
        ("plan", -1): "success", **w1_tis,
        ("wave_2.open", -1): "success", ("wave_2.approval", -1): "success", ("wave_2.recheck", -1): "success",
        ("wave_2.migrate", 0): "deferred", ("wave_2.migrate", 1): "up_for_retry",
    }, {**_plan_xcom(), **w1_xcoms, **_approved(2), ("wave_2.recheck", -1, "return_value"): _units("orders", "payments"),
        ("wave_2.migrate", 1, "fleet_result"): payments_try_1})
    _make_run(fleet_dag, ids["C"], now - timedelta(hours=1), "running", {
        ("plan", -1): "success", ("wave_1.open", -1): "success", ("wave_1.approval", -1): "awaiting_input",
    }, _plan_xcom())
    _make_run(fleet_dag, ids["D"], now, "failed", {("plan", -1): "failed"}, {})
    return ids


class _RunsPage(HTMLParser):
    """Per run id: its waves' rows (data-wave -> text), its applications' rows ((wave, app) -> text and links),
    its groups' rows ((wave, app, group) -> text) and its banners' text."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[str, dict] = {}
        self._run: dict | None = None
        self._row: list[str] | None = None
        self._banner: list[str] | None = None
        self._link_key: tuple | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "section" and "run" in classes:
            self._run = self.runs.setdefault(a["data-run-id"], {"waves": {}, "apps": {}, "groups": {}, "links": {},
                                                                 "banners": [], "text": []})
        elif self._run is not None and tag == "tr" and classes:
            key = {"wave": lambda: int(a["data-wave"]), "app": lambda: (int(a["data-wave"]), a["data-app"]),
                   "app-group": lambda: (int(a["data-wave"]), a["data-app"], a["data-group"])}.get(classes[0])
            if key:
                table = {"wave": "waves", "app": "apps", "app-group": "groups"}[classes[0]]
                self._row = self._run[table].setdefault(key(), [])
                self._link_key = key() if classes[0] == "app" else None
        elif self._run is not None and tag == "a" and self._row is not None and self._link_key:
            self._run["links"].setdefault(self._link_key, []).append(a["href"])
        elif self._run is not None and tag == "div" and "banner" in classes:
            self._banner = []

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row, self._link_key = None, None
        elif tag == "div" and self._banner is not None:
            self._run["banners"].append(" ".join(self._banner))
            self._banner = None
        elif tag == "section":
            self._run = None

    def handle_data(self, data):
        if self._run is None or not data.strip():
            return
        self._run["text"].append(data.strip())
        if self._row is not None:
            self._row.append(data.strip())
        if self._banner is not None:
            self._banner.append(data.strip())


def _mapped(run_id: str, task_id: str, index: int) -> str:
    from urllib.parse import quote

    return f"/dags/{FLEET_DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{task_id}/mapped/{index}"


def test_the_ui_has_the_routes_the_links_use():
    """The installed Airflow UI routes a mapped task instance, a task group and a run the way the links do."""
    from pathlib import Path

    import airflow

    bundle = "".join(p.read_text(errors="replace")
                     for p in (Path(airflow.__file__).parent / "ui" / "dist" / "assets").glob("*.js"))
    for route in ("dags/:dagId/runs/:runId/tasks/:taskId/mapped/:mapIndex", "dags/:dagId/runs/:runId/tasks/:taskId",
                  "dags/:dagId/runs/:runId/tasks/group/:groupId", "dags/:dagId/runs/:runId"):
        assert f"path:`{route}`" in bundle or f'path:"{route}"' in bundle, route


def test_fleet_runs_show_waves_and_each_applications_progress(api, fleet_dag):
    ids = _runs(fleet_dag)
    response = _get(api, "/runs.json", dag_id=FLEET_DAG_ID, limit=4)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["error"] is None and body["dag_exists"] is True and body["warnings"] == []
    # newest first
    assert [r["run_id"] for r in body["runs"]] == [ids["D"], ids["C"], ids["B"], ids["A"]]
    # a group's fleet runs: those whose recorded plan moves it (D recorded no plan), each linked to its report
    moving = _get(api, "/runs.json", dag_id=FLEET_DAG_ID, limit=3, group_id="orders-eu").json()
    assert (moving["group_id"], [r["run_id"] for r in moving["runs"]]) == ("orders-eu", [ids["C"], ids["B"], ids["A"]])
    assert moving["runs"][0]["report_url"] == f"/kip848-reports/{FLEET_DAG_ID}/{quote(ids['C'], safe='')}"
    assert moving["active"] is True  # C and B are running: the page reloads itself
    none = _get(api, "/runs", dag_id=FLEET_DAG_ID, group_id="kip848-no-such-group")
    assert none.status_code == 200 and 'id="no-runs"' in none.text and "planned to move group" in none.text
    assert '<meta http-equiv="refresh"' not in none.text  # nothing shown is moving
    runs = {r["run_id"]: r for r in body["runs"]}
    a, b, c, d = (runs[ids[k]] for k in "ABCD")
    plan = _plan()

    # A: wave 1 done ok, wave 2 stopped by the budget (orders failed and rolled back), wave 3 not reached
    assert (a["state"], a["plan_status"], a["report_task"]["state"]) == ("failed", "recorded", "success")
    assert a["plan"]["plan_hash"] == plan.plan_hash and a["plan"]["summary"]["waves"] == 3
    assert [(w["number"], w["canary"], w["apps"], w["group_count"], w["wave_hash_short"]) for w in a["waves"]] == [
        (w.number, w.canary, list(w.apps), w.group_count, w.wave_hash[:12]) for w in plan.waves]
    assert [w["status"] for w in a["waves"]] == ["done_ok", "stopped_by_budget", "not_reached"]
    assert a["waves"][1]["status_reason"] == "1 failed application, budget 0"
    assert a["waves"][2]["status_reason"] == "the error budget stopped the run after wave 2"
    assert a["waves"][1]["record"]["approved_by"] == "alice"
    assert a["waves"][1]["record"]["verdict"]["failed_apps"] == ["orders"]
    orders, payments = a["waves"][1]["applications"]
    assert (orders["app"], orders["migrate"]["state"], orders["migrate"]["map_index"]) == ("orders", "failed", 1)
    assert orders["migrate"]["url"] == _mapped(ids["A"], "wave_2.migrate", 1)
    assert orders["result"]["ok"] is False and orders["result"]["detail"] == "orders-eu: members did not rejoin"
    assert orders["result"]["failed_steps"] == ["roll"]
    assert [(g["group_id"], g["ok"], g["type_after"], g["rollback_ok"], g["rollback_type_after"])
            for g in orders["groups"]] == [("orders-eu", False, "classic", True, "classic"),
                                           ("orders-us", True, "consumer", True, "classic")]
    assert orders["rollback"]["needed"] is True and orders["rollback"]["state"] == "success"
    assert orders["rollback"]["url"] == _mapped(ids["A"], "wave_2.rollback", 0)
    assert orders["rollback"]["result"]["ok"] is True
    assert (payments["migrate"]["state"], payments["migrate"]["map_index"], payments["result"]["ok"],
            payments["result"]["gap_s"]) == ("success", 0, True, 12.5)
    assert payments["rollback"]["needed"] is False and payments["rollback"]["exists"] is False
    assert a["waves"][0]["applications"][0]["groups"][0]["type_after"] == "consumer"
    search = a["waves"][2]["applications"][0]["migrate"]  # never expanded: the task's one instance
    assert (search["state"], search["map_index"]) == ("skipped", -1)
    assert a["progress"] == {"applications": 4, "ok": 2, "failed": 1, "running": 0, "not_started": 1,
                             "already_migrated": 0}

    # B: wave 2 running; its mapped task instances deferred and up for retry (the failed try's result shown)
    assert [w["status"] for w in b["waves"]] == ["done_ok", "running", "not_reached"]
    assert b["waves"][1]["tasks"]["migrate"] == {"deferred": 1, "up_for_retry": 1}
    orders_b, payments_b = b["waves"][1]["applications"]
    assert (orders_b["migrate"]["state"], orders_b["result"], orders_b["rollback"]["needed"]) == ("deferred", None, None)
    assert orders_b["migrate"]["url"] == _mapped(ids["B"], "wave_2.migrate", 0)  # by position: no result yet
    assert (payments_b["migrate"]["state"], payments_b["migrate"]["try_number"]) == ("up_for_retry", 2)
    assert payments_b["result"]["ok"] is False and "timed out" in payments_b["result"]["detail"]
    assert b["waves"][2]["status_reason"] == "not started yet"
    assert b["progress"] == {"applications": 4, "ok": 1, "failed": 0, "running": 2, "not_started": 1,
                             "already_migrated": 0}
    assert b["waves"][1]["approval"] == {"decision": "Approve", "by": "alice", "at": "2025-06-15T10:00:00+00:00",
                                         "refused": None}

    # C: waiting for wave 1's approval; nothing after it reached
    assert [w["status"] for w in c["waves"]] == ["waiting_for_approval", "not_reached", "not_reached"]
    assert c["waves"][0]["tasks"]["approval"]["state"] == "awaiting_input"
    billing_c = c["waves"][0]["applications"][0]["migrate"]
    assert (billing_c["state"], billing_c["label"], billing_c["map_index"]) == (None, "not mapped yet", -1)

    # D: the plan task failed: the plan is not recorded, its waves unknown (not zero)
    assert (d["plan_status"], d["waves"], d["plan"], d["plan_task"]["state"]) == ("not recorded", None, None, "failed")
    assert d["url"] == f"/dags/{FLEET_DAG_ID}/runs/{ids['D'].replace(':', '%3A').replace('+', '%2B')}"

    # one run by id; the limit
    one = _get(api, "/runs.json", dag_id=FLEET_DAG_ID, run_id=ids["B"]).json()
    assert [r["run_id"] for r in one["runs"]] == [ids["B"]] and one["runs"][0] == b
    assert [r["run_id"] for r in _get(api, "/runs.json", limit=2).json()["runs"]] == [ids["D"], ids["C"]]
    assert _get(api, "/runs.json", limit=0).status_code == 422

    # the page shows the same
    page = _get(api, "/runs", dag_id=FLEET_DAG_ID, limit=4)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<link" not in page.text and "src=" not in page.text
    parsed = _RunsPage()
    parsed.feed(page.text)
    assert list(parsed.runs) == [ids["D"], ids["C"], ids["B"], ids["A"]]
    pa = parsed.runs[ids["A"]]
    assert "done ok" in pa["waves"][1] and "stopped by budget" in pa["waves"][2] and "not reached" in pa["waves"][3]
    assert "canary" in pa["waves"][1] and plan.wave(2).wave_hash[:12] in pa["waves"][2] and "alice" in pa["waves"][2]
    assert pa["apps"][(2, "orders")][:4] == ["orders", "commerce", "online", "failed"]
    assert "orders-eu: members did not rejoin" in pa["apps"][(2, "orders")] and "rolled back" in pa["apps"][(2, "orders")]
    assert pa["links"][(2, "orders")] == [_mapped(ids["A"], "wave_2.migrate", 1), _mapped(ids["A"], "wave_2.migrate", 1),
                                          _mapped(ids["A"], "wave_2.rollback", 0)]
    assert "12.5 s" in pa["apps"][(2, "payments")] and "not needed" in pa["apps"][(2, "payments")]
    assert pa["groups"][(2, "orders", "orders-eu")] == ["orders-eu", "classic", "ready_online", "failed",
                                                        "classic · Stable · 2 members",
                                                        "members did not rejoin on the consumer protocol", "back",
                                                        "classic"]
    pb = parsed.runs[ids["B"]]
    assert "running" in pb["waves"][2] and "deferred" in pb["apps"][(2, "orders")]
    assert "up_for_retry" in pb["apps"][(2, "payments")] and "try 2" in pb["apps"][(2, "payments")]
    assert "waiting for approval" in parsed.runs[ids["C"]]["waves"][1]
    pd = parsed.runs[ids["D"]]
    assert pd["waves"] == {} and any(t.startswith("Plan not recorded") for t in pd["banners"]), pd["banners"]
    # the fleet page links to the runs page, and back
    assert 'href="fleet"' in page.text


def test_fleet_runs_of_an_unknown_dag_or_run_say_so(api, airflow_db):
    body = _get(api, "/runs.json", dag_id="kip848_no_such_fleet_dag").json()
    assert body["dag_exists"] is False and body["runs"] == [] and "no DAG" in body["warnings"][0]
    body = _get(api, "/runs.json", run_id="no-such-run").json()
    assert body["runs"] == [] and "has no run 'no-such-run'" in body["warnings"][-1]
    page = _get(api, "/runs", dag_id="kip848_no_such_fleet_dag")
    assert page.status_code == 200 and 'id="no-runs"' in page.text and "no DAG" in page.text


def test_fleet_runs_refuse_unauthenticated_and_unauthorized_requests(api, airflow_db):
    client, _ = api
    for path in ("/runs", "/runs.json"):
        assert _get(api, path, role=None).status_code == 401
        assert client.get(f"{URL_PREFIX}{path}", headers={"Authorization": "Bearer not-a-jwt"}).status_code in (401, 403)
        refused = _get(api, path, role="nobody")
        assert refused.status_code == 403 and "kip848_fleet_migration" in refused.text
        # a viewer may read DAG runs (not the cluster's connection): the runs, not the fleet
        assert _get(api, path, role="viewer").status_code == 200
        assert _get(api, "/fleet.json", role="viewer").status_code == 403


def test_fleet_runs_that_do_not_parse_are_shown_as_unreadable():
    """A plan or a result that does not parse is shown with its error, never guessed."""
    from airflow_provider_kip848.plugins.fleet_runs import RunFacts, TaskFact, run_summary
    from airflow_provider_kip848.plugins.fleet_view import render_runs_page

    bad_plan = RunFacts(FLEET_DAG_ID, "r1", "running", tasks=(TaskFact("plan", -1, "success"),),
                        xcoms={("plan", -1, "return_value"): {"plan": {"waves": "three"}}})
    summary = run_summary(bad_plan)
    assert (summary["plan_status"], summary["waves"]) == ("unreadable", None)
    assert "no list of waves" in summary["plan_error"]
    plan = _plan()
    facts = RunFacts(FLEET_DAG_ID, "r2", "running", tasks=(
        TaskFact("plan", -1, "success"), TaskFact("wave_1.open", -1, "success"),
        TaskFact("wave_1.migrate", 0, "failed"), TaskFact("wave_1.judge", -1, "success")),
        xcoms={**_plan_xcom(), ("wave_1.migrate", 0, "fleet_result"): {"app": "billing", "kind": "sideways"},
               ("wave_1.judge", -1, "return_value"): {"number": "one"}})
    summary = run_summary(facts)
    wave = summary["waves"][0]
    assert wave["status"] == "unknown" and "could not be read" in wave["status_reason"]
    billing = wave["applications"][0]
    assert billing["migrate"]["state"] == "failed" and billing["result"] is None
    assert "kind must be" in billing["result_error"]
    assert plan.wave(1).apps == ("billing",)
    html = render_runs_page({"dag_id": FLEET_DAG_ID, "dag_exists": True, "error": None, "warnings": [], "limit": 5,
                             "run_id": None, "dag_url": "/dags/x", "runs": [run_summary(bad_plan), summary]})
    assert "Plan unreadable" in html and "unreadable" in html


def test_a_rejected_wave_stops_the_waves_after_it():
    """An approval answered "Reject" skips the wave's tasks: the wave is rejected (from the approval's recorded
    answer, or without it from the skipped tasks after a successful approval), the next ones not reached."""
    from airflow_provider_kip848.plugins.fleet_runs import RunFacts, TaskFact, run_summary

    tasks = [TaskFact("plan", -1, "success"), TaskFact("wave_1.open", -1, "success"),
             TaskFact("wave_1.approval", -1, "success"), TaskFact("wave_1.recheck", -1, "skipped"),
             TaskFact("wave_1.migrate", -1, "skipped"), TaskFact("wave_1.judge", -1, "skipped")]
    tasks += [TaskFact(f"wave_{k}.{t}", -1, "skipped") for k in (2, 3) for t in ("open", "migrate")]
    answer = {("wave_1.approval", -1, "decision"): {"decision": "Reject", "by": "bob", "at": "2025-06-15T11:00:00"}}
    for xcoms, reason in (({**_plan_xcom(), **answer}, "Reject by bob at 2025-06-15T11:00:00"),
                          (_plan_xcom(), "the approval was rejected: the wave's tasks were skipped")):
        summary = run_summary(RunFacts(FLEET_DAG_ID, "r", "success", tasks=tuple(tasks), xcoms=xcoms))
        assert [w["status"] for w in summary["waves"]] == ["rejected", "not_reached", "not_reached"]
        assert summary["waves"][0]["status_reason"] == reason
        assert summary["waves"][1]["status_reason"] == "the run stopped at wave 1 (rejected)"
        assert summary["waves"][0]["applications"][0]["migrate"]["label"] == "skipped"


def test_a_recheck_drops_migrated_applications_or_stops_the_wave():
    """The moves map over what the recheck let through: an application it found migrated is not moved (and the
    others keep their map index); a recheck that refused the wave stops it (not the budget)."""
    from airflow_provider_kip848.plugins.fleet_runs import RunFacts, TaskFact, run_summary

    tasks = (TaskFact("plan", -1, "success"), TaskFact("wave_1.open", -1, "success"),
             TaskFact("wave_1.approval", -1, "success"), TaskFact("wave_1.recheck", -1, "success"),
             TaskFact("wave_1.migrate", 0, "success"), TaskFact("wave_2.open", -1, "success"),
             TaskFact("wave_2.approval", -1, "success"), TaskFact("wave_2.recheck", -1, "success"),
             TaskFact("wave_2.migrate", 0, "running"), TaskFact("wave_3.open", -1, None))
    summary = run_summary(RunFacts(FLEET_DAG_ID, "r", "running", tasks=tasks, xcoms={
        **_plan_xcom(), ("wave_2.recheck", -1, "return_value"): _units("payments")}))
    orders, payments = summary["waves"][1]["applications"]
    assert (orders["already_migrated"], orders["migrate"]["exists"]) == (True, False)
    assert (payments["already_migrated"], payments["migrate"]["map_index"], payments["migrate"]["state"]) == (
        False, 0, "running")
    assert summary["progress"]["already_migrated"] == 1 and summary["progress"]["running"] == 1

    refused = _record(1, [], proceed=False, reason="wave 1: the recheck against a fresh inventory did not pass")
    tasks = (TaskFact("plan", -1, "success"), TaskFact("wave_1.open", -1, "success"),
             TaskFact("wave_1.recheck", -1, "failed"), TaskFact("wave_1.migrate", -1, "upstream_failed"),
             TaskFact("wave_1.judge", -1, "success"), TaskFact("wave_2.open", -1, "skipped"))
    summary = run_summary(RunFacts(FLEET_DAG_ID, "r", "failed", tasks=tasks, xcoms={
        **_plan_xcom(), ("wave_1.judge", -1, "return_value"): refused}))
    assert (summary["waves"][0]["status"], summary["waves"][0]["status_reason"]) == (
        "stopped", "wave 1: the recheck against a fresh inventory did not pass")
    assert summary["waves"][1]["status_reason"] == "the run stopped at wave 1 (stopped)"
    # a plan with more waves than the run has slots: the waves beyond them are left to a later run
    assert summary["waves"][2]["status"] == "not_reached" and "wave slots" in summary["waves"][2]["status_reason"]

"""The fleet view plugin, served by Airflow's own API app (as the api-server builds it), on the real broker.

The plugin is found the way every deployment finds it (the package's ``airflow.plugins`` entry point),
mounted by ``create_app``, and called with the REST API's own tokens: its JSON counts equal what
``native.inventory()`` says about the test's groups, its page shows them, a request without a token is
refused, a user who may not read the connection is refused, and a cluster that does not answer is an
error banner, never an empty fleet.
"""

from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser

import pytest

from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.plugins.fleet_view import URL_PREFIX, FleetViewPlugin, group_links
from airflow_provider_kip848.testing.clients import ConsumerProcess, consume, create_topics, produce
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


def test_fleet_json_and_page_show_the_real_groups(api, kafka_conn, native, bootstrap, unique, tmp_path):
    topic = unique("fleet")
    create_topics(bootstrap, {topic: 2})
    produce(bootstrap, topic, (f"v{i}" for i in range(20)))
    classic, consumer, live = unique("fleet-classic"), unique("fleet-consumer"), unique("fleet-live")
    consume(bootstrap, classic, [topic], 20, group_protocol="classic")  # Empty classic, lag 0
    consume(bootstrap, consumer, [topic], 10, group_protocol="consumer")  # Empty consumer group, lag > 0
    member = ConsumerProcess.start(bootstrap, live, [topic], protocol="classic", client_id="fleet-live-0",
                                   assignor="range", log_file=str(tmp_path / "live.log"))
    ours = [classic, consumer, live]
    try:
        wait_until(lambda: (d := native.describe_group(live)).state == "Stable" and len(d.members) == 1,
                   timeout=90, what="the live classic group is Stable with its member")
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
        assert rows[consumer]["lag"] > 0 and rows[classic]["lag"] == 0
        assert rows[live]["links"]["runs"] == f"/dag_runs?conf_contains=%22{live}%22"
        assert rows[live]["links"]["dags"]["classic_to_consumer"]["dag_id"] == "kip848_consumer_rolling_upgrade"

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
    assert "class='banner error'" in page.text and "127.0.0.1:1" in page.text and "id='groups'" not in page.text

    missing = _get(api, "/fleet.json", conn_id="kafka_fleet_no_such_connection")
    assert missing.status_code == 404 and "kafka_fleet_no_such_connection" in missing.json()["error"]
    bad_id = _get(api, "/fleet.json", conn_id=kafka_conn, group_ids="orders\u200b")  # an invisible character
    assert bad_id.status_code == 400 and "orders" in bad_id.json()["error"]
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

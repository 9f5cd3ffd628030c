"""The fleet pages' facts without a cluster or a DB: the owner join, the filters, a wave's status while it
validates, each group's step during a move, the fleet runs that move a group, and the pages rendered from
their templates (escaped, owner columns, the reload only while something moves)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from airflow_provider_kip848.engine.state import MoveState, Step
from airflow_provider_kip848.fleet import (
    Application,
    OwnershipMap,
    OwnershipNotApprovable,
    PlannedGroup,
    Wave,
    WaveLimits,
    WavePlan,
    select,
)
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, MigrationVerdict, Readiness
from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.plugins.fleet_data import check_filters, fleet_summary, read_fleet
from airflow_provider_kip848.plugins.fleet_runs import FLEET_DAG_ID, RunFacts, TaskFact, run_summary
from airflow_provider_kip848.plugins.fleet_view import render_page, render_runs_page
from airflow_provider_kip848.plugins.run_facts import plan_moves

MAP = OwnershipMap.from_obj({"rules": [
    {"prefix": "orders-", "app": "orders", "team": "commerce"},
    {"prefix": "pay-", "app": "payments", "team": "finance"},
    # claims pay-shared-1 too: a conflict the fleet plan refuses
    {"regex": "pay-shared-.*", "app": "ledger", "team": "finance"},
    {"prefix": "search-", "app": "search", "team": "search"},
]}, source="test map")


def entry(gid: str, gtype: GroupType = GroupType.CLASSIC, state: GroupState = GroupState.EMPTY,
          readiness: Readiness = Readiness.READY_ONLINE) -> InventoryEntry:
    return InventoryEntry(group_id=gid, type=gtype, protocol_type="consumer", state=state, coordinator_id=1,
                          member_count=0, members=(), assignor=None, offsets=None, error=None,
                          verdicts=(MigrationVerdict("classic_to_consumer", readiness, "because"),))


FLEET = GroupInventory(taken_at=datetime.now(UTC), elapsed_s=0.1, entries=(
    entry("orders-eu"), entry("orders-us", state=GroupState.STABLE),
    entry("pay-eu", GroupType.CONSUMER), entry("pay-shared-1", readiness=Readiness.BLOCKED),
    entry("<script>alert(1)</script>"),
))


def test_owners_are_the_rules_the_fleet_plan_applies():
    owners = MAP.owners(e.group_id for e in FLEET.entries)
    assert (owners["orders-eu"].app, owners["orders-eu"].team) == ("orders", "commerce")
    assert owners["pay-eu"].app == "payments" and not owners["pay-eu"].conflict
    assert not owners["<script>alert(1)</script>"].owned
    shared = owners["pay-shared-1"]
    assert shared.conflict and shared.claims == (("payments", "finance"), ("ledger", "finance"))
    # the same owner as the plan's first matching rule, and the same conflicts the plan refuses
    assert all(o.app == (r.app if (r := MAP.owner_of(g)) else None) for g, o in owners.items())
    with pytest.raises(OwnershipNotApprovable, match="pay-shared-1"):
        select(FLEET, MAP, apps=["orders"])


def _shown(**filters: str) -> tuple[list[str], str | None]:
    summary = fleet_summary(FLEET, "c", ownership=MAP, filters=check_filters(filters))
    return sorted(g["group_id"] for g in summary["groups"]), summary["filter_note"]


def test_filters_by_owner_readiness_type_and_state_on_the_server():
    assert _shown(team="finance") == (["pay-eu", "pay-shared-1"], None)
    assert _shown(app="ledger") == (["pay-shared-1"], None)  # either claim of a conflict finds it
    assert _shown(app="unowned") == (["<script>alert(1)</script>"], None)
    assert _shown(readiness="blocked") == (["pay-shared-1"], None)
    assert _shown(type="consumer", team="finance") == (["pay-eu"], None)
    assert _shown(state="Stable") == (["orders-us"], None)
    assert _shown(app="", team="") == (sorted(e.group_id for e in FLEET.entries), None)  # the form's "any"
    # a value that matches nothing: an empty table that says which filter, never every group
    assert _shown(app="nope") == ([], "No group matches application 'nope'.")
    assert _shown(team="commerce", type="consumer") == (
        [], "No group matches all of these filters together: team 'commerce', type 'consumer'.")
    with pytest.raises(InvalidArgument, match="readiness='ready' is not one of ready_online"):
        check_filters({"readiness": "ready"})
    with pytest.raises(InvalidArgument, match="type='kafka'"):
        check_filters({"type": "kafka"})
    # refused before the cluster is read (no such connection here: the filter is what the page names)
    code, refused = read_fleet("kip848_no_such_conn", None, None, "/", filters={"state": "Sleeping"})
    assert (code, refused["refused"], refused["groups"]) == (400, "a filter", None)
    assert "Refused: a filter" in render_page(refused) and "state=&#39;Sleeping&#39;" in render_page(refused)


def test_owners_of_an_unreadable_map_are_unknown_never_guessed():
    summary = fleet_summary(FLEET, "c", ownership=None, ownership_error="no Variable",
                            filters=check_filters({"team": "finance"}))
    assert summary["groups"] == [] and "ownership map could not be read: no Variable" in summary["filter_note"]
    everything = fleet_summary(FLEET, "c", ownership=None, ownership_error="no Variable")
    assert {g["owner"]["status"] for g in everything["groups"]} == {"unknown"}
    assert any("Owners unknown" in w for w in everything["warnings"])


class _Groups(HTMLParser):
    """group id -> (its row's attributes, its cells' text)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, tuple[dict, list[str]]] = {}
        self._texts: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self._texts = None
            if "group" in (a.get("class") or "").split():
                self._texts = []
                self.rows[a["data-group"]] = (a, self._texts)

    def handle_data(self, data):
        if self._texts is not None and data.strip():
            self._texts.append(data.strip())


def test_the_fleet_page_shows_owners_flags_conflicts_and_escapes_what_it_shows():
    summary = fleet_summary(FLEET, "c", ownership=MAP, active_runs=1)
    html = render_page(summary, refresh_seconds=30)
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    rows = _Groups()
    rows.feed(html)
    attrs, texts = rows.rows["orders-eu"]
    assert (attrs["data-app"], attrs["data-team"]) == ("orders", "commerce") and texts[4:6] == ["orders", "commerce"]
    attrs, texts = rows.rows["pay-shared-1"]
    assert texts[4:7] == ["payments", "ledger", "claimed by 2"] and "finance" in texts
    assert rows.rows["<script>alert(1)</script>"][0]["data-app"] == "unowned"
    assert "/kip848/runs?group_id=orders-eu" in html  # the fleet runs that move it
    assert '<meta http-equiv="refresh" content="30">' in html
    assert 'id="conflicts"' in html and "pay-shared-1" in html
    # no run active: no reload
    assert "http-equiv" not in render_page(fleet_summary(FLEET, "c", ownership=MAP, active_runs=0))
    filtered = render_page(fleet_summary(FLEET, "c", ownership=MAP, filters={"app": "nope"}))
    assert 'id="filter-note"' in filtered and "No group matches application &#39;nope&#39;." in filtered
    assert '<option value="nope"' not in filtered and '<option value="ledger">' in filtered


# -- the fleet runs -----------------------------------------------------------------------------


def _plan_xcom() -> dict:
    def app(name: str, *groups: str) -> Application:
        planned = tuple(PlannedGroup(group_id=g, type="classic", state="Stable", member_count=1, status="pending",
                                     readiness="ready_online", reason="ready", path="offline") for g in groups)
        return Application(app=name, team="commerce", rule_index=0, groups=planned, status="ready", path="offline",
                           reason="ready")

    plan = WavePlan(migration="classic_to_consumer", waves=(Wave(1, "classic_to_consumer", (app("orders", "orders-eu",
                                                                                            "orders-us"),)),),
                    limits=WaveLimits(canary=1, wave_size=1))
    return {"plan": plan.to_dict(), "markdown": "", "types_before": {"classic": 2}}


def _run(tasks: dict, xcoms: dict | None = None) -> dict:
    facts = tuple(TaskFact(t, i, s) for (t, i), s in {("plan", -1): "success", ("wave_1.open", -1): "success",
                                                      ("wave_1.approval", -1): "success",
                                                      ("wave_1.recheck", -1): "success", **tasks}.items())
    return run_summary(RunFacts(FLEET_DAG_ID, "r1", "running", tasks=facts,
                                xcoms={("plan", -1, "return_value"): _plan_xcom(), **(xcoms or {})}))


def test_a_wave_validating_says_so_not_unknown():
    moved = {("wave_1.migrate", 0): "success", ("wave_1.to_validate", -1): "success"}
    wave = _run({**moved, ("wave_1.validate", -1): "running", ("wave_1.judge", -1): None})["waves"][0]
    assert (wave["status"], wave["status_reason"]) == ("validating", "wave_1.validate running")
    assert wave["tasks"]["validate"]["state"] == "running"
    # between the validation and the judge (neither queued yet): running, naming what comes next
    wave = _run({**moved, ("wave_1.validate", -1): "success", ("wave_1.judge", -1): None})["waves"][0]
    assert (wave["status"], wave["status_reason"]) == ("running", "next: wave_1.judge")


def test_each_groups_step_during_a_move_from_what_the_move_records():
    state = MoveState(app="orders", kind="migrate", path="offline", started_at=1.0, position=3)  # wait_empty next
    waiting = state.progress(["orders-eu", "orders-us"], 2.0, pending={"orders-eu": None, "orders-us": "wait_empty"})
    assert state.next_step is Step.WAIT_EMPTY and waiting.groups == {"orders-eu": "done", "orders-us": "wait_empty"}
    xcom = json.loads(json.dumps(waiting.to_dict()))  # as XCom keeps it
    summary = _run({("wave_1.migrate", 0): "deferred"}, {("wave_1.migrate", 0, "fleet_progress"): xcom})
    app = summary["waves"][0]["applications"][0]
    assert (app["step"]["step"], app["step"]["label"]) == ("wait_empty", "wait_empty (4/9), deferred")
    assert [(g["group_id"], g["step"]) for g in app["groups"]] == [("orders-eu", "done"), ("orders-us", "wait_empty")]
    html = render_runs_page(_summary_of(summary))
    assert 'data-step="wait_empty"' in html and "step: wait_empty (4/9), deferred" in html
    # a move that has recorded nothing yet, or something that does not parse: unknown, with the reason
    for xcoms, why in (({}, "recorded no step yet"), ({("wave_1.migrate", 0, "fleet_progress"): {"app": 1}},
                                                      "unreadable")):
        app = _run({("wave_1.migrate", 0): "running"}, xcoms)["waves"][0]["applications"][0]
        assert app["step"]["label"] == "unknown" and why in app["step"]["error"]
        assert {g["step"] for g in app["groups"]} == {"unknown"}
    # finished (its result says the rest) or not started: no step
    assert _run({("wave_1.migrate", 0): None})["waves"][0]["applications"][0]["step"] is None


def _summary_of(run: dict) -> dict:
    return {"dag_id": FLEET_DAG_ID, "dag_exists": True, "error": None, "warnings": [], "limit": 5, "run_id": None,
            "group_id": None, "dag_url": "/dags/x", "active": True, "runs": [run]}


def test_the_fleet_runs_of_a_group_are_those_whose_plan_moves_it():
    plan = _plan_xcom()
    assert plan_moves(plan, "orders-us") and not plan_moves(plan, "orders") and not plan_moves({"plan": 1}, "x")
    run = _run({("wave_1.migrate", 0): "success"})
    assert run["report_url"] == f"/kip848-reports/{FLEET_DAG_ID}/r1"
    html = render_runs_page(_summary_of({**run, "run_id": "a/b c", "report_url": "/kip848-reports/d/a%2Fb%20c"}))
    assert 'href="/kip848-reports/d/a%2Fb%20c"' in html

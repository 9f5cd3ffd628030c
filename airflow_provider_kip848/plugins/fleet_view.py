"""The fleet view: every group of a cluster by type, state and readiness, as a page of the Airflow UI.

An Airflow 3 plugin (:class:`FleetViewPlugin`) that the API server mounts at ``/kip848``:

* ``GET /kip848/fleet``: an HTML page (server-side rendered, no external assets) with the counts by
  type, state and readiness of each migration, and every group in a table grouped by type and state
  (members, lag, a readiness badge per migration with its reason, links into the Airflow UI), with a
  filter box;
* ``GET /kip848/fleet.json``: the same summary as JSON;
* ``GET /kip848/runs``: the latest runs of the fleet migration DAG (``kip848_fleet_migration``): per run its
  plan's waves, each wave's status, and per application and group its progress (the mapped task instance's
  state, its result, its rollback), with links to the task instances in the Airflow UI;
* ``GET /kip848/runs.json``: the same as JSON (:mod:`.fleet_runs` reads and summarises them).

The fleet pages take ``conn_id`` (a ``kafka_admin`` connection, default ``kafka_admin_default``) and optionally
``group_ids`` (comma-separated: only those groups; given but empty: a 400, never every group) and
``timeout_s``. The facts come from one
:meth:`~airflow_provider_kip848.hooks.admin.KafkaGroupAdminHook.inventory` call (batched requests).
A cluster that does not answer is an error banner with its message (HTTP 502), never an empty fleet;
a fact that could not be read is shown as ``unknown``.

The runs pages take ``dag_id`` (default ``kip848_fleet_migration``), ``limit`` (runs, newest first, default
5) and optionally ``run_id`` (that run only). Their facts come from Airflow's metadata DB, read in the API
server's process with Airflow's own models: no cluster is read.

The UI entries are external views in the navigation: "Kafka fleet" (the Airflow UI shows the page in a
frame under ``/plugin/kip848-fleet``) and "Fleet migration runs" (``/plugin/kip848-fleet-runs``); each page
links to the other.

Authentication: Airflow does not protect plugin apps. Every request here goes through the same
check as the REST API (the JWT of the ``Authorization: Bearer`` header or of the UI's session
cookie, resolved by the API server's ``get_user``), and the user must be allowed to read the
connection (``is_authorized_connection(GET)``): the page reads the cluster with that connection's
credentials. The runs pages need instead the permission to read the DAG's runs, task instances and XComs
(``is_authorized_dag(GET)`` for each of these access entities, with the DAG's team). Without a valid
token: 401; without the permission: 403.

Links: the Airflow UI has no trigger form that can be prefilled from the URL, so each group links
to the DAG runs list filtered on the runs whose conf mentions the group (``/dag_runs?conf_contains=
"<group>"``, from which each run's task instances are one click away) and to the DAG of each
migration its readiness allows (``/dags/<dag_id>``, where the trigger form takes the group id). On the
runs page each application links to its mapped task instance
(``/dags/<dag_id>/runs/<run_id>/tasks/<task_id>/mapped/<map_index>``), each wave to its task group
(``/dags/<dag_id>/runs/<run_id>/tasks/group/wave_<k>``), each run to its page.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote, urlencode

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.kafka.errors import ConnectionNotFound, Kip848Error
from airflow_provider_kip848.kafka.inventory import GroupInventory, InventoryEntry, Readiness
from airflow_provider_kip848.kafka.model import GroupState
from airflow_provider_kip848.plugins.fleet_runs import FLEET_DAG_ID, read_runs, runs_summary

if TYPE_CHECKING:
    from airflow.api_fastapi.auth.managers.models.base_user import BaseUser

URL_PREFIX = "/kip848"
#: the external views' routes in the UI (``/plugin/<route>``)
UI_ROUTE = "kip848-fleet"
RUNS_UI_ROUTE = "kip848-fleet-runs"
#: migration -> readiness -> the example DAG that runs it (no DAG: nothing to run until the reason is fixed)
MIGRATION_DAGS: dict[str, dict[str, str]] = {
    "classic_to_consumer": {Readiness.READY_ONLINE: "kip848_consumer_rolling_upgrade",
                            Readiness.OFFLINE_ONLY: "kip848_consumer_offline_migration"},
    "consumer_to_classic": {Readiness.READY_ONLINE: "kip848_consumer_offline_migration",
                            Readiness.OFFLINE_ONLY: "kip848_consumer_offline_migration"},
    "classic_to_streams": {Readiness.READY_ONLINE: "kip1071_streams_offline_migration",
                           Readiness.OFFLINE_ONLY: "kip1071_streams_offline_migration"},
    "streams_to_classic": {Readiness.READY_ONLINE: "kip1071_streams_rollback_to_classic",
                           Readiness.OFFLINE_ONLY: "kip1071_streams_rollback_to_classic"},
}
#: runs on the runs page: by default, at most
DEFAULT_RUNS, MAX_RUNS = 5, 50
READINESS_ORDER = [r.value for r in (Readiness.READY_ONLINE, Readiness.OFFLINE_ONLY, Readiness.BLOCKED,
                                     Readiness.UNKNOWN)]
UNKNOWN = "unknown"


# -- the summary (pure) -------------------------------------------------------------------------


def group_links(entry: InventoryEntry, ui_base: str = "/") -> dict[str, Any]:
    """The Airflow UI pages of one group: the DAG runs whose conf names it, and the DAG of each migration."""
    runs = f"{ui_base}dag_runs?{urlencode({'conf_contains': json.dumps(entry.group_id)}, quote_via=quote)}"
    dags = {}
    for v in entry.verdicts:
        dag_id = MIGRATION_DAGS.get(v.migration, {}).get(v.readiness)
        if dag_id:
            dags[v.migration] = {"dag_id": dag_id, "url": f"{ui_base}dags/{dag_id}"}
    return {"runs": runs, "dags": dags}


def _group_row(entry: InventoryEntry, ui_base: str) -> dict[str, Any]:
    return {
        "group_id": entry.group_id,
        "type": entry.type.value,
        "state": entry.state.value,
        "members": entry.member_count,
        "is_mixed": entry.is_mixed,
        "lag": entry.lag,
        "assignor": entry.assignor,
        "error": entry.error,
        "offsets_error": entry.offsets_error,
        "verdicts": [{"migration": v.migration, "readiness": v.readiness.value, "reason": v.reason,
                      "remedy": v.remedy} for v in entry.verdicts],
        "links": group_links(entry, ui_base),
    }


def fleet_summary(inventory: GroupInventory, conn_id: str, ui_base: str = "/") -> dict[str, Any]:
    """What the page shows, as plain JSON: counts by type, state and readiness, and one row per group.

    ``ui_base``: the Airflow UI's base path, for the groups' links.
    """
    by_type_state: dict[str, Counter[str]] = {}
    for e in inventory.entries:
        by_type_state.setdefault(e.type.value, Counter())[e.state.value] += 1
    warnings = []
    if inventory.unanswered_brokers:
        warnings.append("Incomplete: brokers " + ", ".join(f"{n} ({err})" for n, err in
                                                           sorted(inventory.unanswered_brokers.items()))
                        + " did not answer ListGroups; the groups they coordinate may be missing.")
    if inventory.cluster_error:
        warnings.append(f"The cluster-wide facts could not be read, every verdict is unknown: "
                        f"{inventory.cluster_error}")
    if inventory.absent:
        warnings.append("Not found on the cluster: " + ", ".join(inventory.absent))
    return {
        "conn_id": conn_id,
        "error": None,
        "warnings": warnings,
        "taken_at": inventory.taken_at.isoformat(),
        "elapsed_s": round(inventory.elapsed_s, 3),
        "complete": inventory.complete,
        "unanswered_brokers": {str(k): v for k, v in sorted(inventory.unanswered_brokers.items())},
        "cluster_error": inventory.cluster_error,
        "absent": list(inventory.absent),
        "group_count": len(inventory),
        "by_type": dict(sorted(Counter(e.type.value for e in inventory.entries).items())),
        "by_state": dict(sorted(Counter(e.state.value for e in inventory.entries).items())),
        "by_type_state": {t: dict(sorted(c.items())) for t, c in sorted(by_type_state.items())},
        "readiness": inventory.readiness_counts(),
        "unknown_groups": len(inventory.unknown),
        "groups": [_group_row(e, ui_base) for e in inventory.entries],
    }


def error_summary(conn_id: str, exc: BaseException) -> dict[str, Any]:
    """What the page shows when there is no inventory: the error, never an empty fleet."""
    return {"conn_id": conn_id, "error": str(exc), "error_type": type(exc).__name__, "groups": None}


# -- the page (pure) ----------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px;color:#1f2937;font-size:14px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
.meta{color:#6b7280;margin-bottom:10px} form.conn{margin:8px 0}
.banner{padding:10px 12px;border-radius:6px;margin:8px 0}
.banner.error{background:#fee2e2;border:1px solid #ef4444;color:#7f1d1d}
.banner.warning{background:#fef3c7;border:1px solid #f59e0b;color:#78350f}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #e5e7eb;border-radius:6px;padding:8px 12px;min-width:160px}
.card h3{font-size:12px;text-transform:uppercase;color:#6b7280;margin:0 0 4px}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e5e7eb}
table.counts td,table.counts th{padding:2px 8px}
tr.section td{background:#f3f4f6;font-weight:600}
.badge{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;margin:1px 2px;white-space:nowrap}
.ready_online{background:#dcfce7;color:#14532d}.offline_only{background:#dbeafe;color:#1e3a8a}
.blocked{background:#fee2e2;color:#7f1d1d}.unknown{background:#e5e7eb;color:#374151}
.reason{color:#6b7280;font-size:12px} .num{text-align:right} input#filter{width:320px;padding:4px}
nav.pages{margin:0 0 8px} nav.pages a{margin-right:12px}
section.run{border:1px solid #e5e7eb;border-radius:6px;padding:8px 12px;margin:12px 0}
section.run h2{margin:0 0 4px} h3{font-size:14px;margin:12px 0 4px} details>summary{cursor:pointer}
tr.app-group td{color:#374151;font-size:12px;border-bottom:1px dotted #e5e7eb} tr.app-group td.gid{padding-left:24px}
.s-success,.s-done_ok,.s-ok{background:#dcfce7;color:#14532d}
.s-failed,.s-upstream_failed,.s-stopped_by_budget,.s-stopped,.s-rejected{background:#fee2e2;color:#7f1d1d}
.s-running,.s-queued,.s-scheduled,.s-deferred,.s-restarting{background:#dbeafe;color:#1e3a8a}
.s-up_for_retry,.s-up_for_reschedule,.s-done_with_failures,.s-awaiting_input,.s-waiting_for_approval{background:#fef3c7;color:#78350f}
.s-skipped,.s-removed,.s-not_reached,.s-none,.s-unknown{background:#e5e7eb;color:#374151}
.canary{background:#ede9fe;color:#4c1d95} code{font-size:12px}
"""

_FILTER_JS = """
document.getElementById('filter').addEventListener('input', function (ev) {
  var q = ev.target.value.trim().toLowerCase(), shown = 0;
  document.querySelectorAll('tr.group').forEach(function (tr) {
    var hit = !q || tr.dataset.search.indexOf(q) >= 0; tr.hidden = !hit; if (hit) shown++;
  });
  document.querySelectorAll('tr.section').forEach(function (tr) {
    tr.hidden = !document.querySelector('tr.group[data-section="' + tr.dataset.section + '"]:not([hidden])');
  });
  document.getElementById('shown').textContent = shown;
});
"""

# Links into the Airflow UI: inside the UI's frame (sandboxed without top navigation) the top page's
# router is moved with history.pushState + popstate (same origin); anywhere else the link is a link.
_LINKS_JS = """
document.querySelectorAll('a.airflow').forEach(function (a) {
  a.addEventListener('click', function (ev) {
    if (window.top === window || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    try {
      window.top.history.pushState(null, '', a.href);
      window.top.dispatchEvent(new PopStateEvent('popstate', {state: null}));
      ev.preventDefault();
    } catch (e) { /* not same-origin: follow the link in the frame */ }
  });
});
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _fact(value: object) -> str:
    return UNKNOWN if value is None else _e(value)


def _counts_table(title: str, counts: dict[str, int]) -> str:
    rows = "".join(f"<tr><td>{_e(k)}</td><td class='num'>{v}</td></tr>" for k, v in counts.items())
    return f"<div class='card'><h3>{_e(title)}</h3><table class='counts'>{rows or '<tr><td>none</td></tr>'}" \
           f"</table></div>"


def _readiness_table(readiness: dict[str, dict[str, int]]) -> str:
    head = "".join(f"<th><span class='badge {r}'>{r}</span></th>" for r in READINESS_ORDER)
    rows = "".join(f"<tr><td>{_e(m)}</td>" + "".join(f"<td class='num'>{c.get(r, 0)}</td>" for r in READINESS_ORDER)
                   + "</tr>" for m, c in readiness.items())
    return f"<table class='counts' id='readiness'><tr><th>migration</th>{head}</tr>{rows}</table>"


def _verdict_cell(group: dict[str, Any]) -> str:
    parts = []
    for v in group["verdicts"]:
        title = v["reason"] + (f" Remedy: {v['remedy']}" if v["remedy"] else "")
        parts.append(f"<div><span class='badge {_e(v['readiness'])}' title='{_e(title)}'>{_e(v['migration'])}: "
                     f"{_e(v['readiness'])}</span> <span class='reason'>{_e(v['reason'])}</span></div>")
    return "".join(parts) or "<span class='reason'>no migration applies</span>"


def _links_cell(group: dict[str, Any]) -> str:
    links = [f"<a class='airflow' href='{_e(group['links']['runs'])}'>DAG runs</a>"]
    for migration, dag in group["links"]["dags"].items():
        links.append(f"<a class='airflow' href='{_e(dag['url'])}' title='{_e(migration)}'>{_e(dag['dag_id'])}</a>")
    return "<br>".join(links)


def _state(state: str) -> str:
    return UNKNOWN if state == GroupState.UNKNOWN.value else state


def _group_rows(groups: list[dict[str, Any]]) -> str:
    sections: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for g in sorted(groups, key=lambda g: (g["type"], _state(g["state"]), g["group_id"])):
        sections.setdefault((g["type"], _state(g["state"])), []).append(g)
    out = []
    for (gtype, state), members in sections.items():
        section = f"{gtype}/{state}"
        out.append(f"<tr class='section' data-section='{_e(section)}'><td colspan='6'>{_e(gtype)} &middot; "
                   f"{_e(state)} ({len(members)})</td></tr>")
        for g in members:
            search = " ".join([g["group_id"], gtype, state, *(v["readiness"] for v in g["verdicts"])]).lower()
            error = f"<div class='reason'>{_e(g['error'])}</div>" if g["error"] else ""
            mixed = " <span class='badge unknown'>mixed</span>" if g["is_mixed"] else ""
            out.append(f"<tr class='group' data-section='{_e(section)}' data-group='{_e(g['group_id'])}' "
                       f"data-search='{_e(search)}'><td>{_e(g['group_id'])}{mixed}{error}</td>"
                       f"<td>{_e(state)}</td><td class='num'>{_fact(g['members'])}</td>"
                       f"<td class='num'>{_fact(g['lag'])}</td><td>{_verdict_cell(g)}</td>"
                       f"<td>{_links_cell(g)}</td></tr>")
    return "".join(out)


def _nav(current: str) -> str:
    """Links between the plugin's pages (relative: they stay in the UI's frame)."""
    pages = (("fleet", "Kafka fleet"), ("runs", "Fleet migration runs"))
    return "<nav class='pages'>" + "".join(
        f"<b>{_e(label)}</b>" if page == current else f"<a href='{page}' id='nav-{page}'>{_e(label)}</a>"
        for page, label in pages) + "</nav>"


def render_page(summary: dict[str, Any]) -> str:
    """The fleet page for a :func:`fleet_summary` (or an :func:`error_summary`: the error banner only)."""
    conn_id = summary["conn_id"]
    form = (f"{_nav('fleet')}<form class='conn' method='get'><label>Connection "
            f"<input name='conn_id' value='{_e(conn_id)}'></label> <button type='submit'>Read the cluster</button>"
            "</form>")
    head = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Kafka fleet - {_e(conn_id)}</title>"
            f"<style>{_CSS}</style></head><body><h1>Kafka fleet</h1>")
    if summary.get("error") is not None:
        return (f"{head}{form}<div class='banner error' role='alert' id='error'><b>The cluster of connection "
                f"{_e(conn_id)} could not be read</b> ({_e(summary.get('error_type', 'error'))}): "
                f"{_e(summary['error'])}</div></body></html>")
    banners = "".join(f"<div class='banner warning' role='status'>{_e(w)}</div>" for w in summary["warnings"])
    meta = (f"<div class='meta'>connection <b>{_e(conn_id)}</b> &middot; {summary['group_count']} groups "
            f"&middot; read {_e(summary['taken_at'])} in {summary['elapsed_s']} s"
            f"{'' if summary['complete'] else ' &middot; <b>incomplete</b>'}</div>")
    cards = ("<div class='cards'>" + _counts_table("groups by type", summary["by_type"])
             + _counts_table("groups by state", summary["by_state"]) + "</div>")
    table = ("<h2>Groups</h2><p><input id='filter' type='search' placeholder='Filter: group id, type, state, "
             f"readiness' aria-label='Filter groups'> <span id='shown'>{summary['group_count']}</span> shown</p>"
             "<table id='groups'><tr><th>group</th><th>state</th><th class='num'>members</th>"
             "<th class='num'>lag</th><th>readiness</th><th>in Airflow</th></tr>"
             f"{_group_rows(summary['groups'])}</table>")
    return (f"{head}{form}{meta}{banners}{cards}<h2>Readiness by migration</h2>"
            f"{_readiness_table(summary['readiness'])}{table}<script>{_FILTER_JS}{_LINKS_JS}</script></body></html>")


# -- the runs page (pure) -----------------------------------------------------------------------


def _when(iso: str | None) -> str:
    """An ISO time as the page shows it (seconds, UTC); none: a dash."""
    if not iso:
        return "&ndash;"
    return _e(iso[:19].replace("T", " ") + (" UTC" if iso.endswith("+00:00") else iso[19:]))


def _badge(key: str | None, label: str, title: str = "") -> str:
    cls = "s-" + (key or "none").replace(" ", "_")
    tip = f" title='{_e(title)}'" if title else ""
    return f"<span class='badge {_e(cls)}'{tip}>{_e(label)}</span>"


def _ti_cell(ti: dict[str, Any]) -> str:
    """A task instance's state as a badge, linked to its page in the UI."""
    badge = _badge(ti["state"] if ti["exists"] else "none", ti["label"])
    if not ti["exists"] or not ti["url"]:
        return badge
    tries = f" <span class='reason'>try {ti['try_number']}</span>" if (ti["try_number"] or 0) > 1 else ""
    return f"<a class='airflow' href='{_e(ti['url'])}'>{badge}</a>{tries}"


def _gap(result: dict[str, Any] | None) -> str:
    if result is None:
        return "&ndash;"
    return "not measured" if result["gap_s"] is None else f"{result['gap_s']:.1f} s"


def _result_cell(app: dict[str, Any]) -> str:
    result = app["result"]
    if result is None:
        if app["result_error"]:
            return f"{_badge('unknown', 'unreadable')} <span class='reason'>{_e(app['result_error'])}</span>"
        return "<span class='reason'>not recorded</span>"
    source = " <span class='reason'>(from the judge's record)</span>" if app["result_source"] == "judge" else ""
    failed = (f" <span class='reason'>failed steps: {_e(', '.join(result['failed_steps']))}</span>"
              if result["failed_steps"] else "")
    return (_badge("ok" if result["ok"] else "failed", "ok" if result["ok"] else "failed") + source
            + (f"<div class='reason'>{_e(result['detail'])}</div>" if result["detail"] else "") + failed)


def _rollback_cell(rollback: dict[str, Any]) -> str:
    if rollback["exists"]:
        result = rollback["result"]
        outcome = ("" if result is None else " " + _badge("ok" if result["ok"] else "failed",
                                                          "rolled back" if result["ok"] else "rollback failed"))
        error = f" <span class='reason'>{_e(rollback['result_error'])}</span>" if rollback["result_error"] else ""
        return _ti_cell(rollback) + outcome + error
    if rollback["needed"] is False:
        return "<span class='reason'>not needed</span>"
    if rollback["needed"]:
        return _badge("none", "not created")
    return "<span class='reason'>not judged yet</span>"


def _group_progress(g: dict[str, Any], wave: int, app: str) -> str:
    """A group's row under its application: type before and readiness, its outcome, its rollback."""
    if g["ok"] is None:
        outcome = "<span class='reason'>no result</span>"
    else:
        outcome = (_badge("ok" if g["ok"] else "failed", "ok" if g["ok"] else "failed")
                   + f" {_fact(g['type_after'])} &middot; {_fact(g['state_after'])} &middot; "
                   f"{_fact(g['members_after'])} members"
                   + (f"<div class='reason'>{_e(g['detail'])}</div>" if g["detail"] else ""))
    back = "" if g["rollback_ok"] is None else (
        _badge("ok" if g["rollback_ok"] else "failed", "back" if g["rollback_ok"] else "not back")
        + f" {_fact(g['rollback_type_after'])}")
    return (f"<tr class='app-group' data-wave='{wave}' data-app='{_e(app)}' data-group='{_e(g['group_id'])}'>"
            f"<td class='gid'>{_e(g['group_id'])}</td><td>{_fact(g['type_before'])}</td>"
            f"<td>{_fact(g['readiness'])}</td><td></td><td>{outcome}</td><td></td><td>{back}</td></tr>")


def _apps_table(wave: dict[str, Any]) -> str:
    k = wave["number"]
    rows = []
    for a in wave["applications"]:
        state = a["migrate"]["state"] if a["migrate"]["exists"] else "not_created"
        link = (f"<a class='airflow' href='{_e(a['migrate']['url'])}'>{_e(a['app'])}</a>" if a["migrate"]["url"]
                else _e(a["app"]))
        task = (_badge("ok", "already migrated", "the recheck found it migrated since the plan: not moved")
                if a["already_migrated"] else _ti_cell(a["migrate"]))
        rows.append(f"<tr class='app' data-wave='{k}' data-app='{_e(a['app'])}' data-state='{_e(state)}'>"
                    f"<td>{link}</td><td>{_fact(a['team'])}</td><td>{_fact(a['path'])}</td>"
                    f"<td>{task}</td><td>{_result_cell(a)}</td><td>{_gap(a['result'])}</td>"
                    f"<td>{_rollback_cell(a['rollback'])}</td></tr>")
        rows += [_group_progress(g, k, a["app"]) for g in a["groups"]]
    opened = " open" if wave["status"] not in ("not_reached", "done_ok") else ""
    return (f"<details class='wave-apps' data-wave='{k}'{opened}><summary>Wave {k}: "
            f"{wave['app_count']} application(s), {wave['group_count']} group(s) &middot; "
            f"{_e(wave['status_label'])}</summary><table class='apps' data-wave='{k}'><tr><th>application / group</th>"
            "<th>team / type before</th><th>path / readiness</th><th>task</th><th>result</th><th>gap</th>"
            f"<th>rollback</th></tr>{''.join(rows)}</table></details>")


def _approval(wave: dict[str, Any]) -> str:
    """Who answered and when (the judge's record, else the approval's answer), else the approval task's state."""
    record, answer = wave["record"], wave["approval"]
    if record and record["approved_by"]:
        return f"{_e(record['approved_by'])} <span class='reason'>{_e(record['approved_at'] or '')}</span>"
    if answer and answer["decision"]:
        refused = f"<div class='reason'>refused: {_e(answer['refused'])}</div>" if answer["refused"] else ""
        return (f"{_e(answer['decision'])} by {_fact(answer['by'])} <span class='reason'>{_e(answer['at'] or '')}"
                f"</span>{refused}")
    return _ti_cell(wave["tasks"]["approval"])


def _waves_table(run: dict[str, Any]) -> str:
    rows = []
    for w in run["waves"]:
        canary = " " + _badge("canary", "canary") if w["canary"] else ""
        oversized = " " + _badge("unknown", "oversized") if w["oversized"] else ""
        apps = ", ".join(w["apps"])
        rows.append(f"<tr class='wave' data-wave='{w['number']}' data-status='{_e(w['status'])}'>"
                    f"<td><a class='airflow' href='{_e(w['url'])}'>wave {w['number']}</a>{canary}{oversized}</td>"
                    f"<td class='num'>{w['app_count']}</td><td class='reason'>{_e(apps)}</td>"
                    f"<td class='num'>{w['group_count']}</td>"
                    f"<td><code title='{_e(w['wave_hash'])}'>{_e(w['wave_hash_short'])}</code></td>"
                    f"<td>{_badge(w['status'], w['status_label'])}<div class='reason'>{_e(w['status_reason'])}</div>"
                    f"</td><td>{_approval(w)}</td></tr>")
    return ("<table class='waves'><tr><th>wave</th><th class='num'>apps</th><th>applications</th>"
            "<th class='num'>groups</th><th>hash</th><th>status</th><th>approval</th></tr>"
            f"{''.join(rows)}</table>")


def _plan_meta(run: dict[str, Any]) -> str:
    plan, progress = run["plan"], run["progress"]
    summary = plan["summary"]
    counts = ", ".join(f"{summary[k]} {k.replace('_', ' ')}" for k in
                       ("waves", "applications", "groups", "held_back", "migrated", "unowned") if k in summary)
    done = (f" &middot; applications: {progress['ok']} ok, {progress['failed']} failed, {progress['running']} running,"
            f" {progress['not_started']} not started"
            + (f", {progress['already_migrated']} found already migrated" if progress["already_migrated"] else ""))
    return (f"<div class='meta plan'>plan {_fact(plan['migration'])} <code title='{_e(plan['plan_hash'] or '')}'>"
            f"{_fact(plan['plan_hash_short'])}</code> &middot; {_e(counts)}{done}</div>")


def _run_section(run: dict[str, Any]) -> str:
    head = (f"<h2><a class='airflow' href='{_e(run['url'])}'>{_e(run['run_id'])}</a> "
            f"{_badge(run['state'], run['state'] or 'no status')}</h2>"
            f"<div class='meta'>started {_when(run['start_date'])} &middot; ended {_when(run['end_date'])}"
            f"{' &middot; by ' + _e(run['triggered_by']) if run['triggered_by'] else ''} &middot; plan "
            f"{_ti_cell(run['plan_task'])} &middot; report {_ti_cell(run['report_task'])}</div>")
    if run["plan_status"] == "not recorded":
        body = (f"<div class='banner warning plan-missing' role='status'><b>Plan not recorded</b>: the plan task "
                f"({_e(run['plan_task']['label'])}) left no plan in XCom; the waves of this run are unknown.</div>")
    elif run["plan_status"] != "recorded":
        body = (f"<div class='banner error plan-missing' role='status'><b>Plan unreadable</b>: "
                f"{_e(run['plan_error'])}; the waves of this run are unknown.</div>")
    elif not run["waves"]:
        body = _plan_meta(run) + "<p class='no-waves'>The plan has no wave: no application to migrate.</p>"
    else:
        body = _plan_meta(run) + _waves_table(run) + "".join(_apps_table(w) for w in run["waves"])
    return f"<section class='run' data-run-id='{_e(run['run_id'])}'>{head}{body}</section>"


def render_runs_page(summary: dict[str, Any]) -> str:
    """The fleet runs page for a :func:`~.fleet_runs.runs_summary` (or an error: the banner only)."""
    dag_id = summary["dag_id"]
    head = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Fleet migration runs - "
            f"{_e(dag_id)}</title><style>{_CSS}</style></head><body><h1>Fleet migration runs</h1>{_nav('runs')}"
            f"<form class='conn' method='get'><label>DAG <input name='dag_id' value='{_e(dag_id)}'></label> "
            f"<label>runs <input name='limit' type='number' min='1' max='{MAX_RUNS}' "
            f"value='{_e(summary.get('limit') or DEFAULT_RUNS)}'></label> <button type='submit'>Show</button></form>")
    if summary.get("error") is not None:
        return (f"{head}<div class='banner error' role='alert' id='error'><b>The runs of {_e(dag_id)} could not be "
                f"read</b> ({_e(summary.get('error_type', 'error'))}): {_e(summary['error'])}</div></body></html>")
    banners = "".join(f"<div class='banner warning' role='status'>{_e(w)}</div>" for w in summary["warnings"])
    meta = (f"<div class='meta'>DAG <a class='airflow' href='{_e(summary['dag_url'])}'>{_e(dag_id)}</a> &middot; "
            f"{len(summary['runs'])} run(s), newest first</div>")
    runs = "".join(_run_section(r) for r in summary["runs"]) or \
        f"<p id='no-runs'>No run of {_e(dag_id)}{' with this id' if summary.get('run_id') else ''}.</p>"
    return f"{head}{meta}{banners}{runs}<script>{_LINKS_JS}</script></body></html>"


# -- the app ------------------------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False)


async def authorized_user(request: Request, conn_id: Annotated[str, Query()] = DEFAULT_CONN_ID,
                          credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None,
                          ) -> BaseUser:
    """The signed-in user (the REST API's own check: bearer token or the UI's cookie), allowed to read
    ``conn_id``; 401 without a valid token, 403 without the permission."""
    # The API server's security module: ~2 s to import and only the API server serves requests, while every
    # Airflow process (scheduler, each task) loads plugins: imported where a request is served.
    from airflow.api_fastapi.app import get_auth_manager  # noqa: PLC0415 - see above
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails  # noqa: PLC0415
    from airflow.api_fastapi.core_api.security import get_user  # noqa: PLC0415 - see above

    user = await get_user(request, None, credentials)
    if not get_auth_manager().is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=conn_id),
                                                       user=user):
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"Forbidden: the fleet view reads the cluster with connection {conn_id!r}, "
                            "which this user may not read")
    return user


#: what the runs pages read of a DAG: its runs, their task instances and their XComs
RUNS_ACCESS = ("RUN", "TASK_INSTANCE", "XCOM")


async def authorized_dag_reader(request: Request, dag_id: Annotated[str, Query()] = FLEET_DAG_ID,
                                credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)] = None,
                                ) -> BaseUser:
    """The signed-in user (as :func:`authorized_user`), allowed to read ``dag_id``'s runs, task instances and
    XComs (``is_authorized_dag(GET)`` for each, with the DAG's team, as the REST API checks them); 401 without
    a valid token, 403 without the permission."""
    # The API server's security module and the metadata DB's models: imported where a request is served
    # (see authorized_user).
    from airflow.api_fastapi.app import get_auth_manager  # noqa: PLC0415 - see above
    from airflow.api_fastapi.auth.managers.models.resource_details import (  # noqa: PLC0415 - see above
        DagAccessEntity,
        DagDetails,
    )
    from airflow.api_fastapi.core_api.security import get_user  # noqa: PLC0415 - see above
    from airflow.models.dag import DagModel  # noqa: PLC0415 - see above

    user = await get_user(request, None, credentials)
    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id))
    manager = get_auth_manager()
    refused = [entity for entity in RUNS_ACCESS
               if not manager.is_authorized_dag(method="GET", access_entity=DagAccessEntity[entity], details=details,
                                                user=user)]
    if refused:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"Forbidden: the fleet runs view reads the runs, task instances and XComs of DAG "
                            f"{dag_id!r}; this user may not read its {', '.join(e.lower() for e in refused)}")
    return user


def _ui_base(request: Request) -> str:
    """The Airflow UI's base path, from where the API server mounted this app."""
    root = request.scope.get("root_path", "") or ""
    return root.removesuffix(URL_PREFIX).rstrip("/") + "/"


def read_fleet(conn_id: str, group_ids: Iterable[str] | None, timeout_s: float | None,
               ui_base: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, summary) of the cluster behind ``conn_id``: 200, 404 (no such connection), 400 (bad
    input) or 502 (the cluster did not answer) with the error."""
    try:
        with KafkaGroupAdminHook(conn_id) as hook:
            inventory = hook.inventory(group_ids, timeout_s=timeout_s)
    except ConnectionNotFound as exc:
        return status.HTTP_404_NOT_FOUND, error_summary(conn_id, exc)
    except (ValueError, TypeError) as exc:
        return status.HTTP_400_BAD_REQUEST, error_summary(conn_id, exc)
    except Kip848Error as exc:
        return status.HTTP_502_BAD_GATEWAY, error_summary(conn_id, exc)
    return status.HTTP_200_OK, fleet_summary(inventory, conn_id, ui_base)


def _group_ids(raw: str | None) -> list[str] | None:
    """``a,b`` -> ["a", "b"] (each checked by the inventory: a bad id is a 400); None (no ``group_ids``): every
    group. Given but naming none (``group_ids=`` or ``,``): [], which the inventory refuses (a 400), never the
    whole fleet."""
    return None if raw is None else [g.strip() for g in raw.split(",") if g.strip()]


def read_fleet_runs(dag_id: str, limit: int, run_id: str | None, ui_base: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, summary) of the latest runs of ``dag_id``: 200, or 503 with the error when the metadata
    DB could not be read."""
    from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415 - with the models, where a request is served

    try:
        dag_exists, runs = read_runs(dag_id, limit, run_id)
    except SQLAlchemyError as exc:
        return status.HTTP_503_SERVICE_UNAVAILABLE, {"dag_id": dag_id, "limit": limit, "run_id": run_id,
                                                     "error": str(exc), "error_type": type(exc).__name__,
                                                     "runs": None}
    return status.HTTP_200_OK, runs_summary(dag_id, dag_exists, runs, ui_base, limit=limit, run_id=run_id)


UserDep = Annotated[Any, Depends(authorized_user)]
DagReaderDep = Annotated[Any, Depends(authorized_dag_reader)]
DagIdQuery = Annotated[str, Query(description="the fleet migration DAG")]
LimitQuery = Annotated[int, Query(ge=1, le=MAX_RUNS, description="runs, newest first")]
RunIdQuery = Annotated[str | None, Query(description="only this run")]
ConnIdQuery = Annotated[str, Query(description="a kafka_admin connection")]
GroupIdsQuery = Annotated[str | None, Query(description="comma-separated group ids (default: every group)")]
TimeoutQuery = Annotated[float | None, Query(gt=0, le=600, description="seconds (default: the connection's)")]

app = FastAPI(title="Kafka fleet (airflow-provider-kip848)", docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/fleet.json")
def fleet_json(request: Request, user: UserDep, conn_id: ConnIdQuery = DEFAULT_CONN_ID,
               group_ids: GroupIdsQuery = None, timeout_s: TimeoutQuery = None) -> JSONResponse:
    """The fleet summary as JSON (``error`` set, with an HTTP error status, when there is none)."""
    code, summary = read_fleet(conn_id, _group_ids(group_ids), timeout_s, _ui_base(request))
    return JSONResponse(summary, status_code=code)


@app.get("/fleet", response_class=HTMLResponse)
def fleet_page(request: Request, user: UserDep, conn_id: ConnIdQuery = DEFAULT_CONN_ID,
               group_ids: GroupIdsQuery = None, timeout_s: TimeoutQuery = None) -> HTMLResponse:
    """The fleet page (an error banner, with an HTTP error status, when the cluster could not be read)."""
    code, summary = read_fleet(conn_id, _group_ids(group_ids), timeout_s, _ui_base(request))
    return HTMLResponse(render_page(summary), status_code=code)


@app.get("/runs.json")
def runs_json(request: Request, user: DagReaderDep, dag_id: DagIdQuery = FLEET_DAG_ID,
              limit: LimitQuery = DEFAULT_RUNS, run_id: RunIdQuery = None) -> JSONResponse:
    """The latest runs of the fleet migration DAG as JSON: waves, their status, each application's progress."""
    code, summary = read_fleet_runs(dag_id, limit, run_id, _ui_base(request))
    return JSONResponse(summary, status_code=code)


@app.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request, user: DagReaderDep, dag_id: DagIdQuery = FLEET_DAG_ID,
              limit: LimitQuery = DEFAULT_RUNS, run_id: RunIdQuery = None) -> HTMLResponse:
    """The fleet runs page."""
    code, summary = read_fleet_runs(dag_id, limit, run_id, _ui_base(request))
    return HTMLResponse(render_runs_page(summary), status_code=code)


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


__all__ = ["MIGRATION_DAGS", "RUNS_UI_ROUTE", "UI_ROUTE", "URL_PREFIX", "FleetViewPlugin", "app",
           "authorized_dag_reader", "authorized_user", "error_summary", "fleet_summary", "group_links", "read_fleet",
           "read_fleet_runs", "render_page", "render_runs_page"]

"""The fleet report: what one fleet migration run did, wave by wave and application by application, and how
the fleet moved from run to run.

A single-group run report (:mod:`.report`) tells one change. A fleet run moves hundreds of applications in
waves, and the people who approve and watch it ask other questions; the report answers them:

* how many groups were of each type (protocol) before the run and after each wave: a table and
  ``types_by_wave.svg``;
* per wave: its hash and approval, how long it took, which applications failed, which groups and why, what
  was rolled back and whether the way back held, and whether the error budget stopped the waves after it;
* per application: its path, outcome, duration and *processing gap* (the longest stretch it processed
  nothing, measured on the offline path), ranked longest first: a table and ``gaps.svg``;
* over time: one JSON line per run in a history file (:func:`append_history`), read back strictly
  (:func:`load_history`: a bad line is an error naming it, never skipped) and plotted
  (:func:`history_chart_svg`).

Unknown stays unknown: a wave without its end time, a gap on the online path (nothing is stopped there, so
no gap is measured), an inventory that was not taken are None in the JSON and ``?`` or "not measured" in the
Markdown, never 0.

Building and rendering are pure (they read only what they are given) and load no Airflow, so a report can
be built and checked anywhere; writing and reading a location go through :mod:`.storage` (a local path, all
or nothing, or an ObjectStoragePath URL), imported only when a location is touched. The records are those of
:mod:`airflow_provider_kip848.fleet.results`; ``fleet/`` sits beside ``changecontrol/`` (layer 1, see
tests/unit/test_architecture.py), so they are read by attribute and imported for type checking only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_kip848.changecontrol.plot import bar_chart_svg, line_chart_svg
from airflow_provider_kip848.kafka.errors import InvalidArgument

if TYPE_CHECKING:  # fleet/ is beside changecontrol/ (layer 1): its records are read by attribute, typed only
    from airflow_provider_kip848.fleet.results import WaveRecord

#: what ``kind`` and ``version`` of report.json say
REPORT_KIND, REPORT_VERSION = "kip848.fleet_report", 1
#: the format version of a history line (its ``v``)
HISTORY_VERSION = 1
#: the files :func:`write_fleet_report` writes in the report's directory, by key of its answer
FILE_NAMES = {"json": "report.json", "markdown": "report.md", "types_chart": "types_by_wave.svg",
              "gap_chart": "gaps.svg", "history_chart": "history.svg"}
#: applications drawn in the gap chart, the longest gaps first (the Markdown table lists every one)
MAX_GAP_BARS = 40

#: an application's outcome in the run
MIGRATED, FAILED, NO_RESULT, ROLLED_BACK, ROLLBACK_FAILED = (
    "migrated", "failed", "no_result", "rolled_back", "rollback_failed")
#: a wave's status in the run: it ran; the error budget of an earlier wave stopped it; it did not run otherwise
RAN, STOPPED, NOT_RUN = "ran", "stopped", "not_run"
ONLINE = "online"


class FleetHistoryInvalid(InvalidArgument):
    """A line of the fleet history that is not one run's record."""

    remedy = ("Each line of the fleet history is one run's JSON object, written by append_history; fix or delete "
              "the line named (a crash while appending can cut the last line short).")


# -- building --------------------------------------------------------------------------------------------------


def build_fleet_report(*, plan: Mapping[str, Any] | None, waves: Sequence[WaveRecord],
                       types_before: Mapping[str, int] | None, types_after: Mapping[str, int] | None,
                       run_id: str, dag_id: str, outcome: str,  # Any: JSON of several shapes (XCom, reports)
                       held_back: Sequence[str | Mapping[str, Any]] | None = None,
                       started_at: float | None = None, ended_at: float | None = None) -> dict[str, Any]:
    """The report of one fleet run, as plain JSON (what report.json holds and the Markdown renders).

    ``plan``: the approved ``WavePlan.to_dict()`` (waves planned, their hashes, applications, teams, paths;
    None: no plan was made, and what it would say stays unknown). ``waves``: the
    :class:`~airflow_provider_kip848.fleet.results.WaveRecord` of each wave the run reached (a wave without a
    record, or whose record has no verdict and no result, did not run). ``types_before`` / ``types_after``:
    groups by type of the plan's groups in the inventories taken before and after the run (None, or empty as
    ``WaveRecord.types_after`` by default: not taken; a plan's groups are never zero). ``held_back``: the
    applications the run left out, as names or ``Application.to_dict()`` (None: the plan's).
    ``started_at``/``ended_at``: epoch seconds (``ended_at`` None: now, the report being built at the run's
    end). Refuses counts that are not whole numbers and two records of one wave.
    """
    plan = {} if plan is None else plan
    if not isinstance(plan, Mapping):
        raise InvalidArgument(f"plan must be WavePlan.to_dict() or None, got {type(plan).__name__}")
    before = _counts(types_before, "types_before")
    after = _counts(types_after, "types_after")
    started = _opt_number(started_at, "started_at")
    ended = _opt_number(ended_at, "ended_at")
    ended = datetime.now(UTC).timestamp() if ended is None else ended
    planned = _plan_waves(plan)
    records = _records_by_number(waves)
    group_app = _group_owners(planned, records.values())
    stopper = next((r for _, r in sorted(records.items()) if r.verdict is not None and not r.verdict.proceed), None)
    wave_rows = [_wave_row(n, records.get(n), planned.get(n), stopper, group_app)
                 for n in sorted(set(planned) | set(records))]
    apps = _application_rows([records[w["number"]] for w in wave_rows if w["status"] == RAN], planned)
    held = _held_back(plan.get("held_back") if held_back is None else held_back)
    report: dict[str, Any] = {
        "kind": REPORT_KIND, "version": REPORT_VERSION,
        "title": f"Fleet migration report: {plan.get('migration') or 'unknown migration'}",
        "dag_id": dag_id, "run_id": run_id, "outcome": outcome,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "started_at": started, "ended_at": ended, "duration_s": None if started is None else ended - started,
        "migration": plan.get("migration"), "plan_hash": plan.get("plan_hash"),
        "summary": _summary(plan, planned, wave_rows, apps, held, stopper),
        "types": _types_section(before, after, wave_rows),
        "waves": wave_rows,
        "applications": apps,
        "longest_gaps": _longest_gaps(apps),
        "group_settling": _group_settling([records[w["number"]] for w in wave_rows if w["status"] == RAN]),
        "held_back": held,
    }
    return report


def _group_settling(records: Sequence[WaveRecord]) -> list[dict[str, Any]]:
    """One row per group a move or a way back touched, from its records (``GroupOutcome.downtime``): the
    settle time, rebalances, longest commit stall; the longest settle first, the unmeasured last."""
    rows = []
    for record in sorted(records, key=lambda r: r.number):
        for kind, results in (("migrate", record.results), ("rollback", record.rollbacks)):
            for r in results:
                for g in r.groups:
                    if g.downtime is None:
                        continue
                    d = g.downtime
                    rows.append({"group_id": g.group_id, "app": r.app, "wave": record.number, "during": kind,
                                 "path": r.path, "settle_s": d.get("settle_s"), "rebalances": d.get("rebalances"),
                                 "types": list(d.get("types") or []), "commit_stall_s": d.get("commit_stall_s"),
                                 "commit_stall_partition": d.get("commit_stall_partition"),
                                 "commit_stall_open": d.get("commit_stall_open"), "error": d.get("error")})
    return sorted(rows, key=lambda x: (x["settle_s"] is None, -(x["settle_s"] or 0.0), x["wave"], x["group_id"],
                                       x["during"]))


def _counts(value: Mapping[str, int] | None, what: str) -> dict[str, int] | None:
    """A type -> count mapping, checked; None or empty is None (not taken: not zero groups)."""
    if value is None or (isinstance(value, Mapping) and not value):
        return None
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 0
            for k, n in value.items()):
        raise InvalidArgument(f"{what} must map group types to counts (whole numbers >= 0) or be None, got {value!r}")
    return dict(value)


def _opt_number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(f"{what} must be epoch seconds or None, got {value!r}")
    return float(value)


def _plan_waves(plan: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    waves = plan.get("waves") or []
    if not isinstance(waves, list) or not all(
            isinstance(w, Mapping) and isinstance(w.get("number"), int) for w in waves):
        raise InvalidArgument("plan['waves'] must be the list WavePlan.to_dict() gives, each wave with its number")
    return {w["number"]: w for w in waves}


def _records_by_number(waves: Iterable[WaveRecord]) -> dict[int, WaveRecord]:
    records: dict[int, WaveRecord] = {}
    for record in waves:
        if record.number in records:
            raise InvalidArgument(f"two records of wave {record.number}: a wave runs once per fleet run")
        records[record.number] = record
    return records


def _plan_apps(planned: Mapping[int, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {a["app"]: a for w in planned.values() for a in w.get("applications") or [] if isinstance(a, Mapping)}


def _group_owners(planned: Mapping[int, Mapping[str, Any]], records: Iterable[WaveRecord]) -> dict[str, str]:
    """group id -> application, from the plan and the results (to name the application of a failed group)."""
    owners = {g["group_id"]: app for app, a in _plan_apps(planned).items() for g in a.get("groups") or []
              if isinstance(g, Mapping) and isinstance(g.get("group_id"), str)}
    for record in records:
        for r in (*record.results, *record.rollbacks):
            owners.update({g.group_id: r.app for g in r.groups})
    return owners


def _ran(record: WaveRecord | None) -> bool:
    """A wave ran when the budget judged it or a result came in (the record says None verdict: not run)."""
    return record is not None and (record.verdict is not None or bool(record.results) or bool(record.rollbacks))


def _status(number: int, record: WaveRecord | None, stopper: WaveRecord | None) -> str:
    if _ran(record):
        return RAN
    return STOPPED if stopper is not None and number > stopper.number else NOT_RUN


def _wave_row(number: int, record: WaveRecord | None, planned: Mapping[str, Any] | None,
              stopper: WaveRecord | None, group_app: Mapping[str, str]) -> dict[str, Any]:
    """A wave as planned and as it ran; ``stopper``: the first wave whose budget said stop."""
    plan_wave = planned or {}
    status = _status(number, record, stopper)
    plan_apps = [a["app"] for a in plan_wave.get("applications") or [] if isinstance(a, Mapping)]
    plan_hash = plan_wave.get("wave_hash")
    row: dict[str, Any] = {
        "number": number, "status": status,
        "stopped_by": stopper.number if stopper is not None and status == STOPPED else None,
        "canary": record.canary if record is not None else bool(plan_wave.get("canary")),
        "wave_hash": record.wave_hash if record is not None else plan_hash, "plan_wave_hash": plan_hash,
        "hash_matches_plan": None if record is None or plan_hash is None else record.wave_hash == plan_hash,
        "apps": list(record.apps) if record is not None and record.apps else plan_apps,
        "groups": len(record.group_ids) if record is not None and record.group_ids else plan_wave.get("group_count"),
        "approved_by": None, "approved_at": None, "started_at": None, "ended_at": None, "duration_s": None,
        "applications_ok": None, "applications_failed": None, "apps_ok": [], "apps_failed": [],
        "apps_no_result": [], "failed_groups": [], "rollbacks": [], "verdict": None, "types_after": None,
    }
    if record is None:
        return row
    row.update(approved_by=record.approved_by, approved_at=record.approved_at, started_at=record.started_at,
               ended_at=record.ended_at, duration_s=record.duration_s,
               types_after=dict(record.types_after) if record.types_after else None,
               verdict=None if record.verdict is None else {"proceed": record.verdict.proceed,
                                                            "reason": record.verdict.reason})
    if status == RAN:
        row.update(_wave_outcomes(record, row["apps"], group_app))
    return row


def _wave_outcomes(record: WaveRecord, apps: Sequence[str], group_app: Mapping[str, str]) -> dict[str, Any]:
    """Which applications of a wave that ran went through, failed or reported nothing; its failed groups (with
    their detail, the budget's words for a group without an outcome) and its rollbacks."""
    results = {r.app: r for r in record.results}
    judged_failed = set(record.verdict.failed_apps) if record.verdict is not None else set()
    everyone = [*apps, *(a for a in results if a not in apps)]
    failed = [a for a in everyone if a in judged_failed or (a in results and not results[a].ok)]
    ok = [a for a in everyone if a in results and results[a].ok and a not in judged_failed]
    failed_groups: list[dict[str, str | None]] = [
        {"group_id": g.group_id, "app": r.app, "detail": g.detail or r.detail or "failed"}
        for r in record.results for g in r.groups if not g.ok]
    listed = {g["group_id"] for g in failed_groups}
    judged = (record.verdict.failed_groups or {}) if record.verdict is not None else {}
    failed_groups += [{"group_id": gid, "app": group_app.get(gid), "detail": detail}
                      for gid, detail in judged.items() if gid not in listed]
    return {"apps_ok": ok, "apps_failed": failed, "apps_no_result": [a for a in everyone if a not in results],
            "applications_ok": len(ok), "applications_failed": len(failed), "failed_groups": failed_groups,
            "rollbacks": [{"app": r.app, "ok": r.ok, "path": r.path, "started_at": r.started_at,
                           "ended_at": r.ended_at, "duration_s": r.duration_s, "gap_s": r.gap_s,
                           "groups": len(r.groups), "groups_back": sum(1 for g in r.groups if g.ok),
                           "detail": r.detail} for r in record.rollbacks]}


def _application_rows(records: Sequence[WaveRecord], planned: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per application of the waves that ran: its move, its way back, its longest gap."""
    plan_apps = _plan_apps(planned)
    rows: dict[str, dict[str, Any]] = {}
    for record in sorted(records, key=lambda r: r.number):
        judged_failed = set(record.verdict.failed_apps) if record.verdict is not None else set()
        for app in [*record.apps, *(r.app for r in record.results)]:
            rows.setdefault(app, _empty_app_row(app, record.number, plan_apps.get(app) or {}))
        for r in record.results:
            row = rows[r.app]
            row.update(team=r.team, path=r.path, migrate_ok=r.ok and r.app not in judged_failed,
                       started_at=r.started_at, ended_at=r.ended_at, duration_s=r.duration_s, gap_s=r.gap_s,
                       gap_from=r.gap_from, gap_to=r.gap_to, groups=len(r.groups),
                       groups_ok=sum(1 for g in r.groups if g.ok), detail=r.detail)
        for r in record.rollbacks:
            row = rows.setdefault(r.app, _empty_app_row(r.app, record.number, plan_apps.get(r.app) or {}))
            row.update(rollback_ok=r.ok, rollback_duration_s=r.duration_s, rollback_gap_s=r.gap_s,
                       rollback_detail=r.detail, rollback_path=r.path)
    for row in rows.values():
        row["outcome"] = _outcome(row)
        row["longest_gap_s"], row["longest_gap_during"] = _longest_gap_of(row)
    return sorted(rows.values(), key=lambda r: (r["wave"], r["app"]))


def _empty_app_row(app: str, wave: int, planned: Mapping[str, Any]) -> dict[str, Any]:
    return {"app": app, "team": planned.get("team"), "wave": wave, "path": planned.get("path"), "outcome": None,
            "migrate_ok": None, "started_at": None, "ended_at": None, "duration_s": None, "gap_s": None,
            "gap_from": None, "gap_to": None, "groups": None, "groups_ok": None, "detail": "",
            "rollback_ok": None, "rollback_duration_s": None, "rollback_gap_s": None, "rollback_detail": "",
            "rollback_path": None, "longest_gap_s": None, "longest_gap_during": None}


def _outcome(row: Mapping[str, Any]) -> str:
    if row["rollback_ok"] is not None:
        return ROLLED_BACK if row["rollback_ok"] else ROLLBACK_FAILED
    if row["migrate_ok"] is None:
        return NO_RESULT
    return MIGRATED if row["migrate_ok"] else FAILED


def _longest_gap_of(row: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """The longest measured gap of an application's results (its move, its way back) and which one it was."""
    known = [(gap, during) for gap, during in ((row["gap_s"], "migrate"), (row["rollback_gap_s"], "rollback"))
             if gap is not None]
    return max(known) if known else (None, None)


def _longest_gaps(apps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every application by its longest gap, longest first; those without a measured gap last, by name."""
    ranked = sorted(apps, key=lambda a: (a["longest_gap_s"] is None, -(a["longest_gap_s"] or 0.0), a["app"]))
    return [{"app": a["app"], "team": a["team"], "wave": a["wave"], "path": a["path"],
             "longest_gap_s": a["longest_gap_s"], "during": a["longest_gap_during"]} for a in ranked]


def _held_back(items: Any) -> list[dict[str, Any]]:
    out = []
    for item in items or []:
        if isinstance(item, str):
            out.append({"app": item, "team": None, "reason": None})
        elif isinstance(item, Mapping) and isinstance(item.get("app"), str):
            out.append({"app": item["app"], "team": item.get("team"), "reason": item.get("reason")})
        else:
            raise InvalidArgument(f"a held-back application is a name or Application.to_dict(), got {item!r}")
    return out


def _summary(plan: Mapping[str, Any], planned: Mapping[int, Mapping[str, Any]], waves: Sequence[Mapping[str, Any]],
             apps: Sequence[Mapping[str, Any]], held: Sequence[Mapping[str, Any]],
             stopper: WaveRecord | None) -> dict[str, Any]:
    plan_summary: Mapping[str, Any] = plan["summary"] if isinstance(plan.get("summary"), Mapping) else {}
    outcomes = [a["outcome"] for a in apps]
    planned_apps = len(_plan_apps(planned)) if planned else plan_summary.get("applications")
    planned_groups = (sum(w.get("group_count") or 0 for w in planned.values()) if planned
                      else plan_summary.get("groups"))
    not_run = [a for w in waves if w["status"] != RAN for a in w["apps"]]
    longest = next((g for g in _longest_gaps(apps) if g["longest_gap_s"] is not None), None)
    return {
        "waves_planned": len(planned) if planned else plan_summary.get("waves"),
        "waves_run": sum(1 for w in waves if w["status"] == RAN),
        "waves_stopped": sum(1 for w in waves if w["status"] == STOPPED),
        "waves_not_run": sum(1 for w in waves if w["status"] == NOT_RUN),
        "stopped_by": None if stopper is None or stopper.verdict is None else {
            "wave": stopper.number, "reason": stopper.verdict.reason},
        "applications_planned": planned_apps,
        "applications_migrated": outcomes.count(MIGRATED),
        "applications_failed": sum(1 for a in apps if a["migrate_ok"] is not True),
        "applications_rolled_back": outcomes.count(ROLLED_BACK),
        "applications_rollback_failed": outcomes.count(ROLLBACK_FAILED),
        "applications_not_run": len(not_run),
        "applications_held_back": len(held),
        "groups_planned": planned_groups,
        "groups_migrated": sum(a["groups_ok"] or 0 for a in apps if a["outcome"] == MIGRATED),
        "groups_failed": sum(len(w["failed_groups"]) for w in waves),
        "groups_rolled_back": sum(r["groups_back"] for w in waves for r in w["rollbacks"] if r["ok"]),
        "longest_gap": None if longest is None else {"app": longest["app"], "gap_s": longest["longest_gap_s"]},
    }


def _types_section(before: Mapping[str, int] | None, after: Mapping[str, int] | None,
                   waves: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Groups by type at each point: before the run (wave 0), after each wave that ran, after the run."""
    by_wave = [{"wave": 0, "point": "before the run", "types": before}] + [
        {"wave": w["number"], "point": f"after wave {w['number']}" + (" (canary)" if w["canary"] else ""),
         "types": w["types_after"]} for w in waves if w["status"] == RAN]
    names = sorted({t for m in [before, after, *(p["types"] for p in by_wave)] if m for t in m})
    return {"names": names, "before": before, "after": after, "by_wave": by_wave}


# -- charts ----------------------------------------------------------------------------------------------------


def _count_of(types: Mapping[str, int] | None, name: str) -> int | None:
    """A type's count at a point: 0 when the inventory was taken and had none, None when it was not taken."""
    return None if types is None else int(types.get(name, 0))


def types_chart_svg(report: Mapping[str, Any]) -> str | None:  # Any: JSON of several shapes (XCom, reports)
    """Groups by type before the run (x 0) and after each wave that ran (x: its number), one line per type; a
    point whose inventory was not taken breaks the line. None when no inventory was taken at all."""
    section = report["types"]
    if not any(p["types"] is not None for p in section["by_wave"]):
        return None
    series = {name: [(float(p["wave"]), _as_float(_count_of(p["types"], name))) for p in section["by_wave"]]
              for name in section["names"]}
    return line_chart_svg(series, title="groups by type before the run (wave 0) and after each wave",
                          x_label="wave (0: before the run)")


def gap_chart_svg(  # Any: JSON of several shapes (XCom, reports)
        report: Mapping[str, Any], *, max_bars: int = MAX_GAP_BARS) -> str | None:
    """The longest processing gap per application, longest first (at most ``max_bars``; an application whose
    gap was not measured says so, without a bar). None when no application ran."""
    ranked = report["longest_gaps"]
    if not ranked:
        return None
    shown = ranked[:max_bars]
    title = "longest processing gap per application (seconds)"
    if len(ranked) > len(shown):
        title += f": the {len(shown)} longest of {len(ranked)}"
    unmeasured_paths = {g["path"] for g in shown if g["longest_gap_s"] is None}
    unknown = "not measured (online path)" if unmeasured_paths == {ONLINE} else "not measured"
    return bar_chart_svg([(g["app"], g["longest_gap_s"]) for g in shown], title=title, unknown=unknown)


def history_chart_svg(history: Sequence[HistoryEntry]) -> str | None:
    """Groups by type at the end of each run (x: the run's end, in days since the first run), one line per
    type; a run whose final inventory was not taken breaks the line. None for an empty history."""
    if not history:
        return None
    runs = sorted(history, key=lambda e: e.ended_at)
    first = runs[0].ended_at
    names = sorted({t for e in runs if e.types_after for t in e.types_after})
    series = {name: [((e.ended_at - first) / 86400.0, _as_float(_count_of(e.types_after, name))) for e in runs]
              for name in names}
    return line_chart_svg(series, title="groups by type at the end of each fleet run",
                          x_label=f"days since the first run ({_when(first)})")


def _as_float(value: int | None) -> float | None:
    return None if value is None else float(value)


# -- Markdown --------------------------------------------------------------------------------------------------


def _lock_md(lock: Mapping[str, Any] | None) -> list[str]:
    """The fleet lock refused: who holds it (the run did nothing)."""
    if not lock or not lock.get("refused"):
        return []
    return [f"- change lock: **refused**: {_md(lock['refused'])}"]


def render_fleet_markdown(  # Any: JSON of several shapes (XCom, reports)
        report: Mapping[str, Any], *, charts: Mapping[str, str] | None = None) -> str:
    """The report as a person reads it: the run, the summary, groups by type, the waves, the applications, the
    longest gaps, what was held back. ``charts``: key of :data:`FILE_NAMES` -> the chart's file name relative to
    the Markdown (linked as images; a chart not named is not linked)."""
    charts = charts or {}
    lines = [f"# {report['title']}", "",
             f"- DAG run: `{_md(report['dag_id'])}` / `{_md(report['run_id'])}`",
             f"- outcome: **{_md(report['outcome'])}**",
             *_lock_md((report.get("locks") or {}).get("fleet")),
             f"- plan: `{report.get('plan_hash') or '?'}`",
             f"- started: {_when(report['started_at'])}; ended: {_when(report['ended_at'])}; "
             f"duration: {_duration(report['duration_s'])}",
             f"- generated: {report['generated_at']}"]
    lines += _summary_md(report["summary"])
    lines += _types_md(report["types"], charts.get("types_chart"))
    lines += _waves_md(report["waves"])
    lines += _applications_md(report["applications"])
    lines += _gaps_md(report["longest_gaps"], charts.get("gap_chart"))
    lines += _settling_md(report.get("group_settling") or [])
    if report["held_back"]:
        lines += ["", "## Held back", "", "| application | team | why |", "|---|---|---|"]
        lines += [f"| {_md(h['app'])} | {_md(h['team'] or '?')} | {_md(h['reason'] or '?')} |"
                  for h in report["held_back"]]
    if charts.get("history_chart"):
        lines += ["", "## Over time", "", f"![groups by type at the end of each fleet run]({charts['history_chart']})"]
    return "\n".join(lines) + "\n"


def _summary_md(s: Mapping[str, Any]) -> list[str]:
    rows = [("waves planned", s["waves_planned"]), ("waves run", s["waves_run"]),
            ("waves stopped by the error budget", s["waves_stopped"]),
            ("waves not run (otherwise)", s["waves_not_run"]),
            ("applications planned", s["applications_planned"]),
            ("applications migrated", s["applications_migrated"]),
            ("applications failed", s["applications_failed"]),
            ("applications rolled back", s["applications_rolled_back"]),
            ("applications whose rollback failed", s["applications_rollback_failed"]),
            ("applications not run", s["applications_not_run"]),
            ("applications held back", s["applications_held_back"]),
            ("groups planned", s["groups_planned"]), ("groups migrated", s["groups_migrated"]),
            ("groups failed", s["groups_failed"]), ("groups rolled back", s["groups_rolled_back"])]
    lines = ["", "## Summary", "", "| what | count |", "|---|---|"]
    lines += [f"| {label} | {'?' if value is None else value} |" for label, value in rows]
    stop = s["stopped_by"]
    if stop:
        lines += ["", f"**Stopped** by wave {stop['wave']}'s error budget: {_md(stop['reason'])}"]
    gap = s["longest_gap"]
    lines += ["", "Longest processing gap: " + (f"**{_md(gap['app'])}**, {_duration(gap['gap_s'])}" if gap
                                                else "not measured (no application on the offline path)")]
    return lines


def _types_md(section: Mapping[str, Any], chart: str | None) -> list[str]:
    names = section["names"]
    points = [*section["by_wave"], {"point": "after the run", "types": section["after"]}]
    if not names:
        known = [p["point"] for p in points if p["types"] is not None]
        return ["", "## Groups by type", "", "No group of the plan was counted: " + (
            "no inventory was taken." if not known else f"the inventories ({', '.join(known)}) found none.")]
    lines = ["", "## Groups by type", "", "| point | " + " | ".join(_md(n) for n in names) + " | total |",
             "|---|" + "---|" * (len(names) + 1)]
    for p in points:
        types = p["types"]
        cells = ["?" if types is None else str(types.get(n, 0)) for n in names]
        total = "?" if types is None else str(sum(types.values()))
        lines.append(f"| {p['point']} | " + " | ".join(cells) + f" | {total} |")
    if any(p["types"] is None for p in points):
        lines += ["", "`?`: the inventory was not taken at that point."]
    if chart:
        lines += ["", f"![groups by type before the run and after each wave]({chart})"]
    return lines


def _waves_md(waves: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["", "## Waves", "", "| wave | status | applications | groups | hash | approved by | approved at | started "
             "| duration | ok | failed | error budget |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in waves:
        ran = w["status"] == RAN
        number = f"{w['number']}" + (" (canary)" if w["canary"] else "")
        digest = f"`{w['wave_hash'][:12]}`" if w["wave_hash"] else "?"
        if w["hash_matches_plan"] is False:
            digest += " (**differs from the plan's**)"
        budget = "-" if w["verdict"] is None else ("proceed" if w["verdict"]["proceed"] else "**stop**")
        status = w["status"].replace("_", " ") + (f" (by wave {w['stopped_by']})" if w["stopped_by"] else "")
        lines.append(f"| {number} | {status} | {len(w['apps'])} | "
                     f"{'?' if w['groups'] is None else w['groups']} | {digest} | "
                     f"{_md(w['approved_by']) if w['approved_by'] else ('?' if ran else '-')} | "
                     f"{_md(w['approved_at']) if w['approved_at'] else ('?' if ran else '-')} | "
                     f"{_when(w['started_at']) if ran else '-'} | {_duration(w['duration_s']) if ran else '-'} | "
                     f"{_count(w['applications_ok'], ran)} | {_count(w['applications_failed'], ran)} | {budget} |")
    for w in waves:
        lines += _wave_detail_md(w)
    return lines


def _count(value: int | None, ran: bool) -> str:
    if value is not None:
        return str(value)
    return "?" if ran else "-"


def _wave_detail_md(w: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    if w["verdict"]:
        lines += [f"Error budget: {_md(w['verdict']['reason'])}"]
    if w["apps_no_result"]:
        lines += ["", "No result from: " + ", ".join(_md(a) for a in w["apps_no_result"])]
    if w["failed_groups"]:
        lines += ["", "| failed group | application | detail |", "|---|---|---|"]
        lines += [f"| `{_md(g['group_id'])}` | {_md(g['app'] or '?')} | {_md(g['detail'])} |"
                  for g in w["failed_groups"]]
    if w["rollbacks"]:
        lines += ["", "| rolled back | back on the source type | groups back | duration | processing gap | detail |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {_md(r['app'])} | {'yes' if r['ok'] else '**no**'} | {r['groups_back']} of {r['groups']} | "
                  f"{_duration(r['duration_s'])} | {_gap(r['gap_s'], r['path'])} | {_md(r['detail']) or '-'} |"
                  for r in w["rollbacks"]]
    if not lines:
        return []
    return ["", f"### Wave {w['number']}", "", *lines]


def _applications_md(apps: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = ["", "## Applications", ""]
    if not apps:
        return [*lines, "No wave ran."]
    lines += ["| application | team | wave | path | outcome | groups ok | duration | processing gap | longest gap "
              "| detail |", "|---|---|---|---|---|---|---|---|---|---|"]
    for a in apps:
        groups = "?" if a["groups"] is None else f"{a['groups_ok']} of {a['groups']}"
        detail = "; ".join(d for d in (a["detail"], a["rollback_detail"] and f"way back: {a['rollback_detail']}")
                           if d)
        longest = _longest(a["longest_gap_s"], a["longest_gap_during"], a["path"])
        lines.append(f"| {_md(a['app'])} | {_md(a['team'] or '?')} | {a['wave']} | {_md(a['path'] or '?')} | "
                     f"{a['outcome'].replace('_', ' ')} | {groups} | {_duration(a['duration_s'])} | "
                     f"{_gap(a['gap_s'], a['path'])} | {longest} | {_md(detail) or '-'} |")
    return lines


def _gaps_md(ranked: Sequence[Mapping[str, Any]], chart: str | None) -> list[str]:
    if not ranked:
        return []
    lines = ["", "## Longest processing gap per application", "",
             "The processing gap is measured on the offline path: from the moment the application is told to stop "
             "until every group has its members back on the new protocol.", "",
             "| # | application | team | wave | path | longest gap |", "|---|---|---|---|---|---|"]
    lines += [f"| {i} | {_md(g['app'])} | {_md(g['team'] or '?')} | {g['wave']} | {_md(g['path'] or '?')} | "
              f"{_longest(g['longest_gap_s'], g['during'], g['path'])} |" for i, g in enumerate(ranked, 1)]
    if chart:
        lines += ["", f"![longest processing gap per application]({chart})"]
    return lines


def _settling_md(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = ["", "## Groups settling (from their records)", "",
             "Read from each group's records in `__consumer_offsets` after its move: from the first member leaving "
             "to the group Stable with every member on the new protocol, the rebalances the move caused, and "
             "the longest a partition's next record waited for a commit (the processing gap as the committed "
             "offsets show it).", "",
             "| group | application | wave | during | settle | rebalances | types | longest commit stall |",
             "|---|---|---|---|---|---|---|---|"]
    for g in rows:
        if g["error"]:
            lines.append(f"| `{_md(g['group_id'])}` | {_md(g['app'])} | {g['wave']} | {g['during']} | "
                         f"not measured: {_md(g['error'])} | ? | ? | ? |")
            continue
        stall = "?" if g["commit_stall_s"] is None else (
            f"{g['commit_stall_s']:.3f} s on {_md(g['commit_stall_partition'])}"
            + (" (still open)" if g["commit_stall_open"] else ""))
        settle = "?" if g["settle_s"] is None else f"{g['settle_s']:.3f} s"
        lines.append(f"| `{_md(g['group_id'])}` | {_md(g['app'])} | {g['wave']} | {g['during']} | {settle} | "
                     f"{'?' if g['rebalances'] is None else g['rebalances']} | "
                     f"{_md(' → '.join(g['types'])) or '?'} | {stall} |")
    return lines


def _md(text: Any) -> str:
    """Text for a Markdown table cell: a ``|`` would end the cell, a newline the row."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "?"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _gap(seconds: float | None, path: str | None) -> str:
    if seconds is not None:
        return _duration(seconds)
    return "not measured (online path)" if path == ONLINE else "not measured"


def _longest(seconds: float | None, during: str | None, path: str | None) -> str:
    if seconds is None:
        return _gap(None, path)
    return _duration(seconds) + (" (way back)" if during == "rollback" else "")


# -- files -----------------------------------------------------------------------------------------------------


def write_fleet_report(directory: str, report: Mapping[str, Any], *,  # Any: JSON of several shapes (XCom, reports)
                       history: Sequence[HistoryEntry] | None = None) -> dict[str, str]:
    """Write report.json, report.md and the charts (``types_by_wave.svg``, ``gaps.svg`` and, given the
    ``history``, ``history.svg``) in ``directory`` (a local path or an ObjectStoragePath URL), each all or
    nothing. The charts go first and the Markdown last, so the Markdown never links a chart not yet there.
    Returns key of :data:`FILE_NAMES` -> location, for the files written (a chart with nothing to draw is not)."""
    # optional dependency: storage imports Airflow (ObjectStoragePath); building and rendering a report load none
    from airflow_provider_kip848.changecontrol import storage  # noqa: PLC0415

    base = directory.rstrip("/")
    charts = {"types_chart": types_chart_svg(report), "gap_chart": gap_chart_svg(report),
              "history_chart": history_chart_svg(history) if history else None}
    files: dict[str, str] = {}
    for key, svg in charts.items():
        if svg is not None:
            files[key] = f"{base}/{FILE_NAMES[key]}"
            storage.write_text(files[key], svg)
    files["json"] = f"{base}/{FILE_NAMES['json']}"
    # default=str: what a DAG adds to the report (lock records with times ...) must not cost the report
    storage.write_text(files["json"], json.dumps(report, indent=1, default=str) + "\n")
    files["markdown"] = f"{base}/{FILE_NAMES['markdown']}"
    storage.write_text(files["markdown"], render_fleet_markdown(report, charts={k: FILE_NAMES[k] for k in charts
                                                                                if k in files}))
    return files


# -- history ---------------------------------------------------------------------------------------------------

_HISTORY_KEYS = frozenset({"v", "run_id", "dag_id", "ended_at", "outcome", "plan_hash", "migration", "types_before",
                           "types_after", "apps_migrated", "apps_failed", "apps_rolled_back", "longest_gap"})


@dataclass(frozen=True)
class HistoryEntry:
    """One fleet run in the history: when it ended, its plan, groups by type before and after (None: not
    taken), applications migrated, failed and rolled back, and its longest processing gap (None: none
    measured)."""

    run_id: str
    dag_id: str
    ended_at: float
    outcome: str
    plan_hash: str | None
    migration: str | None
    types_before: Mapping[str, int] | None
    types_after: Mapping[str, int] | None
    apps_migrated: int
    apps_failed: int
    apps_rolled_back: int
    longest_gap_app: str | None = None
    longest_gap_s: float | None = None

    @classmethod
    def from_report(cls, report: Mapping[str, Any]) -> HistoryEntry:  # Any: JSON read back (XCom, a file, a response)
        s, types, gap = report["summary"], report["types"], report["summary"]["longest_gap"]
        return cls(run_id=report["run_id"], dag_id=report["dag_id"], ended_at=report["ended_at"],
                   outcome=report["outcome"], plan_hash=report.get("plan_hash"), migration=report.get("migration"),
                   types_before=types["before"], types_after=types["after"], apps_migrated=s["applications_migrated"],
                   apps_failed=s["applications_failed"], apps_rolled_back=s["applications_rolled_back"],
                   longest_gap_app=gap["app"] if gap else None, longest_gap_s=gap["gap_s"] if gap else None)

    def to_dict(self) -> dict[str, object]:
        return {"v": HISTORY_VERSION, "run_id": self.run_id, "dag_id": self.dag_id, "ended_at": self.ended_at,
                "outcome": self.outcome, "plan_hash": self.plan_hash, "migration": self.migration,
                "types_before": None if self.types_before is None else dict(self.types_before),
                "types_after": None if self.types_after is None else dict(self.types_after),
                "apps_migrated": self.apps_migrated, "apps_failed": self.apps_failed,
                "apps_rolled_back": self.apps_rolled_back,
                "longest_gap": None if self.longest_gap_app is None else {"app": self.longest_gap_app,
                                                                           "gap_s": self.longest_gap_s}}

    @classmethod
    def from_dict(cls, data: object) -> HistoryEntry:
        """Strict: every key of :meth:`to_dict`, no other, each of its type (InvalidArgument otherwise)."""
        if not isinstance(data, Mapping):
            raise InvalidArgument(f"not a JSON object: {data!r}")
        if set(data) != _HISTORY_KEYS:
            raise InvalidArgument(f"keys missing {sorted(_HISTORY_KEYS - set(data))}, unknown "
                                  f"{sorted(set(data) - _HISTORY_KEYS)}")
        if data["v"] != HISTORY_VERSION or isinstance(data["v"], bool):
            raise InvalidArgument(f"format version {data['v']!r}, this reader knows {HISTORY_VERSION}")
        for key in ("run_id", "dag_id", "outcome"):
            _check(isinstance(data[key], str) and data[key], key, "a non-empty string", data[key])
        for key in ("plan_hash", "migration"):
            _check(data[key] is None or isinstance(data[key], str), key, "a string or null", data[key])
        for key in ("apps_migrated", "apps_failed", "apps_rolled_back"):
            _check(isinstance(data[key], int) and not isinstance(data[key], bool) and data[key] >= 0, key,
                   "a whole number >= 0", data[key])
        ended_at = _opt_number(data["ended_at"], "ended_at")
        _check(ended_at is not None, "ended_at", "epoch seconds", data["ended_at"])
        gap = data["longest_gap"]
        _check(gap is None or (isinstance(gap, Mapping) and set(gap) == {"app", "gap_s"}
                               and isinstance(gap["app"], str) and _opt_number(gap["gap_s"], "gap_s") is not None),
               "longest_gap", 'null or {"app": name, "gap_s": seconds}', gap)
        return cls(run_id=data["run_id"], dag_id=data["dag_id"], ended_at=float(data["ended_at"]),
                   outcome=data["outcome"], plan_hash=data["plan_hash"], migration=data["migration"],
                   types_before=_counts(data["types_before"], "types_before"),
                   types_after=_counts(data["types_after"], "types_after"), apps_migrated=data["apps_migrated"],
                   apps_failed=data["apps_failed"], apps_rolled_back=data["apps_rolled_back"],
                   longest_gap_app=gap["app"] if gap else None, longest_gap_s=float(gap["gap_s"]) if gap else None)


def _check(ok: Any, key: str, expected: str, got: Any) -> None:
    if not ok:
        raise InvalidArgument(f"{key!r} must be {expected}, got {got!r}")


def history_line(entry: HistoryEntry) -> str:
    """The entry as one compact JSON line (sorted keys: the same run gives the same line)."""
    return json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)


def parse_history(text: str, *, source: str = "<history>") -> list[HistoryEntry]:
    """Every run of a history's text, in file order. Strict: an empty line, a line that is not JSON or not a
    run's record is a :class:`FleetHistoryInvalid` naming ``source`` and the line number, never skipped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            if not line.strip():
                raise InvalidArgument("the line is empty")
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise InvalidArgument(f"not JSON ({exc})") from exc
            entries.append(HistoryEntry.from_dict(data))
        except InvalidArgument as exc:
            raise FleetHistoryInvalid(f"{source} line {number}: {exc.what}") from exc
    return entries


def load_history(location: str) -> list[HistoryEntry]:
    """The runs in the history at ``location`` (a local path or an ObjectStoragePath URL), in file order; [] when
    there is no history yet. Strict: see :func:`parse_history`."""
    # optional dependency: storage imports Airflow (ObjectStoragePath); building and rendering a report load none
    from airflow_provider_kip848.changecontrol import storage  # noqa: PLC0415

    if not storage.exists(location):
        return []
    return parse_history(storage.read_text(location), source=location)


def append_history(location: str, report: Mapping[str, Any]) -> bool:  # Any: JSON of several shapes (XCom, reports)
    """Add the run of ``report`` to the history at ``location``, one line. False (and nothing written) when the
    history already has this DAG run: a retried report task does not count its run twice. The history is read
    first, strictly, so a run is never appended after a line that cannot be read."""
    # optional dependency: storage imports Airflow (ObjectStoragePath); building and rendering a report load none
    from airflow_provider_kip848.changecontrol import storage  # noqa: PLC0415

    entry = HistoryEntry.from_report(report)
    if any(e.run_id == entry.run_id and e.dag_id == entry.dag_id for e in load_history(location)):
        return False
    storage.append_line(location, history_line(entry))
    return True


__all__ = ["FILE_NAMES", "FleetHistoryInvalid", "HistoryEntry", "append_history", "build_fleet_report",
           "gap_chart_svg", "history_chart_svg", "history_line", "load_history", "parse_history",
           "render_fleet_markdown", "types_chart_svg", "write_fleet_report"]

"""The fleet report as people read it: the charts (``types_by_wave.svg``, ``gaps.svg``, ``history.svg``), the
Markdown, and the files written in the report's directory (:func:`write_fleet_report`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_provider_kip848.changecontrol.fleet_report.building import FILE_NAMES, MAX_GAP_BARS, ONLINE, RAN
from airflow_provider_kip848.changecontrol.fleet_report.history import HistoryEntry
from airflow_provider_kip848.changecontrol.plot import bar_chart_svg, line_chart_svg
from airflow_provider_kip848.kafka.inert import md_name, md_text

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
    return [f"- change lock: **refused**: {md_text(lock['refused'])}"]


def render_fleet_markdown(  # Any: JSON of several shapes (XCom, reports)
        report: Mapping[str, Any], *, charts: Mapping[str, str] | None = None) -> str:
    """The report as a person reads it: the run, the summary, groups by type, the waves, the applications, the
    longest gaps, what was held back. ``charts``: key of :data:`FILE_NAMES` -> the chart's file name relative to
    the Markdown (linked as images; a chart not named is not linked). Names (applications, teams, groups,
    users, topics) are code spans, reasons and details inert text (:mod:`~airflow_provider_kip848.kafka.inert`)."""
    charts = charts or {}
    lines = [f"# {md_text(report['title'])}", "",
             f"- DAG run: {md_name(report['dag_id'])} / {md_name(report['run_id'])}",
             f"- outcome: **{md_text(report['outcome'])}**",
             *_lock_md((report.get("locks") or {}).get("fleet")),
             f"- plan: {md_name(report.get('plan_hash') or '?')}",
             f"- started: {_when(report['started_at'])}; ended: {_when(report['ended_at'])}; "
             f"duration: {_duration(report['duration_s'])}",
             f"- generated: {md_text(report['generated_at'])}"]
    lines += _summary_md(report["summary"])
    lines += _types_md(report["types"], charts.get("types_chart"))
    lines += _waves_md(report["waves"])
    lines += _applications_md(report["applications"])
    lines += _gaps_md(report["longest_gaps"], charts.get("gap_chart"))
    lines += _settling_md(report.get("group_settling") or [])
    if report["held_back"]:
        lines += ["", "## Held back", "", "| application | team | why |", "|---|---|---|"]
        lines += [f"| {md_name(h['app'], cell=True)} | {_name(h['team'])} | {md_text(h['reason'] or '?', cell=True)} |"
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
        lines += ["", f"**Stopped** by wave {stop['wave']}'s error budget: {md_text(stop['reason'])}"]
    gap = s["longest_gap"]
    lines += ["", "Longest processing gap: " + (f"**{md_name(gap['app'])}**, {_duration(gap['gap_s'])}" if gap
                                                else "not measured (no application on the offline path)")]
    return lines


def _types_md(section: Mapping[str, Any], chart: str | None) -> list[str]:
    names = section["names"]
    points = [*section["by_wave"], {"point": "after the run", "types": section["after"]}]
    if not names:
        known = [p["point"] for p in points if p["types"] is not None]
        return ["", "## Groups by type", "", "No group of the plan was counted: " + (
            "no inventory was taken." if not known else f"the inventories ({md_text(', '.join(known))}) found none.")]
    lines = ["", "## Groups by type", "", "| point | " + " | ".join(md_text(n, cell=True) for n in names)
             + " | total |",
             "|---|" + "---|" * (len(names) + 1)]
    for p in points:
        types = p["types"]
        cells = ["?" if types is None else str(types.get(n, 0)) for n in names]
        total = "?" if types is None else str(sum(types.values()))
        lines.append(f"| {md_text(p['point'], cell=True)} | " + " | ".join(cells) + f" | {total} |")
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
                     f"{md_name(w['approved_by'], cell=True) if w['approved_by'] else ('?' if ran else '-')} | "
                     f"{md_text(w['approved_at'], cell=True) if w['approved_at'] else ('?' if ran else '-')} | "
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
        lines += [f"Error budget: {md_text(w['verdict']['reason'])}"]
    if w["apps_no_result"]:
        lines += ["", "No result from: " + ", ".join(md_name(a) for a in w["apps_no_result"])]
    if w["failed_groups"]:
        lines += ["", "| failed group | application | detail |", "|---|---|---|"]
        lines += [f"| {md_name(g['group_id'], cell=True)} | {_name(g['app'])} | {md_text(g['detail'], cell=True)} |"
                  for g in w["failed_groups"]]
    if w["rollbacks"]:
        lines += ["", "| rolled back | back on the source type | groups back | duration | processing gap | detail |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {md_name(r['app'], cell=True)} | {'yes' if r['ok'] else '**no**'} | {r['groups_back']} of "
                  f"{r['groups']} | {_duration(r['duration_s'])} | {_gap(r['gap_s'], r['path'])} | "
                  f"{md_text(r['detail'], cell=True) or '-'} |"
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
        lines.append(f"| {md_name(a['app'], cell=True)} | {_name(a['team'])} | {a['wave']} | "
                     f"{md_text(a['path'] or '?', cell=True)} | {md_text(a['outcome'].replace('_', ' '), cell=True)} | "
                     f"{groups} | {_duration(a['duration_s'])} | {_gap(a['gap_s'], a['path'])} | {longest} | "
                     f"{md_text(detail, cell=True) or '-'} |")
    return lines


def _gaps_md(ranked: Sequence[Mapping[str, Any]], chart: str | None) -> list[str]:
    if not ranked:
        return []
    lines = ["", "## Longest processing gap per application", "",
             "The processing gap is measured on the offline path: from the moment the application is told to stop "
             "until every group has its members back on the new protocol.", "",
             "| # | application | team | wave | path | longest gap |", "|---|---|---|---|---|---|"]
    lines += [f"| {i} | {md_name(g['app'], cell=True)} | {_name(g['team'])} | {g['wave']} | "
              f"{md_text(g['path'] or '?', cell=True)} | {_longest(g['longest_gap_s'], g['during'], g['path'])} |"
              for i, g in enumerate(ranked, 1)]
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
            lines.append(f"| {md_name(g['group_id'], cell=True)} | {md_name(g['app'], cell=True)} | {g['wave']} | "
                         f"{md_text(g['during'], cell=True)} | not measured: {md_text(g['error'], cell=True)} | "
                         "? | ? | ? |")
            continue
        stall = "?" if g["commit_stall_s"] is None else (
            f"{g['commit_stall_s']:.3f} s on {md_name(g['commit_stall_partition'], cell=True)}"
            + (" (still open)" if g["commit_stall_open"] else ""))
        settle = "?" if g["settle_s"] is None else f"{g['settle_s']:.3f} s"
        lines.append(f"| {md_name(g['group_id'], cell=True)} | {md_name(g['app'], cell=True)} | {g['wave']} | "
                     f"{md_text(g['during'], cell=True)} | {settle} | "
                     f"{'?' if g['rebalances'] is None else g['rebalances']} | "
                     f"{md_text(' → '.join(g['types']), cell=True) or '?'} | {stall} |")
    return lines


def _name(name: str | None) -> str:
    """A name in a table cell, ``?`` when unknown (a team the ownership map does not give)."""
    return "?" if name is None or name == "" else md_name(name, cell=True)


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

"""Building the fleet report: the run's records (:mod:`airflow_provider_kip848.fleet.results`) and its
plan -> one JSON-ready dict, pure (it reads only what it is given and loads no Airflow)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_kip848.kafka.errors import InvalidArgument

if TYPE_CHECKING:  # fleet/ is beside changecontrol/ (layer 1): its records are read by attribute, typed only
    from airflow_provider_kip848.fleet.results import WaveRecord

#: what ``kind`` and ``version`` of report.json say
REPORT_KIND, REPORT_VERSION = "kip848.fleet_report", 1
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
    before = type_counts(types_before, "types_before")
    after = type_counts(types_after, "types_after")
    started = epoch_or_none(started_at, "started_at")
    ended = epoch_or_none(ended_at, "ended_at")
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


def type_counts(value: Mapping[str, int] | None, what: str) -> dict[str, int] | None:
    """A type -> count mapping, checked; None or empty is None (not taken: not zero groups)."""
    if value is None or (isinstance(value, Mapping) and not value):
        return None
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(n, int) and not isinstance(n, bool) and n >= 0
            for k, n in value.items()):
        raise InvalidArgument(f"{what} must map group types to counts (whole numbers >= 0) or be None, got {value!r}")
    return dict(value)


def epoch_or_none(value: object, what: str) -> float | None:
    """Epoch seconds, checked (a finite number, not a bool); None stays None (not known, never 0)."""
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

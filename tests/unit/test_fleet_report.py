"""The fleet report (changecontrol/fleet_report.py) on a synthetic fleet run, and the records it reads
(fleet/results.py).

The run: a plan of three waves (a canary, then two waves of two applications) made by ``plan_waves``; the
canary goes through; in wave 2 one application fails and is rolled back, the other (online) goes through;
the error budget (no failed application allowed) stops wave 3. The verdicts are the real ``ErrorBudget``'s.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from markdown_it import MarkdownIt

from airflow_provider_kip848.changecontrol import fleet_report
from airflow_provider_kip848.changecontrol.fleet_report import (
    FleetHistoryInvalid,
    HistoryEntry,
    append_history,
    build_fleet_report,
    gap_chart_svg,
    history_chart_svg,
    load_history,
    parse_history,
    render_fleet_markdown,
    types_chart_svg,
    write_fleet_report,
)
from airflow_provider_kip848.fleet import Application, ErrorBudget, PlannedGroup, plan_waves
from airflow_provider_kip848.fleet.results import ApplicationResult, GroupOutcome, StepRecord, WaveRecord
from airflow_provider_kip848.kafka import files
from airflow_provider_kip848.kafka.errors import ArtifactUnwritable, InvalidArgument

NS = "{http://www.w3.org/2000/svg}"
C2C = "classic_to_consumer"
FAILED_DETAIL = "members did not rejoin | timed out after 300 s"
HELD_REASON = "group legacy-1 is blocked | static members"


def app(name: str, groups: int, path: str) -> Application:
    readiness = "offline_only" if path == "offline" else "ready_online"
    planned = tuple(PlannedGroup(group_id=f"{name}-{i}", type="classic", state="Stable", member_count=2,
                                 status="pending", readiness=readiness, reason="", path=path)
                    for i in range(1, groups + 1))
    return Application(app=name, team="shop", rule_index=0, groups=planned, status="ready", path=path,
                       reason=f"{path} path")


PLAN = plan_waves([app("alpha", 1, "offline"), app("billing", 2, "offline"), app("catalog", 2, "online"),
                   app("delivery", 2, "offline"), app("email", 1, "online")],
                  canary=1, wave_size=2, max_groups_per_wave=10, migration=C2C)
BUDGET = ErrorBudget(max_failed_apps=0)


def outcome(gid: str, ok: bool = True, detail: str = "", back: bool = False) -> GroupOutcome:
    return GroupOutcome(group_id=gid, ok=ok, type_before="consumer" if back else "classic",
                        type_after="classic" if back else ("consumer" if ok else "classic"), state_after="Stable",
                        members_after=2, offsets_compared=3, offsets_regressed=0, detail=detail)


def result(name: str, wave: int, path: str, ok: bool, groups: tuple[GroupOutcome, ...], start: float, end: float,
           gap: float | None, kind: str = "migrate", detail: str = "") -> ApplicationResult:
    return ApplicationResult(app=name, team="shop", wave=wave, kind=kind, path=path, ok=ok, groups=groups,
                             steps=(StepRecord("stop", start, start + 5, True),), started_at=start, ended_at=end,
                             gap_s=gap, gap_from=None if gap is None else start, gap_to=None if gap is None
                             else start + gap, detail=detail)


def wave_record(number: int, results: tuple[ApplicationResult, ...], rollbacks: tuple[ApplicationResult, ...],
                start: float, end: float, types_after: dict[str, int], by: str) -> WaveRecord:
    wave = PLAN.wave(number)
    return WaveRecord(number=number, canary=wave.canary, wave_hash=wave.wave_hash, apps=wave.apps,
                      group_ids=wave.group_ids, results=results, rollbacks=rollbacks,
                      verdict=BUDGET.judge_wave(wave, [g for r in results for g in r.group_results]),
                      started_at=start, ended_at=end, approved_by=by, approved_at="2025-01-01T10:00:00+00:00",
                      types_after=types_after)


WAVE1 = wave_record(1, (result("alpha", 1, "offline", True, (outcome("alpha-1"),), 1000, 1090, 12.5),), (),
                    1000, 1100, {"classic": 7, "consumer": 1}, "alice")
WAVE2 = wave_record(
    2,
    (result("billing", 2, "offline", False, (outcome("billing-1"), outcome("billing-2", False, FAILED_DETAIL)),
            2010, 2400, 95.0, detail="billing-2 failed"),
     result("catalog", 2, "online", True, (outcome("catalog-1"), outcome("catalog-2")), 2010, 2300, None)),
    (result("billing", 2, "offline", True, (outcome("billing-1", back=True), outcome("billing-2", back=True)),
            2410, 2590, 130.0, kind="rollback", detail="back on classic | offsets kept"),),
    2000, 2600, {"classic": 5, "consumer": 3}, "bob")
TYPES_BEFORE = {"classic": 8}  # no consumer group of the plan yet: counted, so 0, not unknown
TYPES_AFTER = {"classic": 5, "consumer": 3}


def build(**overrides) -> dict:
    args = dict(plan=PLAN.to_dict(), waves=[WAVE1, WAVE2], types_before=TYPES_BEFORE, types_after=TYPES_AFTER,
                run_id="manual__2025-01-01T10:00:00+00:00", dag_id="kip848_fleet_migration", outcome="stopped",
                held_back=[{"app": "legacy", "team": "core", "reason": HELD_REASON}], started_at=900.0,
                ended_at=2700.0)
    return build_fleet_report(**(args | overrides))


def table(markdown: str, header_start: str) -> list[list[str]]:
    """The rows (cells, as a reader sees them rendered) of the Markdown table whose header starts with
    ``header_start``; every row must have as many cells as the header (an unescaped ``|`` in a cell would add
    one)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    assert all(len(r) == len(rows[0]) for r in rows), rows
    assert set(rows[1]) == {"---"}
    shown: list[list[str]] = []
    for token in MarkdownIt("commonmark").enable("table").parse("\n".join(lines[start:start + len(rows)])):
        if token.type == "tr_open":
            shown.append([])
        elif token.type == "inline":
            shown[-1].append("".join(c.content for c in token.children or ()))
    assert [len(r) for r in shown] == [len(rows[0])] * (len(rows) - 1), shown
    return shown


def shown_text(markdown: str) -> str:
    """The Markdown's text as a reader sees it rendered (escapes resolved, code spans as their text)."""
    return "\n".join("".join(c.content for c in t.children or ()) for t in
                     MarkdownIt("commonmark").enable("table").parse(markdown) if t.type == "inline")


# -- the report's numbers ----------------------------------------------------------------------------------------


def test_the_plan_is_a_canary_and_two_waves():
    assert [(w.number, w.canary, w.apps) for w in PLAN.waves] == [
        (1, True, ("alpha",)), (2, False, ("billing", "catalog")), (3, False, ("delivery", "email"))]
    assert WAVE1.verdict.proceed and not WAVE2.verdict.proceed
    assert WAVE2.verdict.failed_apps == ("billing",)


def test_summary_counts_waves_applications_and_groups():
    s = build()["summary"]
    assert (s["waves_planned"], s["waves_run"], s["waves_stopped"], s["waves_not_run"]) == (3, 2, 1, 0)
    assert s["stopped_by"] == {"wave": 2, "reason": WAVE2.verdict.reason}
    assert "stop the remaining waves" in s["stopped_by"]["reason"]
    assert (s["applications_planned"], s["applications_migrated"], s["applications_failed"],
            s["applications_rolled_back"], s["applications_rollback_failed"], s["applications_not_run"],
            s["applications_held_back"]) == (5, 2, 1, 1, 0, 2, 1)
    assert (s["groups_planned"], s["groups_migrated"], s["groups_failed"], s["groups_rolled_back"]) == (8, 3, 1, 2)
    assert s["longest_gap"] == {"app": "billing", "gap_s": 130.0}


def test_report_names_the_run_and_plan():
    report = build()
    assert report["plan_hash"] == PLAN.plan_hash and report["migration"] == C2C
    assert (report["run_id"], report["dag_id"], report["outcome"]) == (
        "manual__2025-01-01T10:00:00+00:00", "kip848_fleet_migration", "stopped")
    assert report["duration_s"] == 1800.0
    assert json.loads(json.dumps(report)) == report  # plain JSON


def test_each_wave_has_its_timing_approval_failures_and_rollbacks():
    one, two, three = build()["waves"]
    assert (one["number"], one["canary"], one["status"], one["duration_s"], one["approved_by"]) == (
        1, True, "ran", 100.0, "alice")
    assert one["wave_hash"] == PLAN.wave(1).wave_hash and one["hash_matches_plan"] is True
    assert (one["applications_ok"], one["applications_failed"], one["failed_groups"]) == (1, 0, [])
    assert (two["status"], two["duration_s"], two["approved_by"]) == ("ran", 600.0, "bob")
    assert (two["apps_ok"], two["apps_failed"]) == (["catalog"], ["billing"])
    assert two["failed_groups"] == [{"group_id": "billing-2", "app": "billing", "detail": FAILED_DETAIL}]
    [back] = two["rollbacks"]
    assert (back["app"], back["ok"], back["groups_back"], back["groups"], back["duration_s"], back["gap_s"]) == (
        "billing", True, 2, 2, 180.0, 130.0)
    assert two["verdict"] == {"proceed": False, "reason": WAVE2.verdict.reason}
    # wave 3 never ran: stopped by wave 2's budget, and nothing about it is counted as 0
    assert (three["status"], three["stopped_by"], three["apps"], three["groups"]) == (
        "stopped", 2, ["delivery", "email"], 3)
    assert one["stopped_by"] is None and two["stopped_by"] is None
    assert three["duration_s"] is None and three["applications_ok"] is None and three["applications_failed"] is None
    assert three["types_after"] is None


def test_a_wave_record_whose_hash_differs_from_the_plan_is_flagged():
    report = build(waves=[replace(WAVE1, wave_hash="0" * 64), WAVE2])
    assert report["waves"][0]["hash_matches_plan"] is False
    assert "differs from the plan's" in render_fleet_markdown(report)


def test_applications_have_outcome_duration_and_gaps():
    rows = {a["app"]: a for a in build()["applications"]}
    assert set(rows) == {"alpha", "billing", "catalog"}  # delivery and email never ran
    assert (rows["alpha"]["outcome"], rows["alpha"]["duration_s"], rows["alpha"]["gap_s"],
            rows["alpha"]["longest_gap_s"]) == ("migrated", 90.0, 12.5, 12.5)
    billing = rows["billing"]
    assert (billing["outcome"], billing["migrate_ok"], billing["rollback_ok"]) == ("rolled_back", False, True)
    # the longest gap across its results is the way back's
    assert (billing["gap_s"], billing["rollback_gap_s"], billing["longest_gap_s"], billing["longest_gap_during"]) \
        == (95.0, 130.0, 130.0, "rollback")
    assert (rows["catalog"]["outcome"], rows["catalog"]["path"], rows["catalog"]["gap_s"],
            rows["catalog"]["longest_gap_s"]) == ("migrated", "online", None, None)


def test_longest_gaps_are_sorted_longest_first_unmeasured_last():
    ranked = build()["longest_gaps"]
    assert [(g["app"], g["longest_gap_s"]) for g in ranked] == [("billing", 130.0), ("alpha", 12.5),
                                                                 ("catalog", None)]


def test_an_application_without_a_result_is_failed_not_migrated():
    silent = replace(WAVE1, results=(), verdict=BUDGET.judge_wave(PLAN.wave(1), []))
    report = build(waves=[silent])
    [alpha] = report["applications"]
    assert (alpha["outcome"], alpha["duration_s"], alpha["gap_s"]) == ("no_result", None, None)
    assert report["summary"]["applications_failed"] == 1 and report["summary"]["applications_migrated"] == 0
    wave = report["waves"][0]
    assert wave["apps_no_result"] == ["alpha"]
    assert wave["failed_groups"][0]["group_id"] == "alpha-1" and wave["failed_groups"][0]["app"] == "alpha"
    assert "no result" in wave["failed_groups"][0]["detail"]
    # the waves after it were stopped by its budget
    assert [w["status"] for w in report["waves"]] == ["ran", "stopped", "stopped"]


def test_groups_by_type_before_and_after_each_wave():
    types = build()["types"]
    assert types["names"] == ["classic", "consumer"]
    assert [(p["wave"], p["types"]) for p in types["by_wave"]] == [
        (0, {"classic": 8}), (1, {"classic": 7, "consumer": 1}), (2, {"classic": 5, "consumer": 3})]
    assert types["after"] == TYPES_AFTER


def test_bad_input_is_refused():
    with pytest.raises(InvalidArgument, match="types_before"):
        build(types_before={"classic": True})
    with pytest.raises(InvalidArgument, match="types_after"):
        build(types_after={"classic": -1})
    with pytest.raises(InvalidArgument, match="two records of wave 1"):
        build(waves=[WAVE1, WAVE1])
    with pytest.raises(InvalidArgument, match="held-back"):
        build(held_back=[42])
    with pytest.raises(InvalidArgument, match="started_at"):
        build(started_at="yesterday")


# -- Markdown ---------------------------------------------------------------------------------------------------


def test_markdown_summary_and_stop():
    md = render_fleet_markdown(build())
    summary = dict(table(md, "| what | count |")[1:])
    assert summary["waves planned"] == "3" and summary["waves stopped by the error budget"] == "1"
    assert summary["applications failed"] == "1" and summary["applications rolled back"] == "1"
    assert summary["applications held back"] == "1" and summary["groups migrated"] == "3"
    assert "Stopped by wave 2's error budget: wave 2: 1 of 2 application(s) failed (billing)" in shown_text(md)
    assert "Longest processing gap: billing, 2 min 10 s" in shown_text(md)
    assert "Longest processing gap: **`billing`**, 2 min 10 s" in md  # the application is a name: a code span


def test_markdown_groups_by_type_table():
    rows = table(render_fleet_markdown(build()), "| point |")
    assert rows == [["point", "classic", "consumer", "total"],
                    ["before the run", "8", "0", "8"],
                    ["after wave 1 (canary)", "7", "1", "8"],
                    ["after wave 2", "5", "3", "8"],
                    ["after the run", "5", "3", "8"]]
    assert "not taken" not in render_fleet_markdown(build())
    rows = table(render_fleet_markdown(build(types_after=None)), "| point |")
    assert rows[-1] == ["after the run", "?", "?", "?"]


def test_markdown_waves_table():
    rows = table(render_fleet_markdown(build()), "| wave |")
    header, one, two, three = rows
    cell = dict(zip(header, one, strict=True))
    assert (cell["wave"], cell["status"], cell["approved by"], cell["duration"], cell["ok"], cell["failed"],
            cell["error budget"]) == ("1 (canary)", "ran", "alice", "1 min 40 s", "1", "0", "proceed")
    cell = dict(zip(header, two, strict=True))
    assert (cell["duration"], cell["ok"], cell["failed"], cell["error budget"]) == ("10 min 0 s", "1", "1", "stop")
    cell = dict(zip(header, three, strict=True))
    assert (cell["status"], cell["duration"], cell["ok"], cell["failed"]) == ("stopped (by wave 2)", "-", "-", "-")


def test_markdown_escapes_pipes_in_cells():
    md = render_fleet_markdown(build())
    failed = table(md, "| failed group |")
    assert failed[1] == ["billing-2", "billing", "members did not rejoin | timed out after 300 s"]
    rollbacks = table(md, "| rolled back |")
    assert rollbacks[1][:5] == ["billing", "yes", "2 of 2", "3 min 0 s", "2 min 10 s"]
    assert rollbacks[1][5] == "back on classic | offsets kept"
    held = table(md, "| application | team | why |")
    assert held[1] == ["legacy", "core", "group legacy-1 is blocked | static members"]


def test_markdown_applications_and_longest_gaps():
    md = render_fleet_markdown(build())
    apps = table(md, "| application | team | wave | path | outcome |")
    by_app = {r[0]: dict(zip(apps[0], r, strict=True)) for r in apps[1:]}
    assert by_app["catalog"]["processing gap"] == "not measured (online path)"
    assert by_app["catalog"]["longest gap"] == "not measured (online path)"
    assert by_app["billing"]["outcome"] == "rolled back" and by_app["billing"]["groups ok"] == "1 of 2"
    assert by_app["billing"]["longest gap"] == "2 min 10 s (way back)"
    assert by_app["alpha"]["processing gap"] == "12.5 s" and by_app["alpha"]["duration"] == "1 min 30 s"
    gaps = table(md, "| # | application |")
    assert [(r[1], r[5]) for r in gaps[1:]] == [("billing", "2 min 10 s (way back)"), ("alpha", "12.5 s"),
                                                ("catalog", "not measured (online path)")]


def test_markdown_links_the_charts_it_is_given():
    report = build()
    md = render_fleet_markdown(report, charts={"types_chart": "types_by_wave.svg", "gap_chart": "gaps.svg"})
    assert "](types_by_wave.svg)" in md and "](gaps.svg)" in md and "history" not in md.lower()
    assert ".svg)" not in render_fleet_markdown(report)


def test_unknown_values_stay_unknown():
    bare = WaveRecord(number=1, canary=True, wave_hash="h", apps=("alpha",), group_ids=("alpha-1",),
                      results=(result("alpha", 1, "online", True, (outcome("alpha-1"),), 1000, 1050, None),),
                      verdict=BUDGET.judge_wave(PLAN.wave(1), {"alpha-1": True}))
    report = build_fleet_report(plan={"migration": C2C}, waves=[bare], types_before=None, types_after=None,
                                run_id="r", dag_id="d", outcome="done")
    s = report["summary"]
    assert s["waves_planned"] is None and s["applications_planned"] is None and s["groups_planned"] is None
    assert report["duration_s"] is None and report["waves"][0]["duration_s"] is None
    assert report["types"]["by_wave"][1]["types"] is None  # an empty types_after: not taken, not zero groups
    assert s["longest_gap"] is None
    md = render_fleet_markdown(report)
    summary = dict(table(md, "| what | count |")[1:])
    assert summary["waves planned"] == "?" and summary["groups planned"] == "?"
    assert "## Groups by type\n\nNo group of the plan was counted: no inventory was taken." in md
    assert "| point |" not in md
    wave = dict(zip(*table(md, "| wave |")[:2], strict=True))
    assert (wave["duration"], wave["approved by"], wave["started"], wave["groups"]) == ("?", "?", "?", "1")
    assert "Longest processing gap: not measured" in md
    assert types_chart_svg(report) is None  # nothing known to draw


def test_without_a_plan_or_inventories_the_report_still_builds():
    """The report task runs even when the plan task failed: what the plan would say stays unknown."""
    report = build(plan=None, waves=[], types_before={}, types_after=None, held_back=None)
    s = report["summary"]
    assert (s["waves_planned"], s["waves_run"], s["applications_planned"], s["groups_planned"]) == (
        None, 0, None, None)
    assert report["plan_hash"] is None and report["types"]["before"] is None and report["applications"] == []
    md = render_fleet_markdown(report)
    assert "- plan: `?`" in md and "No wave ran." in md and "no inventory was taken" in md
    assert gap_chart_svg(report) is None and types_chart_svg(report) is None


# -- charts -----------------------------------------------------------------------------------------------------


def test_types_chart_has_one_line_per_type_over_the_waves():
    root = ET.fromstring(types_chart_svg(build()))
    assert root.tag == f"{NS}svg"
    lines = root.findall(f"{NS}polyline")
    assert len(lines) == 2 and all(len(line.get("points").split()) == 3 for line in lines)  # wave 0, 1, 2
    texts = [t.text for t in root.findall(f"{NS}text")]
    assert "classic" in texts and "consumer" in texts


def test_types_chart_breaks_the_line_where_the_inventory_was_not_taken():
    report = build(waves=[replace(WAVE1, types_after={}), WAVE2])
    root = ET.fromstring(types_chart_svg(report))
    # wave 1 unknown: each type keeps two lone points (before, after wave 2), no line through the gap
    assert not root.findall(f"{NS}polyline") and len(root.findall(f"{NS}circle")) == 4


def test_gap_chart_has_a_bar_per_measured_application_longest_first():
    root = ET.fromstring(gap_chart_svg(build()))
    bars = root.findall(f"{NS}rect")
    assert [b.find(f"{NS}title").text for b in bars] == ["billing: 130", "alpha: 12.50"]
    assert float(bars[0].get("width")) > float(bars[1].get("width")) > 0
    texts = [t.text for t in root.findall(f"{NS}text")]
    assert "catalog" in texts and "not measured (online path)" in texts
    assert texts.index("billing") < texts.index("alpha") < texts.index("catalog")


def test_gap_chart_keeps_the_longest_when_there_are_many():
    root = ET.fromstring(gap_chart_svg(build(), max_bars=1))
    assert len(root.findall(f"{NS}rect")) == 1
    assert any("the 1 longest of 3" in (t.text or "") for t in root.findall(f"{NS}text"))


# -- files ------------------------------------------------------------------------------------------------------


def test_write_fleet_report_writes_json_markdown_and_charts(tmp_path):
    report = build()
    paths = write_fleet_report(str(tmp_path / "run") + "/", report)
    assert paths == {key: str(tmp_path / "run" / name) for key, name in
                     (("types_chart", "types_by_wave.svg"), ("gap_chart", "gaps.svg"), ("json", "report.json"),
                      ("markdown", "report.md"))}
    assert json.loads((tmp_path / "run" / "report.json").read_text()) == report
    md = (tmp_path / "run" / "report.md").read_text()
    assert md == render_fleet_markdown(report, charts={"types_chart": "types_by_wave.svg", "gap_chart": "gaps.svg"})
    for name in ("types_by_wave.svg", "gaps.svg"):
        assert f"]({name})" in md
        ET.parse(tmp_path / "run" / name)  # well-formed
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "gaps.svg", "report.json", "report.md", "types_by_wave.svg"]  # no temporary file left


def test_write_fleet_report_with_history_adds_its_chart(tmp_path):
    report = build()
    history = [HistoryEntry.from_report(report)]
    paths = write_fleet_report(str(tmp_path), report, history=history)
    assert paths["history_chart"] == str(tmp_path / "history.svg")
    assert "](history.svg)" in (tmp_path / "report.md").read_text()


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", broken_fsync)
    with pytest.raises(ArtifactUnwritable, match="No space left on device"):
        write_fleet_report(str(tmp_path / "run"), build())
    assert list((tmp_path / "run").iterdir()) == []  # neither a truncated chart nor a temporary file


@pytest.mark.parametrize("name", ["types_by_wave.svg", "gaps.svg", "report.json", "report.md"])
def test_a_failed_rewrite_keeps_the_old_file_whole(tmp_path, monkeypatch, name):
    write_fleet_report(str(tmp_path), build(outcome="stopped"))
    old = (tmp_path / name).read_text()
    real_replace = files.os.replace

    def replace_but(src, dst):
        if str(dst).endswith(name):
            raise OSError(5, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", replace_but)
    changed = build(outcome="done", waves=[WAVE1], types_after={"classic": 7, "consumer": 1})
    with pytest.raises(ArtifactUnwritable, match=re.escape(name)):
        write_fleet_report(str(tmp_path), changed)
    assert (tmp_path / name).read_text() == old  # the old file, whole
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# -- history ----------------------------------------------------------------------------------------------------


def test_history_round_trip_one_compact_line_per_run(tmp_path):
    location = str(tmp_path / "fleet" / "history.jsonl")
    assert load_history(location) == []  # no history yet
    first = build()
    second = build(run_id="manual__2025-01-08T10:00:00+00:00", ended_at=2700.0 + 7 * 86400, outcome="done",
                   types_before=TYPES_AFTER, types_after={"classic": 0, "consumer": 8})
    assert append_history(location, first) and append_history(location, second)
    lines = (tmp_path / "fleet" / "history.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(": " not in line and ", " not in line for line in lines)
    history = load_history(location)
    assert history == [HistoryEntry.from_report(first), HistoryEntry.from_report(second)]
    one = history[0]
    assert (one.run_id, one.ended_at, one.plan_hash, one.outcome) == (
        "manual__2025-01-01T10:00:00+00:00", 2700.0, PLAN.plan_hash, "stopped")
    assert (one.types_before, one.types_after) == (TYPES_BEFORE, TYPES_AFTER)
    assert (one.apps_migrated, one.apps_failed, one.apps_rolled_back) == (2, 1, 1)
    assert (one.longest_gap_app, one.longest_gap_s) == ("billing", 130.0)


def test_a_retried_report_task_does_not_count_its_run_twice(tmp_path):
    location = str(tmp_path / "history.jsonl")
    assert append_history(location, build()) is True
    assert append_history(location, build(outcome="done")) is False
    assert [e.outcome for e in load_history(location)] == ["stopped"]


GOOD = json.loads(fleet_report.history_line(HistoryEntry.from_report(build())))


@pytest.mark.parametrize(("line", "problem"), [
    ("{not json", "not JSON"),
    ("", "empty"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps(GOOD | {"apps_failed": "1"}), "apps_failed"),
    (json.dumps(GOOD | {"apps_failed": True}), "apps_failed"),
    (json.dumps(GOOD | {"ended_at": None}), "ended_at"),
    (json.dumps(GOOD | {"types_after": {"classic": 1.5}}), "types_after"),
    (json.dumps(GOOD | {"longest_gap": {"app": "billing"}}), "longest_gap"),
    (json.dumps(GOOD | {"v": 2}), "format version"),
    (json.dumps(GOOD | {"extra": 1}), "unknown ['extra']"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "plan_hash"}), "missing ['plan_hash']"),
])
def test_a_bad_history_line_is_an_error_naming_it(tmp_path, line, problem):
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + line + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(FleetHistoryInvalid, match=rf"history.jsonl line 2: .*{re.escape(problem)}"):
        load_history(str(path))


def test_a_line_cut_short_at_the_end_is_an_error_too(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD)[:40])
    with pytest.raises(FleetHistoryInvalid, match="line 2: not JSON"):
        load_history(str(path))
    assert parse_history(json.dumps(GOOD)) == [HistoryEntry.from_dict(GOOD)]  # no final newline: still whole


def test_nothing_is_appended_after_a_bad_line(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("garbage\n")
    with pytest.raises(FleetHistoryInvalid, match="line 1"):
        append_history(str(path), build())
    assert path.read_text() == "garbage\n"


def test_history_chart_plots_groups_by_type_over_runs():
    runs = [replace(HistoryEntry.from_dict(GOOD), run_id=f"r{i}", ended_at=1000.0 + i * 86400,
                    types_after={"classic": 8 - 3 * i, "consumer": 3 * i}) for i in (2, 0, 1)]
    root = ET.fromstring(history_chart_svg(runs))
    lines = {}
    for line in root.findall(f"{NS}polyline"):
        lines[line.get("stroke")] = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    assert len(lines) == 2 and all(len(points) == 3 for points in lines.values())
    # sorted by end time: x grows along every line
    assert all([x for x, _ in points] == sorted(x for x, _ in points) for points in lines.values())
    assert history_chart_svg([]) is None


def test_building_and_rendering_load_no_airflow():
    code = textwrap.dedent("""
        import sys
        from airflow_provider_kip848.changecontrol.fleet_report import (
            build_fleet_report, gap_chart_svg, render_fleet_markdown, types_chart_svg)
        from airflow_provider_kip848.fleet.results import ApplicationResult, GroupOutcome, WaveRecord
        r = ApplicationResult(app="a", team="t", wave=1, kind="migrate", path="offline", ok=True,
                              groups=(GroupOutcome("a-1", True),), gap_s=3.0)
        w = WaveRecord(number=1, canary=True, wave_hash="h", apps=("a",), group_ids=("a-1",), results=(r,))
        report = build_fleet_report(plan={}, waves=[w], types_before={"classic": 1}, types_after={"consumer": 1},
                                    run_id="r", dag_id="d", outcome="done")
        render_fleet_markdown(report), types_chart_svg(report), gap_chart_svg(report)
        print(sorted(m for m in sys.modules if m == "airflow" or m.startswith("airflow.")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


# -- fleet/results.py: the records' JSON ---------------------------------------------------------------------------


def test_wave_record_round_trips_through_json():
    for record in (WAVE1, WAVE2):
        data = json.loads(json.dumps(record.to_dict()))
        assert data["duration_s"] == record.duration_s
        assert WaveRecord.from_dict(data) == record
    step = StepRecord("wait_migrated", 10.0, None, None, group_id="g", detail="waiting")
    assert StepRecord.from_dict(json.loads(json.dumps(step.to_dict()))) == step and step.duration_s is None


def test_application_result_round_trips_and_feeds_the_budget():
    billing = WAVE2.results[0]
    assert ApplicationResult.from_dict(json.loads(json.dumps(billing.to_dict()))) == billing
    assert billing.duration_s == 390.0
    assert [(g.group_id, g.ok) for g in billing.group_results] == [("billing-1", True), ("billing-2", False)]


APP = WAVE2.results[0].to_dict()


@pytest.mark.parametrize(("change", "problem"), [
    ({"ok": "yes"}, "'ok'"),
    ({"wave": "2"}, "'wave'"),
    ({"wave": True}, "'wave'"),
    ({"kind": "upgrade"}, "kind must be"),
    ({"app": None}, "'app'"),
    ({"groups": "billing-1"}, "groups and steps must be lists"),
    ({"steps": {"step": "stop"}}, "groups and steps must be lists"),
    ({"gap_s": "95"}, "'gap_s'"),
    ({"started_at": True}, "'started_at'"),
    ({"groups": [{"group_id": "billing-1"}]}, "'ok'"),
    ({"groups": [{"group_id": "billing-1", "ok": True, "members_after": 1.5}]}, "members_after"),
    ({"steps": [{"step": "stop"}]}, "started_at"),
    ({"steps": [{"step": "stop", "started_at": 1.0, "ok": "true"}]}, "step ok"),
])
def test_application_result_refuses_bad_types(change, problem):
    with pytest.raises(InvalidArgument, match=re.escape(problem)):
        ApplicationResult.from_dict(APP | change)


WAVE = WAVE2.to_dict()


@pytest.mark.parametrize(("change", "problem"), [
    ({"number": "2"}, "'number'"),
    ({"wave_hash": None}, "'wave_hash'"),
    ({"verdict": "stop"}, "verdict must be an object"),
    ({"types_after": {"classic": True}}, "types_after"),
    ({"types_after": [["classic", 5]]}, "types_after"),
    ({"ended_at": "2600"}, "'ended_at'"),
    ({"results": [APP | {"kind": None}]}, "'kind'"),
])
def test_wave_record_refuses_bad_types(change, problem):
    with pytest.raises(InvalidArgument, match=re.escape(problem)):
        WaveRecord.from_dict(WAVE | change)


@pytest.mark.parametrize("field, value", [
    ("proceed", "false"), ("wave", "3"), ("failed_apps", "abc"), ("failed_groups", {"g": 1}), ("reason", None)])
def test_a_wave_record_verdict_with_a_bad_field_is_refused(field, value):
    from airflow_provider_kip848.fleet.results import WaveRecord

    verdict = {"wave": 3, "proceed": False, "reason": "stop", "failed_apps": ["a"], "failed_groups": {"g": "x"}}
    data = {"number": 3, "canary": False, "wave_hash": "h", "apps": ["a"], "group_ids": ["g"],
            "verdict": {**verdict, field: value}}
    with pytest.raises(InvalidArgument):
        WaveRecord.from_dict(data)
    assert WaveRecord.from_dict({**data, "verdict": verdict}).verdict.proceed is False


@pytest.mark.parametrize("field, value", [("canary", "no"), ("apps", "abc"), ("group_ids", [1])])
def test_a_wave_record_with_a_bad_field_is_refused(field, value):
    from airflow_provider_kip848.fleet.results import WaveRecord

    data = {"number": 1, "canary": True, "wave_hash": "h", "apps": ["a"], "group_ids": ["g"]}
    with pytest.raises(InvalidArgument):
        WaveRecord.from_dict({**data, field: value})


# -- the groups settling, from their records (GroupOutcome.downtime) ----------------------------------------------

def settled(seconds: float | None, rebalances: int | None = 2, stall: float | None = 4.25) -> dict:
    return {"settle_s": seconds, "rebalances": rebalances, "types": ["classic", "consumer"],
            "first_member_left": "2025-01-01T10:00:01.000+00:00", "stable_on_target": None,
            "target_type": "consumer", "commit_stall_s": stall, "commit_stall_partition": "orders:1",
            "commit_stall_open": False, "records": 12, "notes": []}


def test_each_touched_group_settling_is_listed_longest_first_unmeasured_and_unreadable_last():
    wave = replace(WAVE1, results=(result("alpha", 1, "offline", True, (
        replace(outcome("alpha-1"), downtime=settled(7.5)),), 1000, 1090, 12.5),))
    billing = WAVE2.results[0]
    billing = replace(billing, groups=(replace(billing.groups[0], downtime=settled(None, rebalances=None, stall=None)),
                                       replace(billing.groups[1], downtime={"error": "CoordinatorUnavailable: x"})))
    back = replace(WAVE2.rollbacks[0], groups=(replace(WAVE2.rollbacks[0].groups[0], downtime=settled(11.0, 1)),
                                               WAVE2.rollbacks[0].groups[1]))
    wave2 = replace(WAVE2, results=(billing, WAVE2.results[1]), rollbacks=(back,))
    report = build(waves=[wave, wave2])
    rows = report["group_settling"]
    assert [(r["group_id"], r["during"], r["settle_s"]) for r in rows] == [
        ("billing-1", "rollback", 11.0), ("alpha-1", "migrate", 7.5), ("billing-1", "migrate", None),
        ("billing-2", "migrate", None)]  # catalog (no downtime: not read) and billing-2's way back not listed
    assert rows[-1]["error"] == "CoordinatorUnavailable: x" and rows[2]["rebalances"] is None
    cells = table(render_fleet_markdown(report), "| group | application |")
    assert cells[1] == ["billing-1", "billing", "2", "rollback", "11.000 s", "1", "classic → consumer",
                        "4.250 s on orders:1"]
    assert cells[3][4:] == ["?", "?", "classic → consumer", "?"]  # unknown stays unknown, never 0
    assert cells[4][4].startswith("not measured: CoordinatorUnavailable")
    # the records carry it through XCom: a round trip keeps it, and a figure that is not a number is refused
    assert ApplicationResult.from_dict(billing.to_dict()) == billing
    bad = billing.to_dict()
    bad["groups"][0]["downtime"] = {"settle_s": "7 s"}
    with pytest.raises(InvalidArgument, match="settle_s"):
        ApplicationResult.from_dict(bad)
    bad["groups"][0]["downtime"] = {"rebalances": 2}
    with pytest.raises(InvalidArgument, match="needs 'settle_s' or 'error'"):
        ApplicationResult.from_dict(bad)


def test_a_run_that_read_no_group_records_has_no_settling_section():
    report = build()
    assert report["group_settling"] == []
    assert "## Groups settling" not in render_fleet_markdown(report)

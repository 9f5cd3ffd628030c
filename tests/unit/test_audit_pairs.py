"""The audit record pair (issue 45, item 5): an intent before each change, its outcome after; read back as changes.

Pure logic on real files (a local JSONL and a ``file://`` object prefix); the kills on a real broker are
``tests/integration/test_audit_faults.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from airflow_provider_kip848.changecontrol import audit
from airflow_provider_kip848.changecontrol import report as run_reports

IDENT = {"dag_id": "kafka_group_config_change", "run_id": "r1", "task_id": "apply", "map_index": -1}


def intent(target: str, before: object, after: object, *, try_number: int = 1, kind: str = "group_config",
           at: str | None = None) -> audit.AuditRecord:
    cid = audit.change_id(IDENT["dag_id"], IDENT["run_id"], IDENT["task_id"], IDENT["map_index"], kind, target)
    extra = {"at": at} if at else {}
    return audit.AuditRecord(kind=kind, target=target, before=before, after=after, try_number=try_number,
                             approvals=[{"task_id": "approval", "by": "bob"}], plan_hash="h", change_id=cid,
                             **IDENT, **extra)


def outcome(of: audit.AuditRecord, result: str, after: object, *, try_number: int = 1,
            error: str | None = None) -> audit.AuditRecord:
    return audit.AuditRecord(kind=of.kind, target=of.target, before=of.before, after=after, try_number=try_number,
                             phase=audit.OUTCOME, outcome=result, change_id=of.change_id, intent_ids=[of.record_id],
                             error=error, **IDENT)


def test_the_change_id_is_the_same_for_every_try_and_a_note_shares_its_changes():
    one = audit.change_id("d", "r", "t", 0, "offsets", "g")
    assert one == audit.change_id("d", "r", "t", 0, "offsets", "g"), "stable: no try number, no time in it"
    assert one == audit.change_id("d", "r", "t", 0, "cross_cluster_restore", "g"), "a note is part of its change"
    assert len({one, audit.change_id("d", "r", "t", 1, "offsets", "g"), audit.change_id("d", "r2", "t", 0, "offsets",
                                                                                         "g")}) == 3


def test_an_intent_alone_reads_as_outcome_unknown_and_its_pair_as_its_outcome(tmp_path):
    log = str(tmp_path / "audit.jsonl")
    a, b = intent("g:k1", None, "1"), intent("g:k2", "5", None)
    audit.append(log, [a, b])
    audit.append(log, [outcome(a, audit.APPLIED, "1")])
    records = audit.read_audit(log)
    assert [(r["phase"], r.get("outcome")) for r in records] == [
        (audit.INTENT, audit.APPLIED), (audit.INTENT, audit.UNKNOWN), (audit.OUTCOME, audit.APPLIED)]
    assert records[0]["completed_by"] == records[2]["record_id"] and records[1]["completed_by"] is None
    changes = audit.changes(records)
    assert [(c["target"], c["after"], c["outcome"]) for c in changes] == [("g:k1", "1", audit.APPLIED),
                                                                         ("g:k2", None, audit.UNKNOWN)]
    assert changes[1]["planned_after"] is None and changes[0]["approvals"] == [{"task_id": "approval", "by": "bob"}]


def test_a_retry_completes_the_killed_trys_intent(tmp_path):
    log = str(tmp_path / "audit.jsonl")
    # killed after the change: try 2 finds it in place
    a = intent("g:k", None, "1")
    audit.append(log, [a, outcome(a, audit.FOUND_IN_PLACE, "1", try_number=2)])
    # killed between its intent and the change: try 2 finds it not in place, then makes it (its own pair)
    b1, b2 = intent("g:j", None, "2"), intent("g:j", None, "2", try_number=2)
    audit.append(log, [b1, outcome(b1, audit.NOT_APPLIED, None, try_number=2), b2, outcome(b2, audit.APPLIED, "2",
                                                                                           try_number=2)])
    rows = audit.summary(audit.read_audit(log))
    assert [(r["target"], r["outcome"]) for r in rows] == [
        ("g:k", "found in place by try 2"), ("g:j", "not applied (try 2 found it not in place)"),
        ("g:j", "applied (try 2)")]
    assert all(r["approved_by"] == ["bob"] for r in rows)


def test_a_later_outcome_replaces_a_failure_and_an_intent_repeated_before_one_outcome_is_one_change(tmp_path):
    log = str(tmp_path / "audit.jsonl")
    a = intent("g:k", None, "1")
    audit.append(log, [a, outcome(a, audit.FAILED, None, error="OperationTimedOut: no answer"),
                       outcome(a, audit.FOUND_IN_PLACE, "1", try_number=2)])
    b1, b2 = intent("g:j", None, "2"), intent("g:j", None, "2", try_number=2)
    audit.append(log, [b1, b2, outcome(b2, audit.APPLIED, "2", try_number=2)])
    changes = audit.changes(audit.read_audit(log))
    assert [(c["target"], c["outcome"], c["try_number"]) for c in changes] == [
        ("g:k", audit.FOUND_IN_PLACE, 1), ("g:j", audit.APPLIED, 2)]
    assert audit.describe_outcome({"outcome": audit.FAILED, "outcome_try": 1, "error": "boom"}) == "failed (try 1): boom"


def test_a_note_keeps_what_it_stated_and_shares_its_changes_outcome(tmp_path):
    log = str(tmp_path / "audit.jsonl")
    change = intent("streams.version", 1, 0, kind="feature")
    note = intent("streams.version", None, {"app": 0}, kind="feature_override_dependent_groups")
    audit.append(log, [change, note, outcome(change, audit.APPLIED, 0)])
    by_kind = {c["kind"]: c for c in audit.changes(audit.read_audit(log))}
    assert by_kind["feature_override_dependent_groups"]["after"] == {"app": 0}
    assert {c["outcome"] for c in by_kind.values()} == {audit.APPLIED}


def test_records_of_the_first_format_read_as_applied_changes(tmp_path):
    log = tmp_path / "audit.jsonl"
    old = {"kind": "group_config", "target": "g:k", "before": None, "after": "1", "record_id": "x", "task_id": "apply",
           "at": "2024-01-01T00:00:00.000+00:00", "approvals": [], "format": audit.AUDIT_FORMAT_1}
    log.write_text(json.dumps(old) + "\n")
    [row] = audit.summary(audit.read_audit(str(log)))
    assert (row["target"], row["after"], row["outcome"]) == ("g:k", "1", "applied")


def test_an_outcome_whose_intent_is_out_of_reach_is_still_shown(tmp_path):
    a = intent("g:k", None, "1")
    [row] = audit.changes([outcome(a, audit.FOUND_IN_PLACE, "1", try_number=2).to_dict()])
    assert (row["target"], row["outcome"], row["after"]) == ("g:k", audit.FOUND_IN_PLACE, "1")


def test_an_object_store_trail_is_read_from_the_runs_day_on(tmp_path):
    url = f"file://{tmp_path}/audit"
    old, new = intent("g:old", None, "1", at="2024-01-01T00:00:00.000+00:00"), intent("g:new", None, "1")
    audit.append(url, [old])
    audit.append(url, [new, outcome(new, audit.APPLIED, "1")])
    assert [r["target"] for r in audit.read_audit(url)] == ["g:old", "g:new", "g:new"]
    today = datetime.now(UTC).date().isoformat()
    assert [(r["target"], r.get("outcome")) for r in audit.read_audit(url, since_day=today)] == [
        ("g:new", audit.APPLIED), ("g:new", audit.APPLIED)]


@dataclass(frozen=True)
class DagRun:
    dag_id: str
    run_id: str
    start_date: datetime | None = None


class TI:
    def xcom_pull(self, task_ids: object = None, key: str = "return_value", **_: object) -> object:
        return None


def test_the_report_reads_the_runs_trail_and_shows_an_intent_alone_as_outcome_unknown(tmp_path):
    log = str(tmp_path / "audit.jsonl")
    done, alone = intent("g:k1", None, "1"), intent("g:k2", None, "2")
    other_run = audit.AuditRecord(kind="group_config", target="g:x", before=None, after="3",
                                  **{**IDENT, "run_id": "r0"})
    audit.append(log, [other_run, done, outcome(done, audit.APPLIED, "1"), alone])
    context = {"ti": TI(), "dag_run": DagRun(IDENT["dag_id"], IDENT["run_id"], datetime.now(UTC))}
    control = run_reports.change_control(context, (), audit_log=log)
    assert [(a["target"], a["outcome"]) for a in control["audit"]] == [("g:k1", "applied"), ("g:k2", audit.UNKNOWN)]
    markdown = run_reports.render_markdown(run_reports.build_report(title="t", outcome="failed", context=context,
                                                                    change_control=control))
    assert "| change | target | before | after | outcome | approved by | record |" in markdown
    [unknown] = [line for line in markdown.splitlines() if "`g:k2`" in line]
    assert "| **outcome unknown** |" in unknown and "| `bob` |" in unknown
    (tmp_path / "dir.jsonl").mkdir()  # a trail that cannot be read: said in the report, never "no change"
    unread = run_reports.change_control(context, (), audit_log=str(tmp_path / "dir.jsonl"))
    assert unread["audit"] == [] and "dir.jsonl" in unread["audit_unread"]
    assert "- audit trail not read: Cannot read" in "\n".join(run_reports._change_control_lines(unread))

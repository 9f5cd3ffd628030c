"""Change-control rules (approvers, four eyes, expiry, plan hash) and the audit log, without Airflow."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_kip848.changecontrol import audit
from airflow_provider_kip848.changecontrol.approvals import (
    ApprovalExpired,
    ApprovalPolicy,
    ChangeControlError,
    NoEligibleApprover,
    PlanChanged,
    SelfApprovalRefused,
    check_plan,
    parse_users,
    plan_diff,
)


@pytest.mark.parametrize("value, expected", [
    (None, ()), ("", ()), ("alice", ("alice",)), ("alice, bob", ("alice", "bob")), ("alice bob alice", ("alice", "bob")),
    (["alice", "bob"], ("alice", "bob")), ('["alice", "bob"]', ("alice", "bob")),
])
def test_parse_users(value, expected):
    assert parse_users(value) == expected


def test_parse_users_refuses_a_broken_list():
    with pytest.raises(ChangeControlError, match="not a list of user ids"):
        parse_users('["alice", ')


def test_four_eyes_removes_the_triggering_user_from_the_assignees():
    policy = ApprovalPolicy.from_values(["alice", "bob"])
    assert policy.four_eyes is True, "four eyes is on by default"
    assert policy.assigned_users("alice") == [{"id": "bob", "name": "bob"}]
    assert ApprovalPolicy.from_values(["alice", "bob"], four_eyes=False).assigned_users("alice") == [
        {"id": "alice", "name": "alice"}, {"id": "bob", "name": "bob"}]
    assert ApprovalPolicy.from_values(None).assigned_users("alice") is None, "no approvers named: Airflow decides"
    with pytest.raises(NoEligibleApprover, match="only approver named \\(alice\\) is the user who triggered"):
        ApprovalPolicy.from_values("alice").assigned_users("alice")


def test_self_approval_is_refused_but_a_self_rejection_is_not():
    policy = ApprovalPolicy.from_values()
    with pytest.raises(SelfApprovalRefused, match="alice triggered this run and cannot also approve it"):
        policy.check_response("Approve", {"id": "alice", "name": "alice"}, "alice")
    policy.check_response("Reject", {"id": "alice"}, "alice")  # stopping your own change is always allowed
    policy.check_response("Approve", {"id": "bob"}, "alice")
    ApprovalPolicy.from_values(four_eyes="false").check_response("Approve", {"id": "alice"}, "alice")


def test_approval_expiry():
    policy = ApprovalPolicy.from_values(max_age_minutes=60)
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    policy.check_fresh((now - timedelta(minutes=59)).isoformat(), now=now)
    with pytest.raises(ApprovalExpired, match="61.0 min old, more than the allowed 60.0 min"):
        policy.check_fresh((now - timedelta(minutes=61)).isoformat(), now=now)
    ApprovalPolicy.from_values(max_age_minutes=0).check_fresh("2000-01-01T00:00:00+00:00")  # 0 = no expiry
    for bad in ("soon", -1):
        with pytest.raises(ChangeControlError, match="approval_max_age_minutes"):
            ApprovalPolicy.from_values(max_age_minutes=bad)


def plan(value, hash_):
    return {"hash": hash_, "steps": ["apply"], "changes": [
        {"kind": "group_config", "target": "g:streams.num.standby.replicas", "before": "0", "after": value}]}


def test_plan_hash_and_diff():
    approved = plan("1", "aaa")
    check_plan("aaa", approved, plan("1", "aaa"))
    with pytest.raises(PlanChanged, match="approved 0 -> 1, now 0 -> 2"):
        check_plan("aaa", approved, plan("2", "bbb"))
    now_nothing = {"hash": "ccc", "steps": ["apply"], "changes": []}
    assert plan_diff(approved, now_nothing) == ["group_config g:streams.num.standby.replicas: approved 0 -> 1, "
                                                "now nothing to change"]


def record(i: int) -> audit.AuditRecord:
    return audit.AuditRecord(kind="group_config", target=f"g:key{i}", before=str(i), after=str(i + 1),
                             triggered_by="alice", approvals=[{"by": "bob", "at": "t"}], plan_hash="h",
                             dag_id="d", run_id="r", task_id="t")


def test_local_audit_appends_and_never_rewrites(tmp_path):
    log = tmp_path / "sub" / "audit.jsonl"
    audit.append(str(log), [record(0)])
    first = log.read_bytes()
    threads = [threading.Thread(target=audit.append, args=(str(log), [record(i)])) for i in range(1, 21)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert log.read_bytes().startswith(first), "earlier lines are never rewritten"
    lines = log.read_text().splitlines()
    assert len(lines) == 21 and all(json.loads(line)["format"] == audit.AUDIT_FORMAT for line in lines)
    assert sorted(r["target"] for r in audit.read_audit(str(log))) == sorted(f"g:key{i}" for i in range(21))
    assert oct(os.stat(log).st_mode & 0o777) == "0o640"
    assert audit.summary(audit.read_audit(str(log)))[0]["approved_by"] == ["bob"]


def test_object_store_audit_writes_one_immutable_object_per_record(tmp_path):
    url = f"file://{tmp_path}/audit"
    where = audit.append(url, [record(1), record(2)])
    assert len(set(where)) == 2 and all(w.startswith(url) and w.endswith(".jsonl") for w in where)
    assert [r["target"] for r in audit.read_audit(url)] == ["g:key1", "g:key2"]
    assert len(list((tmp_path / "audit").rglob("*.jsonl"))) == 2
    assert audit.read_audit(f"file://{tmp_path}/none") == []


def test_connection_names_the_approvers_and_can_require_four_eyes(monkeypatch):
    """A platform team sets the rules per cluster in the connection's extra; a run's Params cannot relax them."""
    from airflow_provider_kip848.operators.approval import KafkaChangeApprovalOperator

    monkeypatch.setenv("AIRFLOW_CONN_PROD_KAFKA", json.dumps({
        "conn_type": "kafka_admin", "host": "broker:9092",
        "extra": {"approvers": "bob, carol", "four_eyes": "required"}}))
    relaxed = KafkaChangeApprovalOperator(task_id="approval", subject="s", kafka_conn_id="prod_kafka",
                                          approvers=[], four_eyes=False)
    policy = relaxed.policy()
    assert policy.approvers == ("bob", "carol") and policy.four_eyes is True
    assert policy.assigned_users("bob") == [{"id": "carol", "name": "carol"}]
    named = KafkaChangeApprovalOperator(task_id="approval", subject="s", kafka_conn_id="prod_kafka",
                                        approvers=["dave"])
    assert named.policy().approvers == ("dave",), "the run's approvers, when named, win over the connection's"
    monkeypatch.setenv("AIRFLOW_CONN_DEV_KAFKA", json.dumps({"conn_type": "kafka_admin", "host": "broker:9092"}))
    dev = KafkaChangeApprovalOperator(task_id="approval", subject="s", kafka_conn_id="dev_kafka", four_eyes="False")
    assert dev.policy().four_eyes is False and dev.policy().approvers == ()


@pytest.mark.parametrize("extra, required", [("required", True), (" Required ", True), (True, True), ("true", True),
                                             ("default", False), ("", False), (None, False), (False, False)])
def test_the_connections_four_eyes_rule_is_read_strictly(monkeypatch, extra, required):
    from airflow_provider_kip848.operators.approval import KafkaChangeApprovalOperator

    monkeypatch.setenv("AIRFLOW_CONN_RULES_KAFKA", json.dumps({
        "conn_type": "kafka_admin", "host": "broker:9092", "extra": {"four_eyes": extra}}))
    run = KafkaChangeApprovalOperator(task_id="approval", subject="s", kafka_conn_id="rules_kafka", four_eyes=False)
    assert run.policy().four_eyes is required


@pytest.mark.parametrize("extra", ["requried", "yes", "on", 1, "strict"])
def test_a_four_eyes_extra_that_is_neither_required_nor_default_fails_the_approval_never_relaxes_it(monkeypatch,
                                                                                                   extra):
    """Set outside the form (an env var, the CLI, a secrets backend), a typo used to read as "not required": a run
    with four_eyes=false then let its triggering user approve a change on production."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_kip848.operators.approval import KafkaChangeApprovalOperator

    monkeypatch.setenv("AIRFLOW_CONN_RULES_KAFKA", json.dumps({
        "conn_type": "kafka_admin", "host": "broker:9092", "extra": {"four_eyes": extra}}))
    run = KafkaChangeApprovalOperator(task_id="approval", subject="s", kafka_conn_id="rules_kafka", four_eyes=False)
    with pytest.raises(AirflowFailException, match="extra four_eyes must be 'required' or 'default'"):
        run.policy()


def test_a_reused_approval_lists_its_approver_once():
    record = {"kind": "group_config", "target": "g:k", "before": None, "after": "1", "task_id": "apply",
              "at": "2026-11-24T12:00:00+00:00", "record_id": "r1",
              "approvals": [{"task_id": "approval", "by": "bob"}, {"task_id": "recheck_approval", "by": "bob",
                                                                    "reused": True}]}
    assert audit.summary([record])[0]["approved_by"] == ["bob"]


def test_the_approval_form_says_who_may_approve_and_why_someone_may_not():
    policy = ApprovalPolicy.from_values(["alice", "bob"], True, 60)
    text = policy.who_may_approve("alice")
    assert "- Approvers: `bob` (anyone else is refused by Airflow)." in text  # user ids are names: code spans
    assert "- Not `alice`: they triggered this run (four-eyes rule)." in text
    assert "- The approval holds for 60.0 min; after that the change asks again." in text
    anyone = ApprovalPolicy.from_values([], False, None).who_may_approve("carol")
    assert "Any user Airflow allows" in anyone and "relaxed for this run" in anyone


def test_the_window_guard_operator_fails_outside_its_window_and_on_a_window_it_cannot_read():
    """The first task of every downtime DAG: inside the window it returns the window it checked; outside it,
    or with a window that does not parse (a typo in a form), the task fails without retry, naming why."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_kip848.operators.window import KafkaMaintenanceWindowGuardOperator
    from kip848_harness.windows import closed_window, open_window

    def guard(window: dict[str, str], **change: str) -> dict:
        params = {**window, **change}
        return KafkaMaintenanceWindowGuardOperator(task_id="window_guard", window_days=params["window_days"],
                                              window_start=params["window_start"], window_end=params["window_end"],
                                              window_tz=params["window_tz"]).execute({})

    assert guard(open_window())["window"]
    with pytest.raises(AirflowFailException, match="(?i)window"):
        guard(closed_window())
    with pytest.raises(AirflowFailException, match="window days must be among"):
        guard(open_window(), window_days="MON,XYZ")
    with pytest.raises(AirflowFailException, match="unknown time zone"):
        guard(open_window(), window_tz="Mars/Olympus")

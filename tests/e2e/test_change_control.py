"""Change control end to end, through Airflow's REST API with real users (SimpleAuthManager, all-admins off).

alice triggers the runs; bob is an approver; carol is a user who is not assigned.
Airflow itself answers 403 to users who are not assigned; the provider refuses a
self-approval that Airflow let through; a plan that changed on the cluster, or an
approval that expired, is not reused; every applied change leaves an audit line
whose before/after match what the broker reports.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from airflow_provider_kip848.changecontrol.audit import APPLIED, INTENT, OUTCOME, changes, read_audit
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from tests.e2e.helpers import run_dag, state

DAG = "kafka_group_config_change"
KEY = "streams.num.standby.replicas"
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}


@pytest.fixture
def users(monkeypatch, tmp_path) -> dict[str, str]:
    """Three SimpleAuthManager users with passwords; all-admins mode off for this test. Returns tokens."""
    from kip848_harness.hitl import HitlClient

    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps(PASSWORDS))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "alice:admin,bob:admin,carol:admin")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
    return {user: HitlClient.token_for(user, pw) for user, pw in PASSWORDS.items()}


class ScriptedApprovers(threading.Thread):
    """Answers each pending approval following ``script[task_id]``: (user, option) attempts in order,
    stopping at the first one Airflow accepts; records every attempt with its HTTP status."""

    def __init__(self, dag_id: str, tokens: dict[str, str], script: dict[str, list[tuple[str, str]]],
                 before_answer: Any = None) -> None:
        super().__init__(daemon=True)
        self.dag_id, self.tokens, self.script, self.before_answer = dag_id, tokens, script, before_answer
        self.answered: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        from kip848_harness.hitl import PARKED, HitlClient

        try:
            clients = {u: HitlClient(t) for u, t in self.tokens.items()}
            done: set[str] = set()
            while not self.stop_flag.is_set():
                for detail in clients["bob"].pending(self.dag_id):
                    ti = detail["task_instance"]
                    # only a parked task is resumed by an answer (see testing/hitl.py AutoResponder): answered
                    # while it was still running, the run waited forever for an answer already given
                    if ti["id"] in done or ti.get("state") not in PARKED:
                        continue
                    done.add(ti["id"])
                    if self.before_answer:
                        self.before_answer(detail)
                    for user, option in self.script.get(ti["task_id"], []):
                        response = clients[user].respond(detail, option)
                        self.answered.append({"task_id": ti["task_id"], "user": user, "option": option,
                                              "status": response.status_code, "body": detail.get("body"),
                                              "subject": detail.get("subject")})
                        if response.status_code == 200:
                            break
                time.sleep(0.3)
        except BaseException as exc:  # noqa: BLE001
            self.errors.append(exc)

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)


def change(tokens, script, conf, *, before_answer=None, triggered_by="alice"):
    approvers = ScriptedApprovers("kafka_group_config_change", tokens, script, before_answer)
    approvers.start()
    return run_dag(DAG, conf, responder=approvers, triggered_by=triggered_by)


def base_conf(group: str, **extra) -> dict[str, Any]:
    """The run's conf (its report and audit records go where the deployment says: the ``run_files`` fixture)."""
    return {"group_id": group, "key": KEY, "value": "2", "action": "set", "allow_absent_group": True, **extra}


def test_assigned_approvers_and_four_eyes(airflow_db, kafka_conn, bootstrap, unique, tmp_path, users, run_files):
    group = unique("four-eyes")
    audit_log = str(run_files.audit)
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        # 1. approvers alice and bob; alice triggered: carol (not assigned) and alice (four eyes) get 403
        run, answers, report = change(users, {"approval": [("carol", "Approve"), ("alice", "Approve"),
                                                            ("bob", "Approve")]},
                                      base_conf(group, approvers=["alice", "bob"]))
        assert [(a["user"], a["status"]) for a in answers] == [("carol", 403), ("alice", 403), ("bob", 200)]
        assert state(run) == "success" and report["outcome"] == "changed", report
        assert report["triggered_by"] == "alice"
        assert report["change_control"]["policy"]["assigned_users"] == ["bob"]
        assert report["change_control"]["decisions"]["approval"]["by"] == "bob"
        dynamic = admin.describe_group_config(group).dynamic
        assert dynamic == {KEY: "2"}
        # the pair: the intent (before the change, as planned), then its outcome (read back)
        assert [r["phase"] for r in read_audit(audit_log)] == [INTENT, OUTCOME]
        [record] = changes(read_audit(audit_log))
        assert (record["kind"], record["target"], record["before"], record["after"], record["outcome"]) == (
            "group_config", f"{group}:{KEY}", None, dynamic[KEY], APPLIED)
        assert record["triggered_by"] == "alice" and record["task_id"] == "apply"
        assert [(a["task_id"], a["decision"], a["by"]) for a in record["approvals"]] == [
            ("approval", "Approve", "bob"), ("recheck_approval", "Approve", "bob")]
        assert record["approvals"][1]["reused"] == "approval"
        assert record["plan_hash"] == report["plan"]["hash"] and "| group_config |" in record["plan"]["markdown"]
        assert record["run_id"] == report["run_id"] and record["cluster_id"]
        assert report["change_control"]["audit"][0]["record_id"] == record["record_id"]

        # 2. nobody named: Airflow lets anyone answer, the provider refuses alice approving her own change
        run, answers, report = change(users, {"approval": [("alice", "Approve")]},
                                      base_conf(group, value="1"))
        assert [(a["user"], a["status"]) for a in answers] == [("alice", 200)]
        assert state(run) == "failed" and report["outcome"] == "refused"
        assert "Self-approval refused: alice triggered this run" in report["change_control"]["decisions"][
            "approval"]["refused"]
        assert admin.describe_group_config(group).dynamic == {KEY: "2"}, "nothing was applied"
        assert len(changes(read_audit(audit_log))) == 1, "no audit record: no change"

        # 3. four eyes relaxed (a development cluster): the self-approval applies, and the report says so
        run, answers, report = change(users, {"approval": [("alice", "Approve")]},
                                      base_conf(group, value="1", four_eyes=False))
        assert state(run) == "success" and report["outcome"] == "changed"
        assert report["change_control"]["policy"]["four_eyes"] == "relaxed"
        assert "relaxed for this run" in run_files.report_md(DAG, run.run_id)
        assert admin.describe_group_config(group).dynamic == {KEY: "1"}
        records = changes(read_audit(audit_log))
        assert len(records) == 2 and records[1]["change_control"]["four_eyes"] == "relaxed"
        assert (records[1]["before"], records[1]["after"]) == ("2", "1")

        # 4. the only approver named is the triggering user: nobody could approve, the task fails at once
        run, answers, report = change(users, {}, base_conf(group, value="0", approvers=["alice"]))
        assert state(run) == "failed" and report["failed_tasks"] == ["approval"] and answers == []
        assert admin.describe_group_config(group).dynamic == {KEY: "1"}


def test_cluster_changed_between_approval_and_apply(airflow_db, kafka_conn, bootstrap, unique, tmp_path, users,
                                                   run_files):
    group = unique("replan")
    audit_log = str(run_files.audit)
    with KafkaAdmin(ClientSettings(bootstrap)) as admin:
        def someone_sets(value):
            def hand_change(detail):
                if detail["task_instance"]["task_id"] == "approval":
                    admin.alter_group_config(group, {KEY: value}, [], allow_absent_group=True)
            return hand_change

        # someone sets another value while the approval is pending: a new approval shows the diff; bob rejects
        run, answers, report = change(users, {"approval": [("bob", "Approve")], "recheck_approval": [("bob", "Reject")]},
                                      base_conf(group, approvers=["bob"]), before_answer=someone_sets("0"))
        assert state(run) == "success" and report["outcome"] == "rejected_after_recheck", report
        recheck = [a for a in answers if a["task_id"] == "recheck_approval"]
        assert len(recheck) == 1 and recheck[0]["subject"].startswith("Re-approval needed")
        assert f"group_config {group}:{KEY}: approved (broker default) -> 2, now 0 -> 2" in recheck[0]["body"]
        assert admin.describe_group_config(group).dynamic == {KEY: "0"}, "nothing was applied"
        assert read_audit(audit_log) == []

        # someone applies the very change by hand: nothing is left to apply, nothing is applied twice
        run, answers, report = change(users, {"approval": [("bob", "Approve")]},
                                      base_conf(group, approvers=["bob"]), before_answer=someone_sets("2"))
        assert state(run) == "success" and report["outcome"] == "nothing_applied", report
        assert [a["task_id"] for a in answers] == ["approval"]
        assert report["change_control"]["recheck"]["reasons"]
        assert admin.describe_group_config(group).dynamic == {KEY: "2"} and read_audit(audit_log) == []

        # an approval older than approval_max_age_minutes is not reused: asked again, then applied
        run, answers, report = change(users, {"approval": [("bob", "Approve")], "recheck_approval": [("bob", "Approve")]},
                                      base_conf(group, value="1", approvers=["bob"],
                                                approval_max_age_minutes=0.0005))
        assert state(run) == "success" and report["outcome"] == "changed", report
        recheck = [a for a in answers if a["task_id"] == "recheck_approval"]
        assert len(recheck) == 1 and "more than the allowed" in recheck[0]["body"]
        assert admin.describe_group_config(group).dynamic == {KEY: "1"}
        [record] = changes(read_audit(audit_log))
        assert [(a["task_id"], a["by"], a["reused"]) for a in record["approvals"]] == [
            ("approval", "bob", None), ("recheck_approval", "bob", None)]
        assert (record["before"], record["after"]) == ("2", "1")

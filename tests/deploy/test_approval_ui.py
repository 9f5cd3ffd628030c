"""The four-eyes rule in the web UI: the triggering user is refused (her Approve and her Reject alike: Airflow's
HITL accepts answers only from the assigned users), a second admin approves on the Required Actions page, and the
change is applied."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import consume, create_topics, produce
from tests.deploy.browser import shot, signed_in
from tests.deploy.deployment import Deployment, wait_for

DAG_ID = "kafka_group_config_change"
GROUP = "deploy-approval-orders-app"
SUBJECT_PART = GROUP


def open_required_action(page, dep: Deployment, run_id: str) -> None:
    """The approval as a person reaches it: Required Actions list, then the run's approval task."""
    page.goto(f"{dep.base_url}/required_actions")
    expect(page.get_by_text(SUBJECT_PART).first).to_be_visible()
    page.goto(f"{dep.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/approval/required_actions")
    expect(page.get_by_role("button", name="Approve")).to_be_visible()


def test_self_approval_refused_second_admin_approves(deployment: Deployment, browser, screenshots):
    topic = "deploy-approval-orders"
    create_topics(deployment.bootstrap, {topic: 2})
    produce(deployment.bootstrap, topic, (f"v{i}" for i in range(10)))
    consume(deployment.bootstrap, GROUP, [topic], 10, group_protocol="consumer")
    deployment.api("alice", "PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()
    response = deployment.api("alice", "POST", f"/dags/{DAG_ID}/dagRuns", json={
        "logical_date": None,
        "conf": {"group_id": GROUP, "key": "consumer.heartbeat.interval.ms", "value": "1500", "action": "set"}})
    response.raise_for_status()
    run_id = response.json()["dag_run_id"]
    detail = deployment.wait_approval(DAG_ID, run_id)
    assert [u["id"] for u in detail["assigned_users"]] == ["bob"]
    assert "Not alice: they triggered this run (four-eyes rule)." in detail["body"]

    with signed_in(browser, deployment, "alice") as page:  # the person who triggered the change
        open_required_action(page, deployment, run_id)
        page.get_by_role("button", name="Approve").click()
        expect(page.get_by_text("Access Denied").first).to_be_visible()  # Airflow refuses: alice is not assigned
        expect(page.get_by_text("Not alice: they triggered this run (four-eyes rule).")).to_be_visible()
        shot(page, screenshots, "self_approval_refused")
        # nor may she reject it: Airflow refuses every answer of a user not assigned (docs/change-control.md)
        open_required_action(page, deployment, run_id)  # a fresh page: no toast left from the Approve click
        expect(page.get_by_text("Access Denied")).to_have_count(0)
        page.get_by_role("button", name="Reject").click()
        expect(page.get_by_text("Access Denied").first).to_be_visible()
    assert deployment.pending_approvals(DAG_ID, run_id), "a refused click answered the approval"
    refused = deployment.answer(detail, "alice", "Reject")
    assert refused.status_code == 403, refused.text
    assert "User=alice (id=alice) is not a respondent for the task." in refused.json()["detail"], refused.text
    assert deployment.pending_approvals(DAG_ID, run_id), "alice's rejection answered the approval"

    with signed_in(browser, deployment, "bob") as page:  # the second person
        open_required_action(page, deployment, run_id)
        expect(page.get_by_text("Who may approve")).to_be_visible()
        shot(page, screenshots, "approval_as_approver")
        page.get_by_role("button", name="Approve").click()
        wait_for(lambda: not deployment.pending_approvals(DAG_ID, run_id), 60, "approval answered",
                 alive=deployment.check)

    run = deployment.wait_run(DAG_ID, run_id)
    states = {t: ti["state"] for t, ti in deployment.task_instances(DAG_ID, run_id).items()}
    assert run["state"] == "success", states
    decision = deployment.xcom(DAG_ID, run_id, "approval", key="decision")
    assert decision["decision"] == "Approve" and decision["by"] == "bob", decision
    # the audit record in the deployment's artifact location, written by whichever worker applied it
    records = [json.loads(line) for line in (deployment.artifacts / "audit.jsonl").read_text().splitlines()]
    mine = [r for r in records if r["run_id"] == run_id]
    # a pair: the intent written before the change, then its outcome read back after it
    assert [(r["phase"], r["target"]) for r in mine] == [
        (phase, f"{GROUP}:consumer.heartbeat.interval.ms") for phase in ("intent", "outcome")], records
    assert mine[1]["outcome"] == "applied" and mine[1]["after"] == "1500" and mine[1]["change_id"] == mine[0]["change_id"]
    assert mine[0]["triggered_by"] == "alice" and mine[0]["after"] == "1500"
    assert mine[0]["change_control"]["approval_max_age_minutes"] == 60  # the age that was enforced
    assert mine[0]["change_control"]["four_eyes"] == "enforced"
    # one decision, bob's; the recheck before apply reused it (and says so)
    assert [(a["task_id"], a["by"], a["decision"], bool(a["reused"])) for a in mine[0]["approvals"]] == [
        ("approval", "bob", "Approve", False), ("recheck_approval", "bob", "Approve", True)], mine[0]["approvals"]
    admin = KafkaAdmin(ClientSettings(deployment.bootstrap))
    try:
        assert admin.describe_group_config(GROUP).dynamic.get("consumer.heartbeat.interval.ms") == "1500"
    finally:
        admin.close()

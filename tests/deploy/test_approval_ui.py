"""The four-eyes rule in the web UI: the triggering user is refused (her Approve and her Reject alike: Airflow's
HITL accepts answers only from the assigned users), a second admin approves on the Required Actions page, and the
change is applied. And a group id cannot forge the page the approver signs (issue 45): the issue's id shows as
text, with no link and no bold from it."""

from __future__ import annotations

import json
import re

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
    assert "Not `alice`: they triggered this run (four-eyes rule)." in detail["body"]  # a user id: a code span

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


#: the issue's group id: on the code before the fix, a heading with a link to evil.example and a bold "APPROVED BY
#: SECURITY" on the approval page
FORGED = "orders-app](https://evil.example/approve) **APPROVED BY SECURITY** [x"


def test_a_forged_group_id_is_text_on_the_approval_page(deployment: Deployment, browser, screenshots):
    """A real group with the issue's id, a config change on it triggered by alice; bob opens its approval in
    Chromium: the id shows whole as text (its brackets and asterisks too), the page links nowhere near
    evil.example, no bold and no heading comes from the id; bob rejects and nothing changes."""
    topic = "deploy-inert-orders"
    create_topics(deployment.bootstrap, {topic: 1})
    produce(deployment.bootstrap, topic, (f"v{i}" for i in range(3)))
    consume(deployment.bootstrap, FORGED, [topic], 3, group_protocol="consumer")
    deployment.api("alice", "PATCH", f"/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()
    response = deployment.api("alice", "POST", f"/dags/{DAG_ID}/dagRuns", json={
        "logical_date": None,
        "conf": {"group_id": FORGED, "key": "consumer.heartbeat.interval.ms", "value": "1500", "action": "set"}})
    response.raise_for_status()
    run_id = response.json()["dag_run_id"]
    detail = deployment.wait_approval(DAG_ID, run_id)
    assert f"`{FORGED}:consumer.heartbeat.interval.ms`" in detail["body"], detail["body"]

    with signed_in(browser, deployment, "bob") as page:
        page.goto(f"{deployment.base_url}/dags/{DAG_ID}/runs/{run_id}/tasks/approval/required_actions")
        expect(page.get_by_role("button", name="Reject")).to_be_visible()
        expect(page.get_by_text("Who may approve")).to_be_visible()
        # the id as text: the plan's target cell holds it whole, brackets and asterisks included
        expect(page.locator("code", has_text=f"{FORGED}:consumer.heartbeat.interval.ms")).to_have_count(1)
        # the title is the plan's one heading, the id's "**" and "](" in it as characters
        expect(page.get_by_role("heading").filter(has_text=f"Group {FORGED}: set")).to_have_count(1)
        expect(page.get_by_role("heading", name=re.compile("APPROVED BY SECURITY"))).to_have_count(1)
        # nothing links to evil.example, nothing is bold from the id
        expect(page.locator("a[href*='evil.example']")).to_have_count(0)
        expect(page.locator("strong, b").filter(has_text="APPROVED BY SECURITY")).to_have_count(0)
        expect(page.get_by_role("link", name=re.compile("APPROVED|orders-app"))).to_have_count(0)
        shot(page, screenshots, "forged_group_id_is_text")
        page.get_by_role("button", name="Reject").click()
        wait_for(lambda: not deployment.pending_approvals(DAG_ID, run_id), 60, "approval answered",
                 alive=deployment.check)

    run = deployment.wait_run(DAG_ID, run_id)
    assert run["state"] == "success", deployment.failed_task_logs(DAG_ID, run_id)
    assert deployment.xcom(DAG_ID, run_id, "report")["outcome"] == "rejected"
    admin = KafkaAdmin(ClientSettings(deployment.bootstrap))
    try:
        assert admin.describe_group_config(FORGED).dynamic == {}, "a rejected change was applied"
    finally:
        admin.close()

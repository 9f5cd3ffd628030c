"""The connection is made where a platform team makes it: the UI's connection form, with the
provider's own fields for the cluster's change control and artifact location."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.deploy.browser import shot, signed_in
from tests.deploy.deployment import Deployment, free_port

CONN_ID = "kafka_made_in_the_ui"
#: the connection the tier makes by REST (conftest.py), with its Port
DEPLOYMENT_CONN_ID = "kafka_admin_default"


def field(page: Page, label: str, role: str = "textbox"):
    return page.get_by_role("group").filter(has_text=label).get_by_role(role)


def test_connection_made_in_the_form_runs_a_dag(deployment: Deployment, browser, screenshots):
    shared = f"{deployment.artifacts}/from-the-form"
    with signed_in(browser, deployment, "alice") as page:
        page.goto(f"{deployment.base_url}/connections")
        page.get_by_role("button", name="Add Connection").click()
        page.get_by_label("Connection ID").fill(CONN_ID)
        page.get_by_role("combobox", name="Connection Type").click()
        page.keyboard.type("Kafka group admin")
        page.get_by_role("option", name="Kafka group admin (KIP-848 / KIP-1071)").click()
        page.get_by_role("textbox", name="Bootstrap servers").fill(deployment.bootstrap)
        page.get_by_role("button", name="Extra Fields", exact=True).click()
        field(page, "Approvers of changes to this cluster").fill("alice,bob")
        field(page, "Four-eyes rule", "combobox").click()
        page.get_by_role("option", name="required").click()
        field(page, "Artifacts location (snapshots, reports)").fill(shared)
        expect(field(page, "Audit log (path or URL)")).to_be_visible()
        shot(page, screenshots, "connection_form")
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("dialog")).to_be_hidden()

    conn = deployment.api("alice", "GET", f"/connections/{CONN_ID}").json()
    assert conn["conn_type"] == "kafka_admin" and conn["host"] == deployment.bootstrap
    extra = json.loads(conn["extra"])
    assert (extra["approvers"], extra["four_eyes"], extra["artifacts_url"]) == ("alice,bob", "required", shared)

    # a worker uses it: the inventory of the cluster through the connection made in the UI
    dag_id = "kafka_cluster_inventory"
    deployment.api("alice", "PATCH", f"/dags/{dag_id}", json={"is_paused": False}).raise_for_status()
    response = deployment.api("alice", "POST", f"/dags/{dag_id}/dagRuns",
                              json={"logical_date": None, "conf": {"kafka_conn_id": CONN_ID}})
    response.raise_for_status()
    run_id = response.json()["dag_run_id"]
    run = deployment.wait_run(dag_id, run_id)
    assert run["state"] == "success", deployment.failed_task_logs(dag_id, run_id)
    assert deployment.xcom(dag_id, run_id, "describe_cluster")["cluster_id"]


def test_the_test_button_connects_to_the_cluster_and_names_a_wrong_bootstrap(deployment: Deployment, browser,
                                                                            screenshots):
    """[core] test_connection = Enabled (docs/deploy.md): the Connections list's Test button runs the hook's
    test_connection() in the API server against the cluster. The deployment's connection answers with the cluster's
    feature levels; one whose bootstrap servers nothing listens on says so, within its request timeout."""
    dead = f"127.0.0.1:{free_port()}"
    wrong = "kafka_wrong_bootstrap"
    deployment.api("alice", "POST", "/connections", json={
        "connection_id": wrong, "conn_type": "kafka_admin", "host": dead, "port": int(dead.rsplit(":", 1)[1]),
        "extra": json.dumps({"request_timeout_ms": 3000})}).raise_for_status()
    with signed_in(browser, deployment, "alice") as page:
        page.goto(f"{deployment.base_url}/connections")

        def test_button(conn_id: str):
            return page.get_by_role("row").filter(has_text=conn_id).get_by_role("button", name="Test Connection")

        test_button(DEPLOYMENT_CONN_ID).click()
        expect(page.get_by_text("Test Connection Successful")).to_be_visible()
        expect(page.get_by_text(f"Connected to {deployment.bootstrap}: group.version=")).to_be_visible()
        shot(page, screenshots, "connection_test")
        test_button(wrong).click()
        expect(page.get_by_text("Test Connection Failed")).to_be_visible()
        expect(page.get_by_text(f"No broker answered at {dead} in time")).to_be_visible()

"""The fleet view in the deployment's web UI: found in the navigation, behind Airflow's own sign-in.

The provider's plugin is loaded by the deployment from the installed wheel (its ``airflow.plugins`` entry
point): a signed-in admin opens "Browse > Kafka fleet", sees the groups this test creates with their type,
state and readiness, and follows a group's link to its DAG runs; a browser that is not signed in, and a
viewer (who may not read the connection the page reads the cluster with), are refused.
"""

from __future__ import annotations

import requests
from playwright.sync_api import expect

from airflow_provider_kip848.testing.clients import consume, create_topics, produce
from tests.deploy.browser import UI_TIMEOUT_MS, shot, signed_in
from tests.deploy.deployment import Deployment

TOPIC = "deploy-fleet-orders"
CLASSIC = "deploy-fleet-billing-app"
CONSUMER = "deploy-fleet-payments-app"


def test_fleet_view_in_the_ui(deployment: Deployment, browser, screenshots):
    create_topics(deployment.bootstrap, {TOPIC: 2})
    produce(deployment.bootstrap, TOPIC, (f"v{i}" for i in range(20)))
    consume(deployment.bootstrap, CLASSIC, [TOPIC], 20, group_protocol="classic")
    consume(deployment.bootstrap, CONSUMER, [TOPIC], 10, group_protocol="consumer")

    with signed_in(browser, deployment, "alice") as page:
        # the entry in the navigation: Browse > Kafka fleet, the page in the UI's frame
        page.get_by_role("button", name="Browse").click()
        page.get_by_role("menuitem", name="Kafka fleet").click()
        page.wait_for_url(f"{deployment.base_url}/plugin/kip848-fleet**")
        fleet = page.frame_locator("iframe[title='Kafka fleet']")
        classic_row = fleet.locator(f"tr.group[data-group='{CLASSIC}']")
        consumer_row = fleet.locator(f"tr.group[data-group='{CONSUMER}']")
        expect(classic_row).to_be_visible(timeout=UI_TIMEOUT_MS)
        expect(classic_row).to_contain_text("Empty")
        expect(classic_row).to_contain_text("classic_to_consumer: ready_online")
        expect(consumer_row).to_contain_text("consumer_to_classic")
        expect(fleet.get_by_text("classic · Empty")).to_be_visible()
        expect(fleet.locator("#readiness")).to_contain_text("classic_to_consumer")
        # the filter box narrows the table to the groups of this test
        fleet.locator("#filter").fill("deploy-fleet")
        expect(fleet.locator("tr.group:visible")).to_have_count(2)
        shot(page, screenshots, "fleet_view")

        # a group's link leads the UI (not the frame) to the DAG runs whose conf names the group
        classic_row.get_by_role("link", name="DAG runs").click()
        page.wait_for_url(f"{deployment.base_url}/dag_runs?conf_contains=%22{CLASSIC}%22")
        # the Dag Runs list, with its Conf filter set to the group
        expect(page.get_by_role("button", name=f'Conf: "{CLASSIC}"')).to_be_visible()

    # the same facts as JSON, with the REST API's own token
    summary = deployment.session("alice").get(f"{deployment.base_url}/kip848/fleet.json",
                                              params={"group_ids": f"{CLASSIC},{CONSUMER}"}, timeout=60)
    assert summary.status_code == 200, summary.text
    body = summary.json()
    assert body["by_type_state"] == {"classic": {"Empty": 1}, "consumer": {"Empty": 1}}
    assert body["readiness"]["classic_to_consumer"] == {"ready_online": 1}


def test_fleet_view_refused_without_sign_in(deployment: Deployment, browser):
    for path in ("/kip848/fleet", "/kip848/fleet.json"):
        assert requests.get(f"{deployment.base_url}{path}", timeout=30).status_code == 401
        viewer = deployment.session("victor").get(f"{deployment.base_url}{path}", timeout=30)
        assert viewer.status_code == 403, viewer.text
    context = browser.new_context()  # a browser with no session cookie
    try:
        response = context.new_page().goto(f"{deployment.base_url}/kip848/fleet")
        assert response is not None and response.status == 401
        assert "Not authenticated" in response.text()
    finally:
        context.close()

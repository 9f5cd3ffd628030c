"""The fleet view in the deployment's web UI: found in the navigation, behind Airflow's own sign-in.

The provider's plugin is loaded by the deployment from the installed wheel (its ``airflow.plugins`` entry
point): a signed-in admin opens "Browse > Kafka fleet", sees the groups this test creates with their type,
state and readiness, reads their owners from an ownership map kept in an Airflow Variable (created through the
REST API, as an admin would), filters them by team on the server, sees the page dark when the UI is dark, and
follows a group's link to its DAG runs; a browser that is not signed in, and a viewer (who may not read the
connection the page reads the cluster with), are refused.
"""

from __future__ import annotations

import json
import re

import requests
from playwright.sync_api import expect

from kip848_harness.clients import consume, create_topics, produce
from tests.deploy.browser import UI_TIMEOUT_MS, shot, signed_in
from tests.deploy.deployment import Deployment

TOPIC = "deploy-fleet-orders"
CLASSIC = "deploy-fleet-billing-app"
CONSUMER = "deploy-fleet-payments-app"
#: the ownership map of this test's groups, in its own Variable (the fleet DAG's default one stays untouched)
OWNERS_VARIABLE = "kip848_deploy_fleet_owners"
OWNERS = {"rules": [{"prefix": "deploy-fleet-billing-", "app": "billing", "team": "finance"},
                    {"prefix": "deploy-fleet-payments-", "app": "payments", "team": "payments-team"}]}


def test_fleet_view_in_the_ui(deployment: Deployment, browser, screenshots):
    create_topics(deployment.bootstrap, {TOPIC: 2})
    produce(deployment.bootstrap, TOPIC, (f"v{i}" for i in range(20)))
    consume(deployment.bootstrap, CLASSIC, [TOPIC], 20, group_protocol="classic")
    consume(deployment.bootstrap, CONSUMER, [TOPIC], 10, group_protocol="consumer")

    deployment.api("alice", "POST", "/variables", json={"key": OWNERS_VARIABLE, "value": json.dumps(OWNERS),
                                                        "description": "the fleet view test's owners"}
                   ).raise_for_status()

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

        # the owners, from the ownership map's Variable: application and team columns, then a team filter
        # applied on the server (the other team's group is not in the page at all)
        fleet.locator("#ownership-variable").fill(OWNERS_VARIABLE)
        fleet.get_by_role("button", name="Read the cluster").click()
        expect(classic_row.locator("td.owner-app")).to_have_text("billing")
        expect(classic_row.locator("td.owner-team")).to_have_text("finance")
        expect(consumer_row.locator("td.owner-team")).to_have_text("payments-team")
        fleet.locator("#filter-team").select_option("finance")
        fleet.locator("#apply-filters").click()
        expect(consumer_row).to_have_count(0)
        expect(classic_row).to_be_visible()
        expect(fleet.locator("#filter-team")).to_have_value("finance")  # the filter stays in the page
        fleet.locator("#filter").fill("deploy-fleet")
        shot(page, screenshots, "fleet_view_owners")
        # a team no group has: an empty table that says so, never every group
        fleet.locator("#filter-app").select_option("payments")
        fleet.locator("#apply-filters").click()
        expect(fleet.locator("#filter-note")).to_contain_text("No group matches all of these filters together")
        expect(fleet.locator("tr.group")).to_have_count(0)

        # dark mode follows the UI's theme: the user's choice as the UI keeps it (localStorage "theme"), the UI
        # reloaded dark, the page in its frame dark with it (not a white page in a dark UI)
        page.evaluate("window.localStorage.setItem('theme', 'dark')")
        page.reload()
        expect(page.locator("html")).to_have_class(re.compile(r"\bdark\b"))
        fleet.locator("#ownership-variable").fill(OWNERS_VARIABLE)
        fleet.get_by_role("button", name="Read the cluster").click()
        expect(classic_row.locator("td.owner-app")).to_have_text("billing")
        expect(fleet.locator("html")).to_have_class(re.compile(r"\bdark\b"))
        background = fleet.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
        assert background == "rgb(17, 24, 39)", background  # base.html's dark background, not white
        fleet.locator("#filter").fill("deploy-fleet")
        shot(page, screenshots, "fleet_view_owners_dark")

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

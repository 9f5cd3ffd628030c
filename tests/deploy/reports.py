"""A run's report in the deployment's web UI (plugins/reports.py), checked on a run another test of the tier made.

:func:`check_report_in_ui` is called by the test whose run it reads (the fleet migration of test_fleet_run.py:
the fleet report with its charts and the waves' validation pages), so the tier makes no run of its own for it:
the report task's "Report" extra link, the navigation's "Kafka change reports" list and the run's page in the
UI's frame, its charts loaded, the page following Airflow's theme (light, then dark chosen in the user menu as a
user does), the screenshots for the docs; and, with the REST API's token, 401 without one, a viewer reading it,
the validation pages sandboxed and a path that is not a file name of the run refused.
"""

from __future__ import annotations

import re

import requests
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, expect

from airflow_provider_kip848.changecontrol.run_artifacts import report_page_path
from tests.deploy.browser import shot, signed_in
from tests.deploy.deployment import Deployment, wait_for

TITLE = "Kafka change reports"


def _charts_loaded(frame) -> bool:
    """Every image of the report in the UI's frame loaded (an image that failed has no natural width); False while
    the frame is still navigating to the report."""
    try:
        return _images_loaded(frame)
    except PlaywrightError:
        return False


def _images_loaded(frame) -> bool:
    return frame.locator("#report").evaluate(
        "r => { const imgs = [...r.querySelectorAll('img')];"
        " return imgs.length > 0 && imgs.every(i => i.complete && i.naturalWidth > 0); }")


def choose_theme(page: Page, label: str) -> None:
    """The user menu > Appearance > ``label`` ("Dark Mode", "Light Mode"), as a user switches Airflow's theme."""
    page.get_by_role("button", name="User").click()
    page.get_by_role("menuitem", name="Appearance").click()
    page.get_by_role("menuitemradio", name=label).click()
    page.keyboard.press("Escape")


def check_report_in_ui(deployment: Deployment, browser, screenshots, dag_id: str, run_id: str) -> None:
    base, path = deployment.base_url, report_page_path(dag_id, run_id)

    # the API: behind Airflow's sign-in; a viewer (who may read the DAG's runs) reads it
    assert requests.get(f"{base}{path}", timeout=30).status_code == 401
    viewer = deployment.session("victor")
    page_html = viewer.get(f"{base}{path}", timeout=60)
    assert page_html.status_code == 200, page_html.text
    assert 'id="report"' in page_html.text and 'data-file="report.json"' in page_html.text
    for task_id in re.findall(r'class="validation" data-task="([^"]+)"', page_html.text):  # the waves' validations
        validation = viewer.get(f"{base}{path}/validation/{task_id}", timeout=60)
        assert validation.status_code == 200, validation.text
        assert "sandbox" in validation.headers["content-security-policy"]
    for name in ("%2E%2E", ".env", "..%5Creport.json"):
        assert viewer.get(f"{base}{path}/files/{name}", timeout=30).status_code == 400, name
    assert viewer.get(f"{base}{path}/files/..%2F..%2Fsnapshots%2Fbefore.json", timeout=30).status_code in (400, 404)

    quoted = requests.utils.quote(run_id, safe="")

    with signed_in(browser, deployment, "alice") as page:
        # Browse > Kafka change reports: the run in the list, its report in the UI's frame
        page.get_by_role("button", name="Browse").click()
        page.get_by_role("menuitem", name=TITLE).click()
        page.wait_for_url(f"{base}/plugin/kip848-reports**")
        frame = page.frame_locator(f"iframe[title='{TITLE}']")
        row = frame.locator(f"tr.run[data-run-id='{run_id}']")
        expect(row).to_contain_text("report")
        row.locator("a.report-link").click()
        expect(frame.locator("#report h1").first).to_be_visible()
        expect(frame.locator("#run-id")).to_have_text(run_id)
        wait_for(lambda: _charts_loaded(frame), 60, "the report's charts loaded in the UI's frame",
                 alive=deployment.check)
        expect(frame.locator("html")).to_have_class(re.compile(r"\blight\b"))
        shot(page, screenshots, "report_page_light")

        # Airflow's theme set to dark in the user menu: the page in the frame follows it at once
        choose_theme(page, "Dark Mode")
        expect(page.locator("html")).to_have_class(re.compile(r"\bdark\b"))
        expect(frame.locator("html")).to_have_class(re.compile(r"\bdark\b"))
        assert frame.locator("body").evaluate("b => getComputedStyle(b).backgroundColor") != "rgb(255, 255, 255)"
        shot(page, screenshots, "report_page_dark")

        # the report task's extra link as the REST API gives it to the UI (the DAG declares it, the worker stored it)
        ti_path = f"/dags/{dag_id}/dagRuns/{quoted}/taskInstances/report"
        links = deployment.api("alice", "GET", f"{ti_path}/links").json()
        keys = [x["key"] for x in deployment.api("alice", "GET", f"{ti_path}/xcomEntries").json().get("xcom_entries", [])]
        assert links.get("extra_links") == {"Report": path}, (links, keys)
        # the task instance's extra link (on its Details tab) opens the page itself (same origin: in the UI's tab),
        # dark from the stored choice
        page.goto(f"{base}/dags/{dag_id}/runs/{quoted}/tasks/report/details")
        link = page.get_by_role("link", name="Report", exact=True)
        expect(link).to_have_attribute("href", path)
        link.click()
        page.wait_for_url(f"{base}{path}")
        expect(page.locator("#report img").first).to_be_visible()
        expect(page.locator("html")).to_have_class(re.compile(r"\bdark\b"))

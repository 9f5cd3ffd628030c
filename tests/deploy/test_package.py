"""What the wheel carries and what the Providers page links to: the wheel the tier built and installed (the one
docs/deploy.md builds) has the LICENSE and the project URLs, and the Providers page's link opens the provider's
documentation, served by the deployment's own API server (plugins/docs.py)."""

from __future__ import annotations

import zipfile
from email.parser import Parser

import pytest
import requests
from playwright.sync_api import expect

from tests.deploy.browser import signed_in
from tests.deploy.deployment import Deployment

PACKAGE = "airflow-provider-kip848"
DOCS = "kip848-docs/index.md"


def test_the_wheel_carries_the_license_and_the_project_urls(deployment: Deployment):
    if deployment.wheel is None:
        pytest.skip("KIP848_DEPLOY_VENV: a reused venv, no wheel built in this session")
    with zipfile.ZipFile(deployment.wheel) as wheel:
        names = wheel.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(wheel.read(info).decode())
        license_file = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        text = " ".join(wheel.read(license_file).decode().split())
        assert text.startswith("Apache License Version 2.0, January 2004") and "END OF TERMS AND CONDITIONS" in text
        assert "airflow_provider_kip848/_docs/deploy.md" in names  # the pages the API server serves
    assert metadata["License-Expression"] == "Apache-2.0" and metadata["License-File"] == "LICENSE"
    assert sorted(metadata.get_all("Project-URL")) == [f"Documentation, {DOCS}", f"Homepage, {DOCS}"]


def test_the_providers_page_links_to_documentation_that_opens(deployment: Deployment, browser):
    providers = deployment.api("alice", "GET", "/providers", params={"limit": 100}).json()["providers"]
    ours = next(p for p in providers if p["package_name"] == PACKAGE)
    assert ours["documentation_url"] == DOCS
    with signed_in(browser, deployment, "victor") as page:  # any signed-in user: a viewer
        page.goto(f"{deployment.base_url}/providers")
        with page.expect_popup() as opened:
            page.get_by_role("link", name=PACKAGE).click()
        docs = opened.value
        expect(docs.get_by_role("heading", name=PACKAGE, exact=True)).to_be_visible()
        assert docs.url == f"{deployment.base_url}/{DOCS}"
        docs.get_by_role("link", name="deploy.md").first.click()
        expect(docs.get_by_role("heading", name="Deploying the provider")).to_be_visible()
    image = requests.get(f"{deployment.base_url}/kip848-docs/screenshots/trigger_form.png", timeout=30)
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert requests.get(f"{deployment.base_url}/kip848-docs/no-such-page.md", timeout=30).status_code == 404

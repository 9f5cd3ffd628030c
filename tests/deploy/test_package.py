"""What the wheel carries and what the Providers page links to: the wheel the tier built and installed (the one
docs/deploy.md builds) has the LICENSE and the project URLs, every module of the provider's package and nothing of
its test harness (harness/, a distribution of its own), and the Providers page's link opens the provider's
documentation, served by the deployment's own API server (plugins/docs.py)."""

from __future__ import annotations

import configparser
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from tests.deploy.browser import signed_in
from tests.deploy.deployment import Deployment

PACKAGE = "airflow-provider-kip848"
DOCS = "kip848-docs/index.md"
REPO = Path(__file__).resolve().parents[2]
#: the controller kinds the provider ships (the local-* kinds are the harness's)
SHIPPED_KINDS = {"command": "airflow_provider_kip848.controllers.command:CommandController",
                 "kubernetes": "airflow_provider_kip848.controllers.kubernetes:KubernetesController"}


def harness_in_wheel(wheel_path: Path) -> list[str]:
    """What of the test harness the wheel at ``wheel_path`` carries: its modules (the package kip848_harness, or the
    old airflow_provider_kip848/testing/), the kip848-local console script, an entry point naming a harness module,
    a local-* controller kind. Empty: none."""
    with zipfile.ZipFile(wheel_path) as wheel:
        names = wheel.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.read_string(wheel.read(entry_points).decode())
    found = [n for n in names if n.startswith(("kip848_harness/", "airflow_provider_kip848/testing/"))]
    for section in parser.sections():
        for name, target in parser[section].items():
            if name == "kip848-local" or name.startswith("local-") or "kip848_harness" in target or ".testing" in target:
                found.append(f"[{section}] {name} = {target}")
    return found


def test_the_wheel_carries_the_provider_and_not_its_test_harness(deployment: Deployment):
    """The production install carries no embedded broker, demo apps, Spark-cluster launcher or local controllers,
    and no console script: they are the harness's (harness/pyproject.toml); every module of the package is in."""
    if deployment.wheel is None:
        pytest.skip("KIP848_DEPLOY_VENV: a reused venv, no wheel built in this session")
    assert harness_in_wheel(deployment.wheel) == []
    with zipfile.ZipFile(deployment.wheel) as wheel:
        names = set(wheel.namelist())
        entry_points = wheel.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.read_string(entry_points)
    assert "console_scripts" not in parser.sections()
    assert dict(parser["airflow_provider_kip848.controllers"]) == SHIPPED_KINDS
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "airflow_provider_kip848").rglob("*.py")}
    assert modules and not modules - names, sorted(modules - names)
    assert {"airflow_provider_kip848/plugins/templates/base.html", "airflow_provider_kip848/_docs/index.md"} <= names


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
    viewer = deployment.session("victor")  # the pages ask for Airflow's sign-in, as the reports pages do
    image = viewer.get(f"{deployment.base_url}/kip848-docs/screenshots/trigger_form.png", timeout=30)
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert viewer.get(f"{deployment.base_url}/kip848-docs/no-such-page.md", timeout=30).status_code == 404
    for page in (DOCS, "kip848-docs/screenshots/trigger_form.png", "kip848-reports/"):
        assert requests.get(f"{deployment.base_url}/{page}", timeout=30).status_code == 401, page

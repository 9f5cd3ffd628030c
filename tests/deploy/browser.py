"""Playwright driving Debian's Chromium against the deployment's web UI, as a data engineer clicks it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.deploy.deployment import Deployment

CHROMIUM = "/usr/bin/chromium"
# Chromium as root, headless, with no calls home (this machine's network is closed: see scripts/system-deps.sh)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
UI_TIMEOUT_MS = 60_000
# expect() assertions wait as long as actions do (Playwright's default is 5 s, which a page of a deployment that shares
# a busy machine with the rest of the suite can take to render): each still ends as soon as its condition holds
expect.set_options(timeout=UI_TIMEOUT_MS)


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def signed_in(browser: Browser, dep: Deployment, user: str) -> Iterator[Page]:
    """A fresh browser context (its own cookies) signed in through the login form."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    try:
        page.goto(f"{dep.base_url}/")
        page.get_by_label("Username").fill(user)
        page.get_by_label("Password").fill(dep.passwords[user])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{dep.base_url}/")
        yield page
    finally:
        context.close()


def open_trigger_form(page: Page, dep: Deployment, dag_id: str) -> None:
    page.goto(f"{dep.base_url}/dags/{dag_id}")
    page.get_by_test_id("trigger-dag-button").click()
    expect(page.get_by_text(f"Trigger Dag - {dag_id}")).to_be_visible()


def fill_param(page: Page, name: str, value: str) -> None:
    page.locator(f"#element_{name}").fill(value)


def submit_trigger_form(page: Page) -> None:
    submit = page.get_by_test_id("trigger-dag-submit")
    expect(submit).to_be_enabled()
    submit.click()


def shot(page: Page, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path

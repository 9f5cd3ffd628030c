"""The documentation the API server serves (plugins/docs.py), which the Providers page links to: the pages render,
their links and images resolve, nothing outside the documentation folder is served, and nothing without Airflow's
sign-in. With a real session: tests/integration/test_reports_page.py; in a real deployment, from the wheel:
tests/deploy/test_package.py."""

from __future__ import annotations

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from airflow_provider_kip848.plugins.auth import signed_in_user
from airflow_provider_kip848.plugins.docs import URL_PREFIX, app, docs_root, render_markdown, resolve_page
from tests.conftest import REPO


def test_the_pages_resolve_and_nothing_outside_them_is_served():
    """Which file a path names (the routes, behind Airflow's sign-in, serve it: tests/integration/
    test_reports_page.py asks with and without a session)."""
    root = docs_root()
    assert root == REPO / "docs"  # a checkout serves its own docs/ (the wheel carries them as _docs)
    assert resolve_page(root, "index.md") == root / "index.md"
    assert resolve_page(root, "runbooks/kip1071_streams_offline_migration.md").is_file()
    assert resolve_page(root, "screenshots/trigger_form.png").suffix == ".png"
    for outside in ("../pyproject.toml", "..%2Fpyproject.toml", "screenshots/capture.py", "nothing.md",
                    "/etc/passwd", "%2Fetc%2Fpasswd"):
        with pytest.raises(HTTPException) as refused:
            resolve_page(root, outside)
        assert refused.value.status_code == 404, outside
    index = render_markdown((root / "index.md").read_text(), "index.md")
    assert "<h1>airflow-provider-kip848</h1>" in index
    assert '<a href="deploy.md#8-artifacts-and-the-audit-log">deploy.md</a>' in index  # relative links as in the repo
    assert "<table>" in render_markdown((root / "deploy.md").read_text(), "deploy.md")


def test_no_route_answers_without_a_session():
    """Every route depends on Airflow's sign-in (the reports pages' own check): without a token or the UI's
    cookie the answer is 401, never a page."""
    client = TestClient(app)
    assert [d.dependency for d in app.router.dependencies] == [signed_in_user]
    for path in (URL_PREFIX + "/", "/", "/index.md", "/screenshots/trigger_form.png", "/nothing.md"):
        answer = client.get(path, follow_redirects=False)
        assert answer.status_code == 401 and "airflow-provider-kip848" not in answer.text, path


def test_raw_html_in_a_page_is_shown_as_text():
    assert "<script>" not in render_markdown("<script>alert(1)</script>\n\ntext", "t")

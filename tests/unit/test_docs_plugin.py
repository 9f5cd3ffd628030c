"""The documentation the API server serves (plugins/docs.py), which the Providers page links to: the pages render,
their links and images resolve, and nothing outside the documentation folder is served. In a real deployment, from
the wheel: tests/deploy/test_package.py."""

from __future__ import annotations

from fastapi.testclient import TestClient

from airflow_provider_kip848.plugins.docs import URL_PREFIX, app, docs_root, render_markdown
from tests.conftest import REPO


def test_the_pages_render_and_nothing_outside_them_is_served():
    assert docs_root() == REPO / "docs"  # a checkout serves its own docs/ (the wheel carries them as _docs)
    client = TestClient(app)
    assert client.get("/", follow_redirects=False).headers["location"] == f"{URL_PREFIX}/index.md"
    index = client.get("/index.md")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert "<h1>airflow-provider-kip848</h1>" in index.text
    assert '<a href="deploy.md#8-artifacts-and-the-audit-log">deploy.md</a>' in index.text  # relative links work as in the repo
    assert "<table>" in client.get("/deploy.md").text
    runbook = client.get("/runbooks/kip1071_streams_offline_migration.md")
    assert runbook.status_code == 200
    image = client.get("/screenshots/trigger_form.png")
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    for outside in ("/../pyproject.toml", "/..%2Fpyproject.toml", "/screenshots/capture.py", "/nothing.md",
                    "/%2Fetc%2Fpasswd"):
        assert client.get(outside).status_code == 404, outside


def test_raw_html_in_a_page_is_shown_as_text():
    assert "<script>" not in render_markdown("<script>alert(1)</script>\n\ntext", "t")

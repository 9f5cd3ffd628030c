"""The plugin pages' frame (plugins/templates/base.html through plugins/pages.py): escaping, theme, refresh."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from jinja2 import UndefinedError

from airflow_provider_kip848.plugins import pages

ROOT = Path(__file__).resolve().parents[2]


def _page(body: str, **context: object) -> str:
    template = pages.environment.from_string(
        '{% extends "base.html" %}{% block title %}T {{ name }}{% endblock %}{% block content %}' + body
        + "{% endblock %}")
    return template.render(refresh_seconds=context.pop("refresh_seconds", None), **context)


def test_values_are_text_not_markup():
    page = _page("<p id='v'>{{ name }}</p>", name="<script>alert(1)</script>")
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>T &lt;script&gt;" in page


def test_a_name_the_page_did_not_pass_is_an_error():
    with pytest.raises(UndefinedError):
        _page("{{ missing }}", name="x")


def test_refresh_only_when_asked():
    assert "http-equiv=\"refresh\"" not in _page("", name="x")
    assert "refreshing every" not in _page("", name="x")
    page = _page("", name="x", refresh_seconds=15)
    assert '<meta http-equiv="refresh" content="15">' in page
    assert "refreshing every 15 s" in page


@pytest.mark.parametrize("bad", [0, -5, True])
def test_render_refuses_a_refresh_that_is_not_seconds(bad):
    with pytest.raises(ValueError, match="refresh_seconds"):
        pages.render("base.html", refresh_seconds=bad)


def test_theme_follows_airflow_and_no_external_asset():
    page = pages.render("base.html")
    # the parent's <html> class (next-themes, attribute "class"), then localStorage "theme", then the system
    assert "window.parent.document.documentElement" in page
    assert "localStorage.getItem('theme')" in page
    assert "prefers-color-scheme: dark" in page
    assert "MutationObserver" in page and "'storage'" in page
    assert "html.dark{" in page and "--bg:" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "no external asset"


def test_templates_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "templates/*.html" in data["airflow_provider_kip848.plugins"]
    assert (ROOT / "airflow_provider_kip848/plugins/templates/base.html").is_file()

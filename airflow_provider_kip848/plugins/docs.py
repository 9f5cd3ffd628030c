"""The provider's documentation, served by every Airflow API server it is installed in.

The package has no public home yet, so the link of the Providers page (Airflow takes it from the package's
``Documentation`` project URL) cannot point to a web site: it points here, relative to the UI
(``kip848-docs/index.md``), and the pages are the repository's ``docs/`` as the wheel carries them (setup.py
copies them into the package at build time; a checkout serves its own ``docs/``). A page that is not there is a
404, never another page.

* ``GET /kip848-docs/<page>.md``: the Markdown page rendered to HTML (CommonMark and tables, no raw HTML passed
  through), its relative links (``deploy.md``, ``runbooks/...``, ``screenshots/...png``) working as they do in
  the repository;
* ``GET /kip848-docs/<path>.png``: an image of the pages.

Every route asks for Airflow's sign-in, as the plugin's other pages do (:func:`.auth.signed_in_user`: the UI's
session cookie or a bearer token; 401 without one): the pages say which Params, connections and controllers a
deployment of the provider has, which is nobody's business outside it. Any signed-in user may read them (no DAG
is read).
"""

from __future__ import annotations

import html
from pathlib import Path

from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException, status
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from markdown_it import MarkdownIt

from airflow_provider_kip848.plugins.auth import signed_in_user

#: where the API server mounts the app; the Providers page's link is relative to the UI (see pyproject / setup.py)
URL_PREFIX = "/kip848-docs"
#: the page the package's Homepage and Documentation project URLs open
INDEX = "index.md"
#: the folder of the package the wheel's build copies ``docs/`` into (setup.py)
BUNDLED = "_docs"
_MEDIA = {".png": "image/png", ".svg": "image/svg+xml"}
_STYLE = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.5}"
          "table{border-collapse:collapse}td,th{border:1px solid #999;padding:.2rem .5rem;vertical-align:top}"
          "pre{background:#f4f4f4;padding:.6rem;overflow:auto}code{background:#f4f4f4}img{max-width:100%}"
          "@media (prefers-color-scheme: dark){body{background:#111;color:#ddd}a{color:#8ab4f8}"
          "pre,code{background:#222}}")


def docs_root() -> Path | None:
    """The documentation folder: the one the wheel carries, else the checkout's ``docs/`` (an editable install);
    None when neither is there."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / BUNDLED, package.parent / "docs"):
        if (candidate / INDEX).is_file():
            return candidate
    return None


def resolve_page(root: Path, page: str) -> Path:
    """The file ``page`` names inside ``root`` (a .md page or an image), or a 404: never a file outside it."""
    target = (root / page).resolve()
    if not target.is_relative_to(root.resolve()) or not target.is_file() or (
            target.suffix != ".md" and target.suffix not in _MEDIA):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"No documentation page {page!r}.")
    return target


def render_markdown(text: str, title: str) -> str:
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>{body}</body></html>")


app = FastAPI(title="airflow-provider-kip848 documentation", docs_url=None, redoc_url=None, openapi_url=None,
              dependencies=[Depends(signed_in_user)])


@app.get("/")
def index() -> RedirectResponse:
    return RedirectResponse(f"{URL_PREFIX}/{INDEX}")


@app.get("/{page:path}")
def page(page: str) -> Response:
    root = docs_root()
    if root is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "This installation carries no documentation.")
    target = resolve_page(root, page)
    if target.suffix == ".md":
        return HTMLResponse(render_markdown(target.read_text(encoding="utf-8"), f"{page} - airflow-provider-kip848"))
    return FileResponse(target, media_type=_MEDIA[target.suffix])


class DocsPlugin(AirflowPlugin):
    """The documentation under ``/kip848-docs`` (the Providers page's link)."""

    name = "kip848_docs"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "airflow-provider-kip848 documentation"}]


__all__ = ["INDEX", "URL_PREFIX", "DocsPlugin", "app", "docs_root", "render_markdown", "resolve_page"]

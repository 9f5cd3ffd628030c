"""The plugin pages' templates: one Jinja2 environment and a render helper.

Every HTML page of the provider's plugins is a template under ``plugins/templates/`` extending
``base.html`` (the shared frame: CSS variables for light and dark, the script that follows Airflow's
theme from inside the UI's frame, the optional auto-refresh). Templates rather than f-strings: the
pages show group ids, broker messages and report text, and with autoescape on every value is text
unless a template says otherwise, so one forgotten ``html.escape`` cannot turn a group id into markup. Escaping
leaves a character that acts without printing (a direction override, a zero-width space, a line break): every
value a template prints is first made :func:`~airflow_provider_kip848.kafka.inert.visible` (``finalize``), so a
name shows each of its characters and reorders nothing around it.

Jinja2 comes with Airflow (the API server depends on it); the templates are package data of the wheel
(pyproject.toml ``[tool.setuptools.package-data]``) and are found through the package, not a path.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from airflow_provider_kip848.kafka.inert import visible

#: the package and folder the templates are loaded from
TEMPLATE_PACKAGE, TEMPLATE_FOLDER = "airflow_provider_kip848.plugins", "templates"



def shown(value: object) -> object:
    """What a template prints of ``value``: text made visible (then autoescaped); markup a page built on purpose
    (``Markup``: the report's HTML from markdown-it) and other values as they are."""
    return visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


#: autoescape for every template (not only ``*.html``): a value is text unless marked safe on purpose;
#: finalize: every printed text :func:`shown`;
#: StrictUndefined: a name the page did not pass is an error, never an empty cell
environment = Environment(
    loader=PackageLoader(TEMPLATE_PACKAGE, TEMPLATE_FOLDER),
    autoescape=True,
    finalize=shown,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(template: str, /, *, refresh_seconds: int | None = None,
           **context: Any) -> str:  # Any: the template's values, any Jinja2 accepts
    """``template`` (a file under ``plugins/templates/``, extending ``base.html``) rendered with ``context``.

    ``refresh_seconds``: the page reloads itself every N seconds and shows "refreshing every N s"; pass it
    only while what the page shows is still changing (a run that is running), None otherwise.
    """
    if refresh_seconds is not None and (isinstance(refresh_seconds, bool) or refresh_seconds < 1):
        raise ValueError(f"refresh_seconds must be a whole number of seconds >= 1 or None, not {refresh_seconds!r}")
    return environment.get_template(template).render(refresh_seconds=refresh_seconds, **context)


__all__ = ["TEMPLATE_FOLDER", "TEMPLATE_PACKAGE", "environment", "render", "shown"]

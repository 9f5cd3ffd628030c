"""Per-run artifact paths, without Airflow: ``<root>/<dag_id>/<run_id>/<kind>``.

Kept apart from :mod:`artifacts` (which reads connections through Airflow) so
that tools reading a finished run's artifacts (the demo, the test harness)
compute the same folder without importing Airflow before they configure it.
"""

from __future__ import annotations

import re

#: The environment variable naming the deployment's artifact location.
ARTIFACTS_ENV = "KIP848_ARTIFACTS_URL"
#: The connection extra naming a cluster's artifact location.
ARTIFACTS_EXTRA = "artifacts_url"


def given(value: object) -> str | None:
    """A Param or extra that is set (a rendered template gives ``"None"`` for an unset one)."""
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "None") else text


def safe_part(text: str) -> str:
    """A path segment from a DAG or run id (``manual__2026-11-24T12:00:00+00:00`` keeps its meaning)."""
    return re.sub(r"[^A-Za-z0-9._=-]", "_", text)


def run_location(root: str, dag_id: str, run_id: str, kind: str) -> str:
    """``<root>/<dag_id>/<run_id>/<kind>``: one folder per run, never another run's."""
    return "/".join([root.rstrip("/"), safe_part(dag_id), safe_part(run_id), kind])

"""Running the example DAGs end to end (see airflow_provider_kip848.testing.dagrun)."""

from __future__ import annotations

from typing import Any

from airflow_provider_kip848.testing import dagrun
from tests.conftest import REPO


def load_dag(module: str):
    return dagrun.load_dag(module, REPO / "dags")


def run_dag(module: str, conf: dict[str, Any], **kwargs):
    return dagrun.run_dag(module, conf, dags_folder=REPO / "dags", **kwargs)


state = dagrun.run_state


def approve(detail: dict) -> str:
    return "Approve"


def reject(detail: dict) -> str:
    return "Reject"

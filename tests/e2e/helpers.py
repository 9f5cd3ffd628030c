"""Running the example DAGs end to end: dag.test() in the main thread, approvals answered over REST."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_kip848.local.hitl import AutoResponder, prepare_in_main_thread
from tests.conftest import REPO


def load_dag(module: str):
    sys.path.insert(0, str(REPO / "dags"))
    try:
        sys.modules.pop(module, None)
        mod = __import__(module)
    finally:
        sys.path.pop(0)
    dag_id = getattr(mod, "DAG_ID")
    from airflow.sdk import DAG

    return next(v for v in vars(mod).values() if isinstance(v, DAG) and v.dag_id == dag_id) \
        if any(isinstance(v, DAG) for v in vars(mod).values()) else _dag_from_factory(mod, dag_id)


def _dag_from_factory(mod, dag_id: str):
    from airflow.sdk.definitions._internal.contextmanager import DagContext  # noqa: F401

    for value in vars(mod).values():
        if callable(value) and getattr(value, "__name__", "") == dag_id:
            return value()
    raise LookupError(dag_id)


def run_dag(module: str, conf: dict[str, Any], *, decide: Callable[[dict], str | None] | None = None,
            before_answer: Callable[[dict], None] | None = None, token: str | None = None):
    """Run the DAG; answer its approvals with ``decide(detail)``. Returns (dag_run, answers, report or None)."""
    prepare_in_main_thread()
    dag = load_dag(module)
    responder = None
    if decide is not None:
        responder = AutoResponder(dag.dag_id, decide, token=token, before_answer=before_answer)
        responder.start()
    try:
        run = dag.test(run_conf=conf, use_executor=False)
    finally:
        if responder:
            responder.stop()
    if responder and responder.errors:
        raise responder.errors[0]
    report = None
    if conf.get("report_dir") and (Path(conf["report_dir"]) / "report.json").is_file():
        report = json.loads((Path(conf["report_dir"]) / "report.json").read_text())
    return run, (responder.answered if responder else []), report


def state(run) -> str:
    return str(run.state).rsplit(".", 1)[-1].lower()


def approve(detail: dict) -> str:
    return "Approve"


def reject(detail: dict) -> str:
    return "Reject"

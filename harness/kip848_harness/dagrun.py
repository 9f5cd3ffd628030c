"""Run an example DAG with ``dag.test()`` and answer its approvals over REST (demo and end-to-end tests).

``dag.test()`` must run in the main thread; the answers come from a helper
thread through Airflow's core API, as a person's clicks in the UI would.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_kip848.changecontrol.runpaths import ARTIFACTS_ENV, given, run_location
from kip848_harness.hitl import AutoResponder, prepare_in_main_thread  # noqa: PLC0415 - Airflow reads its config at first import


def load_dag(module: str, dags_folder: str | Path):
    """The DAG object defined by ``dags_folder/module.py`` (its ``DAG_ID``)."""
    sys.path.insert(0, str(dags_folder))
    try:
        sys.modules.pop(module, None)
        mod = __import__(module)
    finally:
        sys.path.pop(0)
    dag_id = mod.DAG_ID
    from airflow.sdk import DAG  # noqa: PLC0415 - Airflow reads its config at first import

    for value in vars(mod).values():
        if isinstance(value, DAG) and value.dag_id == dag_id:
            return value
    factory = getattr(mod, dag_id)
    dag = factory()
    # built here, so its file would read as this module's: a worker that parses the DAG again (an executor's task
    # process) must find it in its own file
    dag.fileloc = str(Path(str(mod.__file__)).resolve())
    return dag


def run_dag(module: str, conf: dict[str, Any], *, dags_folder: str | Path,
            decide: Callable[[dict], str | None] | None = None,
            before_answer: Callable[[dict], None] | None = None, token: str | None = None,
            responder: Any = None, triggered_by: str | None = None):
    """Run the DAG; answer approvals with ``decide(detail)`` (or a started ``responder`` thread with
    ``stop()``, ``errors`` and ``answered``). Returns (dag_run, answers, report or None).

    ``triggered_by``: record the run as triggered by this user, as Airflow's REST trigger endpoint
    does (``dag.test()`` itself records the user ``dag_test``).
    """
    prepare_in_main_thread()
    dag = load_dag(module, dags_folder)
    if decide is not None and responder is None:
        responder = AutoResponder(dag.dag_id, decide, token=token, before_answer=before_answer)
        responder.start()
    try:
        with _sync_only_the_file_of(dag.fileloc), \
                (_triggered_by(triggered_by) if triggered_by else contextlib.nullcontext()):
            run = dag.test(run_conf=conf, use_executor=False)
    finally:
        if responder:
            responder.stop()
    if responder and responder.errors:
        raise responder.errors[0]
    report = None
    # The harness's connections carry no artifacts_url: the deployment's variable (a run never names a location).
    root = given(os.environ.get(ARTIFACTS_ENV))
    if root and "://" not in root:
        path = Path(run_location(root, dag.dag_id, run.run_id, "report")) / "report.json"
        if path.is_file():
            report = json.loads(path.read_text())
    return run, (responder.answered if responder else []), report


class _sync_only_the_file_of:
    """Inside it, the DAG bag ``dag.test()`` builds before a run holds only the file that defines the DAG.

    Airflow 3.3's ``dag.test()`` parses every file of the DAG's bundle and serializes every DAG in it before each run
    (apache/airflow#64884: a DAG that a ``TriggerDagRunOperator`` targets is then current too). None of the example
    DAGs triggers another, and parsing and serializing the other seven DAGs of ``dags/`` cost two thirds of a
    ``dag.test()`` call's own CPU (py-spy, an end-to-end file of five runs). One file is what Airflow's DAG processor
    parses when a file changes; its DAG is serialized, versioned and run exactly as before. A file outside the bundle
    being synced keeps Airflow's walk of that bundle.
    """

    def __init__(self, fileloc: str) -> None:
        self.fileloc = Path(fileloc).resolve()

    def __enter__(self) -> None:
        import airflow.dag_processing.dagbag as dagbag_module  # noqa: PLC0415 - Airflow reads its config at first import

        self.module, self.original = dagbag_module, dagbag_module.BundleDagBag
        fileloc, original = self.fileloc, self.original

        class OneFileDagBag(original):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, dag_folder: Any = None, bundle_path: Any = None, **kwargs: Any) -> None:
                if bundle_path is not None and fileloc.is_relative_to(Path(bundle_path).resolve()):
                    dag_folder = fileloc
                super().__init__(*args, dag_folder=dag_folder, bundle_path=bundle_path, **kwargs)

        dagbag_module.BundleDagBag = OneFileDagBag  # type: ignore[misc]

    def __exit__(self, *exc: object) -> None:
        self.module.BundleDagBag = self.original  # type: ignore[misc]


class _triggered_by:
    """Make ``dag.test()`` create its run with ``triggering_user_name=user``."""

    def __init__(self, user: str) -> None:
        self.user = user

    def __enter__(self) -> None:
        import airflow.models.dagrun as dagrun_module  # noqa: PLC0415 - Airflow reads its config at first import

        self.module, self.original = dagrun_module, dagrun_module.get_or_create_dagrun
        user, original = self.user, self.original

        def create(**kwargs: Any):
            return original(**{**kwargs, "triggering_user_name": user,
                               "triggered_by": kwargs["triggered_by"].__class__.REST_API})

        dagrun_module.get_or_create_dagrun = create

    def __exit__(self, *exc: object) -> None:
        self.module.get_or_create_dagrun = self.original


def run_state(run) -> str:
    return str(run.state).rsplit(".", 1)[-1].lower()

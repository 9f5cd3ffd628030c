"""The deploy tier: one real Airflow deployment (see deployment.py) shared by every test of the tier."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import say
from tests.deploy.browser import chromium
from tests.deploy.deployment import Deployment

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
CONN_ID = "kafka_admin_default"


# Package scope: the deployment (a dozen processes) and the browser stop when the worker that runs the tier moves on to
# other tests, and the browser's event loop (Playwright's sync API runs one in this thread) with them: a later test's
# asyncio.run() in this thread would fail while it runs.
@pytest.fixture(scope="package")
def deployment(tmp_path_factory: pytest.TempPathFactory, kafka, pytestconfig, controllers) -> Iterator[Deployment]:
    # controllers: the registry file its [kip848] controllers names exists from the start (empty), as a
    # deployment's would; a scheduled run that starts before any test registers a controller reads it
    started = time.monotonic()
    root = tmp_path_factory.mktemp("deployment")
    # KIP848_DEPLOY_VENV: reuse an installed venv (local iteration only: CI always builds and installs)
    reuse = os.environ.get("KIP848_DEPLOY_VENV")
    dep = Deployment(root=root, bootstrap=kafka.bootstrap_servers, artifacts=root / "artifacts",
                     venv_dir=Path(reuse) if reuse else None)
    try:
        if reuse:
            dep.timings["install"] = 0.0
        else:
            dep.install()
        dep.start()
        # the cluster's connection, with its change control: alice and bob approve each other's changes
        dep.api("alice", "POST", "/connections", json={
            # the Port as docs/deploy.md says to fill it: Airflow 3.3.2's Test button answers 400 for a connection
            # without one (apache/airflow#73298); the client ignores it when Bootstrap servers carry their ports
            "connection_id": CONN_ID, "conn_type": "kafka_admin", "host": dep.bootstrap,
            "port": int(dep.bootstrap.rsplit(":", 1)[1]),
            "extra": json.dumps({"approvers": "alice,bob", "four_eyes": "required"}),
        }).raise_for_status()
        dep.timings["ready"] = time.monotonic() - started
        say(pytestconfig, f"[deploy] Airflow deployment at {dep.base_url}: installed in "
                f"{dep.timings['install']:.0f} s, components up in {dep.timings['start']:.0f} s")
        yield dep
    finally:
        dep.stop()
        say(pytestconfig, f"[deploy] deploy tier wall time {time.monotonic() - started:.0f} s "
                "(install, start, tests, stop)")


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture(scope="package")
def browser():
    with chromium() as b:
        yield b

"""Answer Human-in-the-loop requests through Airflow's REST API, as a person in the UI would.

Used by ``make demo`` (approvals answered automatically) and the end-to-end
tests. It talks to the core API in-process (FastAPI's test client over
``create_app("core")``) with the same PATCH the "Required Actions" page
sends, so Airflow itself checks the option, the assigned users and resumes
the task.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any


def prepare_in_main_thread() -> None:
    """Import Airflow's models and map them before a helper thread touches the DB (import-lock deadlock)."""
    import sqlalchemy.orm  # noqa: PLC0415 - Airflow reads its config at first import
    from airflow.models import import_all_models  # noqa: PLC0415 - Airflow reads its config at first import

    import_all_models()
    sqlalchemy.orm.configure_mappers()


_APPS: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
_APPS_LOCK = threading.Lock()


def _app(kind: str) -> Any:
    """Airflow's FastAPI app ``kind`` ("core", "all"), made once per process and auth set-up.

    Making it costs about 3 CPU-seconds (it loads every provider's configuration and mounts every route),
    which each DAG run of the end-to-end tests paid again; the app holds no state of a run. A test that
    changes the auth manager's users or all-admins mode (``AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_*``) gets an
    app of its own set-up.
    """
    from airflow.api_fastapi.app import create_app  # noqa: PLC0415 - Airflow reads its config at first import

    auth = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER")))
    with _APPS_LOCK:
        if (kind, auth) not in _APPS:
            _APPS[(kind, auth)] = create_app(kind)
        return _APPS[(kind, auth)]


class HitlClient:
    """REST calls on the core API: list pending requests, answer one."""

    def __init__(self, token: str | None = None) -> None:
        from fastapi.testclient import TestClient  # noqa: PLC0415 - Airflow reads its config at first import

        self.client = TestClient(_app("core"))
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    @staticmethod
    def token_for(username: str, password: str) -> str:
        from fastapi.testclient import TestClient  # noqa: PLC0415 - Airflow reads its config at first import

        response = TestClient(_app("all")).post("/auth/token", json={"username": username, "password": password})
        response.raise_for_status()
        return response.json()["access_token"]

    def pending(self, dag_id: str | None = None) -> list[dict[str, Any]]:
        response = self.client.get(f"/api/v2/dags/{dag_id or '~'}/dagRuns/~/hitlDetails",
                                   params={"response_received": "false"}, headers=self.headers)
        response.raise_for_status()
        return response.json().get("hitl_details", [])

    def respond(self, detail: dict[str, Any], option: str, params_input: dict | None = None):
        ti = detail["task_instance"]
        url = (f"/api/v2/dags/{ti['dag_id']}/dagRuns/{ti['dag_run_id']}/taskInstances/{ti['task_id']}/"
               f"{ti.get('map_index', -1)}/hitlDetails")
        return self.client.patch(url, json={"chosen_options": [option], "params_input": params_input or {}},
                                 headers=self.headers)


#: the task states in which Airflow's PATCH of a HITL detail resumes the task (core API, hitl routes)
PARKED = ("awaiting_input", "deferred")


class AutoResponder(threading.Thread):
    """Answers every pending request of a DAG with ``decide(detail) -> option`` until stopped."""

    def __init__(self, dag_id: str, decide: Callable[[dict[str, Any]], str | None], *,
                 token: str | None = None, poll: float = 0.5, before_answer: Callable[[dict], None] | None = None):
        super().__init__(daemon=True)
        self.dag_id, self.decide, self.poll, self.before_answer = dag_id, decide, poll, before_answer
        self.token = token
        self.answered: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        try:
            client = HitlClient(self.token)
            while not self.stop_flag.is_set():
                for detail in client.pending(self.dag_id):
                    # Airflow resumes the task only if it is parked when the answer comes: an answer recorded
                    # while the task is still running (between writing its request and parking) is kept but
                    # never resumes it, and the run waits forever. Answer parked tasks only.
                    if (detail.get("task_instance") or {}).get("state") not in PARKED:
                        continue
                    option = self.decide(detail)
                    if option is None:
                        continue
                    if self.before_answer:
                        self.before_answer(detail)
                    response = client.respond(detail, option)
                    self.answered.append({"task_id": detail["task_instance"]["task_id"], "option": option,
                                          "status": response.status_code, "subject": detail.get("subject"),
                                          "body": detail.get("body")})
                time.sleep(self.poll)
        except BaseException as exc:  # noqa: BLE001 - reported to whoever started the thread
            self.errors.append(exc)

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)

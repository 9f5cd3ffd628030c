"""Airflow on this machine for the benches that run a DAG with ``dag.test(use_executor=True)``.

What bench/deferred_slots.py and bench/fleet_run.py share: the environment of
every Airflow-importing process (a temporary ``AIRFLOW_HOME`` with a SQLite
metadata DB, the ``kafka_admin_default`` connection as an ``AIRFLOW_CONN_*``
variable), the LocalExecutor settings (``slots`` worker processes whose task
processes talk to our own execution API server), and the two long-running
components a DAG run with deferrable tasks needs next to ``dag.test()``: an
``airflow api-server`` (``--apps execution``, or ``all`` for the public REST
API too, e.g. to answer Human-in-the-loop requests) and a real
``airflow triggerer``.

Each component is started in a session of its own, so :meth:`AirflowServices.stop`
ends it with everything it spawned (uvicorn workers, the triggerer's runner)
and nothing else: :func:`stop_session` signals only processes of that session.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

CONN_ID = "kafka_admin_default"
AIRFLOW = [sys.executable, "-m", "airflow"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def airflow_env(home: str, bootstrap: str, *, dags_folder: str | None = None, conn_id: str = CONN_ID,
                conn_extra: dict | None = None) -> dict[str, str]:
    """The environment every Airflow-importing process here runs with (as tests/conftest.py sets it)."""
    conn: dict = {"conn_type": "kafka_admin", "host": bootstrap}
    if conn_extra:
        conn["extra"] = conn_extra
    return {
        "AIRFLOW_HOME": home,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{Path(home) / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": dags_folder or str(Path(home) / "dags"),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(conn),
    }


def executor_env(port: int, slots: int, secret: str = "bench-airflow-local-not-a-secret") -> dict[str, str]:
    """LocalExecutor with ``slots`` worker processes, its tasks talking to our own execution API server."""
    return {
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(slots),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secret,
        "AIRFLOW__API__SECRET_KEY": secret,
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
    }


def db_migrate(env: dict[str, str] | None = None) -> None:
    """``airflow db migrate`` (a new SQLite metadata DB in ``AIRFLOW_HOME``)."""
    out = subprocess.run([*AIRFLOW, "db", "migrate"], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"airflow db migrate failed ({out.returncode}): {out.stderr[-2000:]}")


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (the session a process started with ``start_new_session`` leads)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            if os.getsid(pid) == sid:
                pids.append(pid)
        except OSError:
            continue
    return pids


def stop_session(proc: subprocess.Popen, timeout: float = 20.0) -> int:
    """SIGTERM the leader ``proc`` (started with ``start_new_session=True``), wait, then SIGKILL whatever of
    its session is left (children it spawned, also those that outlived it); returns how many that was."""
    sid = proc.pid
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    deadline = time.monotonic() + 5
    while session_pids(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = session_pids(sid)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(left)


class AirflowServices:
    """An ``airflow api-server`` (``apps``: ``execution``, or ``all`` for the public REST API too) on
    ``port`` and an ``airflow triggerer``, their logs in ``home``; ``env`` None: this process's environment."""

    def __init__(self, home: str | Path, port: int, *, apps: str = "execution", env: dict[str, str] | None = None,
                 triggerer: bool = True) -> None:
        self.home, self.port, self.apps, self.env, self.triggerer = Path(home), port, apps, env, triggerer
        self.procs: dict[str, subprocess.Popen] = {}

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.home / f"{name}.log", "w")
        try:
            self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env=self.env, start_new_session=True)
        finally:
            log.close()

    def start(self, timeout: float = 120.0) -> AirflowServices:
        self._spawn("api-server", [*AIRFLOW, "api-server", "--apps", self.apps, "-H", "127.0.0.1", "-p",
                                   str(self.port), "-w", "1"])
        if self.triggerer:
            self._spawn("triggerer", [*AIRFLOW, "triggerer", "--skip-serve-logs"])
        deadline = time.time() + timeout
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/execution/health", timeout=2)
                break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                self.check()
                if time.time() > deadline:
                    raise RuntimeError(f"the api-server did not come up (see {self.home}/api-server.log)") from None
                time.sleep(0.5)
        return self

    def check(self) -> None:
        """Raise when a component has died."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"airflow {name} exited with {proc.returncode} (see {self.home}/{name}.log)")

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_session(proc)

    def __enter__(self) -> AirflowServices:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

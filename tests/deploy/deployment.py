"""A real Airflow deployment of the provider, started the way docs/deploy.md tells a platform team to.

* the provider is built as a wheel and installed non-editable, with the
  ``spark`` extra, the Celery provider and psycopg2, in a venv of its own (nothing of the
  repository is importable there: the DAGs are copied, as a deployment does);
* PostgreSQL (Debian's server, started on a free port) is the metadata
  database, Redis the Celery broker;
* api-server, scheduler, dag-processor, triggerer and two Celery workers run
  as separate processes; every component has its own ``AIRFLOW_HOME``,
  ``HOME``, ``TMPDIR`` and DAGs folder, so the two workers share nothing on
  disk except the artifact location every worker of a deployment is given
  (``KIP848_ARTIFACTS_URL``);
* three users: ``alice`` and ``bob`` (admins, two people who may approve each
  other's changes) and ``victor`` (viewer).

The deployment lives for the test session; :meth:`stop_worker` /
:meth:`start_worker` let a test decide which worker runs which task.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from uv import find_uv_bin

from kip848_harness.processes import die_with_parent

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints" / "python3.11.txt"
USERS = {"alice": "admin", "bob": "admin", "victor": "viewer"}
#: What a CeleryExecutor deployment on PostgreSQL adds to the provider (apache-airflow[celery,postgres]).
DEPLOYMENT_PACKAGES = ("apache-airflow-providers-celery", "psycopg2-binary", "asyncpg")
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


#: the extras and the packages docs/deploy.md installs with the wheel (section 1)
EXTRAS = "spark,ssh"
#: the one Celery worker command of docs/deploy.md (section 2); the tier adds a host name per worker
WORKER_COMMAND = ("celery", "worker", "--concurrency", "4")
#: the schedule the tier gives the shipped streams migration (docs/deploy.md, "How to give a DAG a maintenance-window
#: schedule"): once a year, so the only scheduled run is the one Airflow starts when the form's "Unpause on trigger"
#: unpauses the DAG (catchup=False: the latest window's), which the first task refuses (no controller, the example's
#: application); tests/deploy/test_trigger_forms.py checks both
STREAMS_SCHEDULE = ("kip1071_streams_offline_migration_schedule", "0 2 1 1 * UTC")
#: settings of the tier that docs/deploy.md does not ask of a deployment, and why
TIER_ONLY = {
    ("logging", "worker_log_server_port"): "two workers on one host need two log-server ports",
    ("logging", "trigger_log_server_port"): "free ports on a machine shared with other test sessions",
    ("dag_processor", "refresh_interval"): "a test waits for the DAGs to appear",
    ("dag_processor", "min_file_process_interval"): "the DAG files never change while the deployment runs: "
                                                    "re-parsing them every 30 s cost most of a core on 2-core CI",
    ("dag_processor", "parsing_processes"): "2 cores shared with the rest of the suite",
    ("scheduler", "scheduler_heartbeat_sec"): "a test waits for the scheduler's health",
    ("kip848", STREAMS_SCHEDULE[0]): "shows the scheduled-run refusal (the doc gives it as an example)",
}


def airflow_cfg(*, api: str, db: str, redis: str, fernet_key: str, secret_key: str, jwt_secret: str,
                passwords_file: str, controllers: str, ownership_dir: str) -> dict[str, dict[str, str]]:
    """The airflow.cfg of every component, as docs/deploy.md lists it (tests/unit/test_deploy_doc.py compares the
    two), and the tier's own settings (TIER_ONLY). ``db``, ``redis``: host:port."""
    database = f"airflow@{db}/airflow"
    return {
        "core": {
            "executor": "CeleryExecutor",
            "load_examples": "False",
            "fernet_key": fernet_key,
            "execution_api_server_url": f"{api}/execution/",
            # the connection form's Test button (Airflow 3 disables it by default)
            "test_connection": "Enabled",
            "simple_auth_manager_users": ",".join(f"{u}:{r}" for u, r in USERS.items()),
            "simple_auth_manager_passwords_file": passwords_file,
        },
        "api": {"base_url": f"{api}/", "secret_key": secret_key},
        "api_auth": {"jwt_secret": jwt_secret},
        "database": {"sql_alchemy_conn": f"postgresql+psycopg2://{database}"},
        "celery": {"broker_url": f"redis://{redis}/0", "result_backend": f"db+postgresql+psycopg2://{database}",
                   "worker_concurrency": "4"},
        # the deployment's application controller registry: the test session's file, so the applications a test
        # registers are the ones the deployment's workers can name
        # (and the folder of the fleet's ownership map files: a run names a map by its file name only)
        "kip848": {"controllers": controllers, "ownership_dir": ownership_dir, STREAMS_SCHEDULE[0]: STREAMS_SCHEDULE[1]},
        "logging": {"worker_log_server_port": str(free_port()), "trigger_log_server_port": str(free_port())},
        "dag_processor": {"refresh_interval": "5", "min_file_process_interval": "3600", "parsing_processes": "1"},
        "scheduler": {"scheduler_heartbeat_sec": "2"},
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bin() -> Path:
    """Debian's PostgreSQL server binaries (``/usr/lib/postgresql/<major>/bin``)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL server not installed: run `make system-deps` (Debian package postgresql)")
    return found[-1].parent


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.5,
             alive: Callable[[], None] | None = None) -> Any:
    """Poll ``condition`` until it returns something truthy; ``alive`` raises when a process it needs died."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if alive:
            alive()
        try:
            last = condition()
        except (requests.RequestException, OSError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise TimeoutError(f"{what}: not reached within {timeout:.0f} s (last: {last!r})")


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path

    def check(self) -> None:
        if self.popen.poll() is not None:
            tail = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            raise RuntimeError(f"{self.name} exited with {self.popen.returncode}; its log ends:\n{tail}")

    def stop(self, timeout: float = 60) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)


@dataclass
class Deployment:
    root: Path
    bootstrap: str
    artifacts: Path
    python: str = sys.executable
    venv_dir: Path | None = None
    procs: dict[str, Proc] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    passwords: dict[str, str] = field(default_factory=dict)
    #: the wheel install() built (None: a reused venv)
    wheel: Path | None = None
    settings: dict[str, dict[str, str]] = field(default_factory=dict)

    # -- set-up ---------------------------------------------------------------------------------

    def install(self) -> None:
        """Build the wheel and install it, non-editable, in the deployment's own venv.

        With uv (a dev dependency), not pip: the same wheel, constraints and packages, for 40 CPU-seconds instead of
        145 (measured on the 2-core machine: pip wheel 19 s + venv with ensurepip 14 s + pip install 111 CPU-s). The
        deployment venv has no pip; nothing runs one in it."""
        started = time.monotonic()
        dist = self.root / "dist"
        uv = find_uv_bin()
        # setuptools packs whatever an earlier build left in build/lib (a module since deleted or moved, e.g. the
        # harness's old testing/ package) into the wheel: built from a clean build dir, as docs/deploy.md says
        for stale in (REPO / "build" / "lib", *(REPO / "build").glob("bdist.*")):
            shutil.rmtree(stale, ignore_errors=True)
        subprocess.run([uv, "build", "--quiet", "--wheel", "--out-dir", str(dist), str(REPO)], check=True,
                       cwd=self.root)
        wheel = next(dist.glob("airflow_provider_kip848-*.whl"))
        subprocess.run([uv, "venv", "--quiet", "--python", self.python, str(self.venv)], check=True)
        subprocess.run([uv, "pip", "install", "--quiet", "--python", str(self.venv / "bin" / "python"),
                        "-c", str(CONSTRAINTS), f"{wheel}[{EXTRAS}]", *DEPLOYMENT_PACKAGES], check=True,
                       cwd=self.root)
        self.wheel = wheel
        self.timings["install"] = time.monotonic() - started

    @property
    def ownership_dir(self) -> Path:
        """``[kip848] ownership_dir``: the fleet's ownership map files, on every worker (one machine here)."""
        return self.root / "ownership"

    @property
    def venv(self) -> Path:
        return self.venv_dir or self.root / "venv"

    def start_postgres(self) -> None:
        """initdb + pg_ctl as the ``postgres`` user when run as root (PostgreSQL refuses root)."""
        pg = postgres_bin()
        self.pg_dir = Path(tempfile.mkdtemp(prefix="kip848-pg-"))  # outside pytest's 0700 tmp: postgres reads it
        self.pg_port = free_port()
        as_user: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.pg_dir, "postgres", "postgres")
            as_user = ["runuser", "-u", "postgres", "--"]
        data = self.pg_dir / "data"
        subprocess.run([*as_user, str(pg / "initdb"), "-D", str(data), "-U", "airflow", "--auth=trust",
                        "--encoding=UTF8", "--no-sync"], check=True, capture_output=True)
        subprocess.run([*as_user, str(pg / "pg_ctl"), "-D", str(data), "-l", str(self.pg_dir / "postgres.log"),
                        "-o", f"-p {self.pg_port} -k {self.pg_dir} -c listen_addresses=127.0.0.1 -c fsync=off",
                        "-w", "start"], check=True, capture_output=True)
        self._pg_stop = [*as_user, str(pg / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
        subprocess.run([str(pg / "createdb"), "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "airflow",
                        "airflow"], check=True, capture_output=True)

    def start_redis(self) -> None:
        self.redis_port = free_port()
        redis_dir = self.root / "redis"
        redis_dir.mkdir()
        self._spawn("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", str(redis_dir)], env=dict(os.environ))
        wait_for(lambda: socket.create_connection(("127.0.0.1", self.redis_port), 1).close() or True,
                 30, "redis listening", alive=self.procs["redis"].check)

    def configure(self) -> None:
        self.api_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.api_port}"
        pw_file = self.root / "passwords.json"
        self.passwords = {user: secrets.token_urlsafe(12) for user in USERS}
        pw_file.write_text(json.dumps(self.passwords))
        self.settings = airflow_cfg(
            api=self.base_url, db=f"127.0.0.1:{self.pg_port}", redis=f"127.0.0.1:{self.redis_port}",
            fernet_key=_fernet_key(), secret_key=secrets.token_hex(16), jwt_secret=secrets.token_hex(32),
            passwords_file=str(pw_file), controllers=os.environ["AIRFLOW__KIP848__CONTROLLERS"],
            ownership_dir=str(self.ownership_dir))
        self.ownership_dir.mkdir(parents=True, exist_ok=True)
        self.common_env = {
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            # docs/deploy.md's airflow.cfg, given to every component as AIRFLOW__<SECTION>__<KEY>
            **{f"AIRFLOW__{section.upper()}__{key.upper()}": value
               for section, options in self.settings.items() for key, value in options.items()},
            # where every worker writes snapshots, reports and audit records (one location per deployment)
            "KIP848_ARTIFACTS_URL": str(self.artifacts),
            # install-time caches only (Kafka CLI jars, Spark's Ivy cache): never artifacts
            "KIP848_CACHE_DIR": os.environ.get("KIP848_CACHE_DIR", str(REPO / ".cache")),
            # the fleet DAG's wave slots (default 6), a deployment's setting: the tier's fleet runs have at most two
            # waves, and each unused slot still runs four task processes one after the other (about 25 s a slot);
            # three keep an unused slot in every run (the other tiers' test session runs two: tests/conftest.py)
            "KIP848_FLEET_MAX_WAVES": "3",
        }
        # the machine's Java, and the test session's Spark JVM tuning (tests/spark-conf/spark-defaults.conf)
        for key in ("JAVA_HOME", "SPARK_CONF_DIR", "SPARK_LAUNCHER_OPTS"):
            if key in os.environ:
                self.common_env[key] = os.environ[key]

    def component_env(self, name: str) -> dict[str, str]:
        """A component's own AIRFLOW_HOME, HOME, TMPDIR and copy of the DAGs (a machine of its own)."""
        home = self.root / "homes" / name
        if not home.exists():
            (home / "tmp").mkdir(parents=True)
            shutil.copytree(REPO / "dags", home / "dags", ignore=shutil.ignore_patterns("__pycache__"))
        return {**self.common_env, "AIRFLOW_HOME": str(home), "HOME": str(home), "TMPDIR": str(home / "tmp"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags")}

    def airflow(self, *args: str, component: str = "cli") -> subprocess.CompletedProcess:
        done = subprocess.run([str(self.venv / "bin" / "airflow"), *args], env=self.component_env(component),
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"airflow {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n"
                               f"{done.stderr[-3000:]}")
        return done

    def start(self) -> None:
        started = time.monotonic()
        self.start_postgres()
        self.start_redis()
        self.configure()
        self.airflow("db", "migrate")
        for name in COMPONENTS:
            args = ["api-server", "-p", str(self.api_port), "-H", "127.0.0.1"] if name == "api-server" else [name]
            self._spawn(name, [str(self.venv / "bin" / "airflow"), *args], env=self.component_env(name))
        wait_for(self._healthy, 180, "api-server, scheduler, dag-processor and triggerer healthy", interval=1,
                 alive=self.check)
        for worker in ("worker1", "worker2"):
            self.start_worker(worker)
        self.timings["start"] = time.monotonic() - started

    def start_worker(self, name: str) -> None:
        """A Celery worker; ``worker2`` serves no logs (one log-server port per host: a real second worker
        is a second machine)."""
        cmd = [str(self.venv / "bin" / "airflow"), *WORKER_COMMAND, "--celery-hostname", f"{name}@%h"]
        if name != "worker1":
            cmd.append("--skip-serve-logs")
        self._spawn(name, cmd, env=self.component_env(name))
        wait_for(lambda: self._worker_ready(name), 120, f"{name} connected to the Celery broker", interval=1,
                 alive=self.procs[name].check)

    def stop_worker(self, name: str) -> None:
        """Warm shutdown: the worker finishes what it runs and takes nothing new."""
        self.procs.pop(name).stop(timeout=120)

    def _worker_ready(self, name: str) -> bool:
        log = self.procs[name].log.read_text(errors="replace")
        return f"{name}@" in log and " ready." in log

    def _healthy(self) -> bool:
        health = requests.get(f"{self.base_url}/api/v2/monitor/health", timeout=5).json()
        return all(health.get(c, {}).get("status") == "healthy"
                   for c in ("metadatabase", "scheduler", "triggerer", "dag_processor"))

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str]) -> None:
        log = self.root / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("ab") as out:
            popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=env.get("HOME"),
                                     start_new_session=True, preexec_fn=die_with_parent)
        self.procs[name] = Proc(name, popen, log)

    def check(self) -> None:
        for proc in list(self.procs.values()):
            proc.check()

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            proc.stop(timeout=30)
        if getattr(self, "_pg_stop", None):
            subprocess.run(self._pg_stop, capture_output=True)
            shutil.rmtree(self.pg_dir, ignore_errors=True)

    # -- REST, as a given user ------------------------------------------------------------------

    def session(self, user: str) -> requests.Session:
        response = requests.post(f"{self.base_url}/auth/token",
                                 json={"username": user, "password": self.passwords[user]}, timeout=30)
        response.raise_for_status()
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {response.json()['access_token']}"
        return s

    def api(self, user: str, method: str, path: str, **kwargs) -> requests.Response:
        return self.session(user).request(method, f"{self.base_url}/api/v2{path}", timeout=60, **kwargs)

    def dag_ids(self) -> set[str]:
        dags = self.api("alice", "GET", "/dags", params={"limit": 100}).json().get("dags", [])
        return {d["dag_id"] for d in dags}

    def runs(self, dag_id: str) -> list[dict]:
        return self.api("alice", "GET", f"/dags/{dag_id}/dagRuns", params={"order_by": "-logical_date"}
                        ).json().get("dag_runs", [])

    def run(self, dag_id: str, run_id: str) -> dict:
        return self.api("alice", "GET", f"/dags/{dag_id}/dagRuns/{run_id}").json()

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict]:
        tis = self.api("alice", "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                       params={"limit": 200}).json().get("task_instances", [])
        return {ti["task_id"]: ti for ti in tis}

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        response = self.api("alice", "GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
                            f"{key}", params={"deserialize": "true", "stringify": "false", "map_index": map_index})
        response.raise_for_status()
        return response.json()["value"]

    def pending_approvals(self, dag_id: str, run_id: str | None = None) -> list[dict]:
        response = self.api("alice", "GET", f"/dags/{dag_id}/dagRuns/{run_id or '~'}/hitlDetails",
                            params={"response_received": "false"})
        response.raise_for_status()
        return response.json().get("hitl_details", [])

    def answer(self, detail: dict, user: str, option: str) -> requests.Response:
        """The PATCH the UI's Required Actions page sends, as ``user``."""
        ti = detail["task_instance"]
        return self.api(user, "PATCH", f"/dags/{ti['dag_id']}/dagRuns/{ti['dag_run_id']}/taskInstances/"
                        f"{ti['task_id']}/{ti.get('map_index', -1)}/hitlDetails",
                        json={"chosen_options": [option], "params_input": {}})

    def answer_pending(self, dag_id: str, run_id: str, user: str, option: str) -> int:
        answered = 0
        for detail in self.pending_approvals(dag_id, run_id):
            self.answer(detail, user, option).raise_for_status()
            answered += 1
        return answered

    def states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        return {t: ti["state"] for t, ti in sorted(self.task_instances(dag_id, run_id).items())}

    def failed_task_logs(self, dag_id: str, run_id: str) -> str:
        """The end of each failed task's log, read from the workers' own disks (for a test's error)."""
        failed = [t for t, state in self.states(dag_id, run_id).items() if state == "failed"]
        parts = []
        for task in failed:
            for log in sorted((self.root / "homes").glob(f"*/logs/dag_id={dag_id}/run_id={run_id}/"
                                                          f"task_id={task}/*.log")):
                parts.append(f"--- {log.relative_to(self.root)}\n{log.read_text(errors='replace')[-3000:]}")
        # what the components said about them (a task failed with nothing in its own log after "Pre Execute",
        # twice under load: killed, or failed by the scheduler or the worker's supervisor, which log it there)
        for proc in self.procs.values():
            if proc.log.exists():
                said = [line for line in proc.log.read_text(errors="replace").splitlines()
                        if run_id in line and any(task in line for task in failed)]
                if said:
                    parts.append(f"--- {proc.name}'s log on these tasks\n" + "\n".join(said[-15:])[-3000:])
        return "\n".join(parts)

    def wait_approval(self, dag_id: str, run_id: str, timeout: float = 300) -> dict:
        """The pending approval of the run; fails (with the run's task states and failed tasks' logs)
        when the run ends or the time is up without one."""
        def asked() -> list[dict] | None:
            if pending := self.pending_approvals(dag_id, run_id):
                return pending
            if self.run(dag_id, run_id)["state"] in ("success", "failed"):
                raise AssertionError(f"run {run_id} ended without asking: {self.states(dag_id, run_id)}\n"
                                     f"{self.failed_task_logs(dag_id, run_id)}")
            return None

        return wait_for(asked, timeout, f"{dag_id} run {run_id} asks for approval", interval=1,
                        alive=self.check)[0]

    def wait_task(self, dag_id: str, run_id: str, task_id: str, states: set[str], timeout: float = 300) -> dict:
        def reached() -> dict | None:
            ti = self.task_instances(dag_id, run_id).get(task_id)
            return ti if ti and ti["state"] in states else None

        return wait_for(reached, timeout, f"{dag_id}.{task_id} in {sorted(states)}", interval=1, alive=self.check)

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 600) -> dict:
        return wait_for(lambda: (r := self.run(dag_id, run_id))["state"] in ("success", "failed") and r,
                        timeout, f"{dag_id} run {run_id} finished", interval=2, alive=self.check)


def _fernet_key() -> str:
    import base64

    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()

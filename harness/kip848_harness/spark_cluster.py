"""A real Spark standalone cluster on this machine, from the installed pyspark's own distribution.

pyspark's package directory is a Spark home: ``bin/spark-class`` and
``jars/`` are the same release as the driver, so the cluster can never be at
another Spark version than the jobs submitted to it. :class:`LocalSparkCluster`
starts one master (RPC, web UI with its ``/json/`` status, and the REST
submission server the Spark provider polls for drivers in cluster mode) and
``workers`` workers, each in its own work and log directory under
``workdir``, on free ports of ``127.0.0.1``::

    with LocalSparkCluster(tmp, workers=2) as cluster:
        print(cluster.master_url)           # spark://127.0.0.1:41234
        cluster.airflow_connection()        # the Spark provider's connection to it

Start-up waits on conditions, never on a fixed delay: the master's status page
says ALIVE, its REST server answers, and every worker is registered. A process
that dies on the way stops the start with the last lines of its log. Daemons
die with the Python that started them (``die_with_parent``); :meth:`stop`
terminates workers (which stop their executors and drivers) before the master.
The pids are kept in ``state.json`` so another process (the demo's command
line) can stop a cluster it did not start.

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_kip848.kafka.cli.distribution import tail_lines
from airflow_provider_kip848.kafka.cli.java import find_java
from kip848_harness.errors import LocalKafkaError
from kip848_harness.processes import die_with_parent, send_signal

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_VERSION_RE = re.compile(r"Running Spark version (\S+)")


class SparkClusterError(LocalKafkaError):
    """The local Spark cluster could not start (or stop); the message names the log to read."""

    remedy = "Read the log named above; fix the cause and start again."


@dataclass(frozen=True)
class SparkClusterReport:
    version: str
    master_url: str
    rest_url: str
    ui_url: str
    workers: int
    cores: int
    memory_mb: int
    seconds: float

    def summary(self) -> str:
        return (f"Spark {self.version} standalone at {self.master_url}: {self.workers} worker(s), {self.cores} "
                f"core(s), {self.memory_mb} MB, ready in {self.seconds:.1f} s (UI {self.ui_url}, REST {self.rest_url})")


@dataclass
class _State:
    host: str
    master_port: int
    ui_port: int
    rest_port: int
    worker_ui_ports: list[int]
    master_pid: int | None = None
    worker_pids: list[int | None] = field(default_factory=list)


def spark_home() -> Path:
    """The installed pyspark's directory: a Spark home (``bin/spark-class``, ``jars/``)."""
    import pyspark  # noqa: PLC0415 - optional dependency pyspark (the [spark] extra)

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise SparkClusterError(f"{home} has no bin/spark-class or jars/: not a full pyspark distribution.",
                                remedy="Install pyspark from PyPI (pip install 'airflow-provider-kip848[spark]'), "
                                       "not pyspark-client alone.")
    return home


def spark_version() -> str:
    import pyspark  # noqa: PLC0415 - optional dependency pyspark (the [spark] extra)

    return pyspark.__version__


class LocalSparkCluster:
    """One master and ``workers`` workers (``cores_per_worker`` cores and ``memory_per_worker`` each, what the
    worker offers to executors and cluster-mode drivers: it may exceed the machine's real cores)."""

    def __init__(self, workdir: Path | str, *, workers: int = 2, cores_per_worker: int = 2,
                 memory_per_worker: str = "2g", host: str = "127.0.0.1", daemon_memory: str = "512m",
                 start_timeout: float = 120.0, die_with_parent: bool = True) -> None:
        if workers < 1:
            raise ValueError("a cluster needs at least one worker")
        self.workdir = Path(workdir).resolve()
        self.workers, self.cores_per_worker, self.memory_per_worker = workers, cores_per_worker, memory_per_worker
        self.host, self.daemon_memory, self.start_timeout = host, daemon_memory, start_timeout
        self.die_with_parent = die_with_parent
        self._processes: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, Any] = {}
        self._spawned: list[int] = []  # pids (and process groups) this object started
        self._state: _State | None = None

    @classmethod
    def existing(cls, workdir: Path | str, **kwargs: Any) -> LocalSparkCluster:
        """The cluster a state file in ``workdir`` describes (started by another process), to stop or query."""
        cluster = cls(workdir, **kwargs)
        cluster._state = cluster._read_state()
        if cluster._state is None:
            raise SparkClusterError(f"no Spark cluster was started in {cluster.workdir} (no state.json).")
        cluster.workers = len(cluster._state.worker_ui_ports)
        return cluster

    # -- where things are -----------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.workdir / "state.json"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def worker_dir(self, number: int) -> Path:
        return self.workdir / f"worker-{number}"

    @property
    def marker(self) -> str:
        """A JVM system property naming this cluster: how a pid is recognised as one of ours."""
        return f"-Dkip848.spark.cluster={self.workdir}"

    def _started(self) -> _State:
        if self._state is None:
            raise SparkClusterError("the Spark cluster is not started.", remedy="Call start() first.")
        return self._state

    @property
    def master_url(self) -> str:
        s = self._started()
        return f"spark://{s.host}:{s.master_port}"

    @property
    def ui_url(self) -> str:
        s = self._started()
        return f"http://{s.host}:{s.ui_port}"

    @property
    def rest_url(self) -> str:
        s = self._started()
        return f"http://{s.host}:{s.rest_port}"

    def airflow_connection(self, deploy_mode: str = "client") -> dict[str, Any]:
        """The Spark provider's connection to this cluster (the JSON of an ``AIRFLOW_CONN_<ID>`` variable):
        the master URL, the deploy mode and the REST port it polls a cluster-mode driver's status on."""
        if deploy_mode not in ("client", "cluster"):
            raise ValueError("deploy_mode is client or cluster")
        s = self._started()
        return {"conn_type": "spark", "host": f"spark://{s.host}", "port": s.master_port,
                "extra": {"deploy-mode": deploy_mode, "rest-port": s.rest_port}}

    def driver_conf(self) -> dict[str, str]:
        """Spark properties of a driver on this machine using the cluster (client mode): its executors must
        reach it on the address the workers use."""
        s = self._started()
        return {"spark.master": self.master_url, "spark.driver.host": s.host, "spark.driver.bindAddress": s.host}

    # -- status ---------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The master's own status (``/json/``): state, workers with their cores and memory, applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as response:
            return json.loads(response.read())

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]

    def driver_state(self, driver_id: str) -> str | None:
        """A cluster-mode driver's state from the REST server, as the Spark provider reads it."""
        body = _get_json(f"{self.rest_url}/v1/submissions/status/{driver_id}")
        return body.get("driverState") if body else None

    # -- start and stop -------------------------------------------------------------------------------

    def start(self) -> SparkClusterReport:
        """Start the master, then the workers; return once every worker is registered."""
        java = find_java()  # the one-line answer to "why does nothing start?"
        home = spark_home()
        t0 = time.monotonic()
        if self._read_state() is not None and self._any_running(self._read_state()):
            raise SparkClusterError(f"a Spark cluster already runs from {self.workdir}.",
                                    remedy="Stop it first (or use another work directory).")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        ports = _free_ports(self.host, 3 + self.workers)
        state = _State(self.host, ports[0], ports[1], ports[2], ports[3:])
        self._state = state
        env = self._env(home, java.executable)
        try:
            conf = self.workdir / "master.conf"
            conf.write_text(f"spark.master.rest.enabled true\nspark.master.rest.host {self.host}\n"
                            f"spark.master.rest.port {state.rest_port}\n")
            state.master_pid = self._spawn("master", home, env, MASTER_CLASS, [
                "--host", self.host, "--port", str(state.master_port), "--webui-port", str(state.ui_port),
                "--properties-file", str(conf)])
            self._write_state(state)
            self._wait("the master's status page to say ALIVE", ["master"],
                       lambda: self.status().get("status") == "ALIVE")
            self._wait("the master's REST submission server to answer", ["master"],
                       lambda: _get_json(f"{self.rest_url}/v1/submissions/status/none") is not None)
            for n in range(1, self.workers + 1):
                self.worker_dir(n).mkdir(parents=True, exist_ok=True)
                state.worker_pids.append(self._spawn(f"worker-{n}", home, env, WORKER_CLASS, [
                    "--host", self.host, "--webui-port", str(state.worker_ui_ports[n - 1]),
                    "--cores", str(self.cores_per_worker), "--memory", self.memory_per_worker,
                    "--work-dir", str(self.worker_dir(n)), self.master_url]))
                self._write_state(state)
            names = ["master", *(f"worker-{n}" for n in range(1, self.workers + 1))]
            self._wait(f"{self.workers} worker(s) to register with the master", names,
                       lambda: len(self.alive_workers()) >= self.workers)
        except BaseException:
            self.stop()
            raise
        version = self._reported_version() or "unknown"
        if version not in ("unknown", spark_version()):
            self.stop()
            raise SparkClusterError(f"the cluster runs Spark {version}, the driver's pyspark is {spark_version()}.")
        workers = self.alive_workers()
        return SparkClusterReport(version, self.master_url, self.rest_url, self.ui_url, len(workers),
                                  sum(int(w.get("cores", 0)) for w in workers),
                                  sum(int(w.get("memory", 0)) for w in workers), time.monotonic() - t0)

    def stop(self, timeout: float = 30.0) -> bool:
        """Terminate the workers (they stop their executors and drivers), then the master; kill what does not
        exit within ``timeout``. True when everything was stopped gracefully."""
        state = self._state or self._read_state()
        if state is None:
            return True
        graceful = True
        named = [(f"worker-{n}", pid) for n, pid in enumerate(state.worker_pids, start=1)]
        for group in (named, [("master", state.master_pid)]):
            running = [(name, pid) for name, pid in group if pid and self._is_ours(name, pid)]
            for _, pid in running:
                send_signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            for name, pid in running:
                if not self._wait_exit(name, pid, deadline):
                    graceful = False
                    send_signal(pid, signal.SIGKILL)
                    self._wait_exit(name, pid, time.monotonic() + 10)
                self._reap(name)
        for name in list(self._processes):
            self._reap(name)
        for pid in self._spawned:  # executors or drivers a killed worker left behind: its process group
            _kill_group(pid)
        self._spawned.clear()
        self.state_path.unlink(missing_ok=True)
        self._state = None
        return graceful

    def __enter__(self) -> LocalSparkCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ------------------------------------------------------------------------------------

    def _env(self, home: Path, java: str) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("SPARK_CONF_DIR", "SPARK_MASTER_OPTS", "SPARK_WORKER_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
            env.pop(key, None)
        conf_dir = self.workdir / "conf"  # empty: no spark-env.sh or spark-defaults.conf of the machine applies
        conf_dir.mkdir(parents=True, exist_ok=True)
        local = self.workdir / "local"
        local.mkdir(parents=True, exist_ok=True)
        env.update({
            "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(conf_dir), "SPARK_LOG_DIR": str(self.log_dir),
            "SPARK_LOCAL_IP": self.host, "SPARK_LOCAL_DIRS": str(local), "SPARK_DAEMON_MEMORY": self.daemon_memory,
            # the master and workers: C1 and the serial collector, as the test brokers (short-lived, small)
            "SPARK_DAEMON_JAVA_OPTS": f"{self.marker} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "JAVA_HOME": str(Path(java).resolve().parent.parent),
            # executors (and cluster-mode drivers) run Python with this interpreter: the one with pyspark
            "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON") or sys.executable,
        })
        return env

    def _spawn(self, name: str, home: Path, env: dict[str, str], main_class: str, args: list[str]) -> int:
        handle = open(self.log_path(name), "ab")  # closed by _reap
        self._logs[name] = handle
        process = subprocess.Popen(
            [str(home / "bin" / "spark-class"), main_class, *args], stdout=handle, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=self.workdir, env=env, start_new_session=True,
            preexec_fn=die_with_parent if self.die_with_parent else None)
        self._processes[name] = process
        self._spawned.append(process.pid)
        return process.pid

    def _wait(self, what: str, names: list[str], condition) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for name in names:
                process = self._processes.get(name)
                if process is not None and process.poll() is not None:
                    log = self.log_path(name)
                    raise SparkClusterError(f"Spark {name} exited with code {process.returncode} while waiting for "
                                            f"{what}: {tail_lines(_read(log), 3)} (log {log}).")
            try:
                if condition():
                    return
            except (OSError, ValueError):
                pass  # not answering yet
            time.sleep(0.2)
        raise SparkClusterError(f"timed out after {self.start_timeout:.0f} s waiting for {what} (logs in "
                                f"{self.log_dir}).",
                                remedy="The machine may be overloaded; read the logs, then retry with a longer "
                                       "start_timeout.")

    def _reported_version(self) -> str | None:
        match = _VERSION_RE.search(_read(self.log_path("master")))
        return match.group(1) if match else None

    def _is_ours(self, name: str, pid: int) -> bool:
        process = self._processes.get(name)
        if process is not None and process.pid == pid and process.poll() is not None:
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return self.marker.encode() in cmdline

    def _any_running(self, state: _State | None) -> bool:
        if state is None:
            return False
        pids = [("master", state.master_pid)] + [(f"worker-{n}", p) for n, p in enumerate(state.worker_pids, 1)]
        return any(pid and self._is_ours(name, pid) for name, pid in pids)

    def _wait_exit(self, name: str, pid: int, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if not self._is_ours(name, pid):
                return True
            time.sleep(0.1)
        return not self._is_ours(name, pid)

    def _reap(self, name: str) -> None:
        process = self._processes.pop(name, None)
        if process is not None:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                self._processes[name] = process
        handle = self._logs.pop(name, None)
        if handle is not None:
            handle.close()

    def _read_state(self) -> _State | None:
        try:
            return _State(**json.loads(self.state_path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def _write_state(self, state: _State) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=1))
        tmp.replace(self.state_path)


def _free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports free on ``host`` now (held open together, so none is handed out twice)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _kill_group(pgid: int) -> None:
    """SIGKILL what is left of a process group this harness started (its leader has exited)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _get_json(url: str) -> dict[str, Any] | None:
    """The JSON body at ``url`` (an error status with a JSON body counts: the server answered), else None."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            return json.loads(exc.read())
        except ValueError:
            return None
    except (OSError, ValueError):
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""

"""One local Kafka node's process: its JVM started, watched until it answers, stopped, killed, paused; its log.

:class:`NodeProcesses` keeps the JVMs one :class:`~kip848_harness.kafka_cluster.LocalKafka` started, by node id.
A process is ours only when its command line carries the node's marker (``-Dkip848.instance=<node dir>``): a
pid recorded in ``state.json`` that the system has since given to another process is never signalled. Start-up
waits on a condition (the log says "Kafka Server started" and the node answers a Metadata request), never on a
fixed delay. The port helpers are here too: a node's ports are picked free and checked before its JVM starts.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from confluent_kafka.admin import AdminClient

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution, tail_lines
from airflow_provider_kip848.kafka.native.quiet import QUIET_LOGGER
from kip848_harness.errors import BrokerStartError, LocalKafkaError, PortInUseError
from kip848_harness.jmx_exporter import JmxExporterAgent
from kip848_harness.kafka_distribution import broker_command, exporter_jvm_options
from kip848_harness.kafka_state import ClusterFiles, ClusterState, NodeState
from kip848_harness.kafka_tuning import BROKER_JVM_OPTIONS, Tuning
from kip848_harness.processes import die_with_parent, send_signal

_STARTED_RE = re.compile(r"Kafka Server started")
_VERSION_RE = re.compile(r"Kafka version: (\S+)")
_BIND_FAIL_RE = re.compile(r"(Address already in use|Socket server failed to bind to \S+)")


class NodeProcesses:
    """The node JVMs this launcher started (by node id) and their open log files.

    ``marker_of(node_id)`` is the JVM option that marks node ``node_id``'s process as ours; ``die_with_parent``:
    each JVM gets SIGKILL when the process that started it dies (tests), else it outlives it (``kafka start``)."""

    def __init__(self, marker_of: Callable[[int], str], *, die_with_parent: bool = False) -> None:
        self.marker_of = marker_of
        self.die_with_parent = die_with_parent
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self._log_handles: dict[int, IO[bytes]] = {}

    # -- start -----------------------------------------------------------------------------------

    def spawn(self, node: NodeState, cmd: list[str], log_path: Path, cwd: Path) -> None:
        """Start ``cmd`` (the node's JVM) in its own session, its output appended to ``log_path``."""
        self.close_log(node.node_id)
        handle = open(log_path, "ab")  # closed by close_log
        self._log_handles[node.node_id] = handle
        process = subprocess.Popen(
            cmd,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,  # a Ctrl-C in the terminal must not kill a daemonised broker
            preexec_fn=die_with_parent if self.die_with_parent else None,
        )
        self._processes[node.node_id] = process
        node.pid, node.paused = process.pid, False

    def wait_ready(self, node: NodeState, host: str, log_path: Path, log_offset: int, timeout: float) -> str | None:
        """Wait until the node's log says it started and it answers a Metadata request; returns the version its
        log reports. A JVM that exits first raises, with the cause in Kafka's words (a port taken: PortInUseError)."""
        deadline = time.monotonic() + timeout
        reported: str | None = None
        started = False
        while time.monotonic() < deadline:
            text = read_from(log_path, log_offset)
            if reported is None and (m := _VERSION_RE.search(text)):
                reported = m.group(1)
            started = started or bool(_STARTED_RE.search(text))
            process = self._processes.get(node.node_id)
            code = process.poll() if process else None
            if code is not None:
                bind = _BIND_FAIL_RE.search(text)
                if bind:
                    raise PortInUseError(f"Kafka could not bind its port: {bind.group(0)} (log {log_path}).")
                raise BrokerStartError(
                    f"Kafka node {node.node_id} exited with code {code} during start-up: "
                    f"{tail_lines(errors_only(text), 3)} (log {log_path})."
                )
            if started and answers_metadata(host, node.port):
                return reported
            time.sleep(0.2)
        raise BrokerStartError(
            f"Kafka node {node.node_id} did not answer on {host}:{node.port} within {timeout:.0f} s "
            f"(log {log_path}).",
            remedy="The machine may be overloaded; read the log, then retry with a longer start timeout.",
        )

    def kill_spawned(self, node_id: int) -> None:
        """SIGKILL the JVM this object started for ``node_id`` (a start that failed half-way)."""
        process = self._processes.get(node_id)
        if process and process.poll() is None:
            process.kill()
            process.wait(10)

    # -- stop, kill, pause -----------------------------------------------------------------------

    def terminate(self, node: NodeState) -> None:
        """Ask the node to shut down cleanly (SIGTERM; a paused node is resumed first so that it can)."""
        if node.paused:
            send_signal(node.pid or 0, signal.SIGCONT)
        send_signal(node.pid or 0, signal.SIGTERM)

    def wait_exit_or_kill(self, node: NodeState, timeout: float) -> None:
        """Wait ``timeout`` seconds for the node to exit, then SIGKILL it."""
        if not self.wait_exit(node, timeout):
            send_signal(node.pid or 0, signal.SIGKILL)
            self.wait_exit(node, 10)

    def kill(self, node: NodeState) -> None:
        """SIGKILL the node (a crash)."""
        send_signal(node.pid or 0, signal.SIGKILL)

    def pause(self, node: NodeState) -> None:
        """SIGSTOP: it keeps its sockets open and answers nothing (a GC pause, a frozen VM)."""
        send_signal(node.pid or 0, signal.SIGSTOP)
        node.paused = True

    def resume(self, node: NodeState) -> None:
        if self.running(node):
            send_signal(node.pid or 0, signal.SIGCONT)
        node.paused = False

    def forget(self, node: NodeState) -> None:
        """The node is down: no pid, not paused, log handle closed and process reaped."""
        node.pid, node.paused = None, False
        self.close_log(node.node_id)

    def close_log(self, node_id: int) -> None:
        handle = self._log_handles.pop(node_id, None)
        if handle:
            handle.close()
        process = self._processes.get(node_id)
        if process:
            try:
                process.wait(0)  # reap, so no zombie is left behind
                self._processes.pop(node_id, None)
            except subprocess.TimeoutExpired:
                pass

    # -- is it ours, is it running ---------------------------------------------------------------

    def running(self, node: NodeState) -> bool:
        return bool(node.pid) and self.is_ours(node.pid or 0, node.node_id)

    def is_ours(self, pid: int, node_id: int = 1) -> bool:
        marker = self.marker_of(node_id)
        process = self._processes.get(node_id)
        if process is not None and process.pid == pid and process.poll() is not None:
            return False  # our own child that has exited (a zombie still has its /proc entry)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            if sys.platform.startswith("linux"):
                return False
            proc = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
            return marker in proc.stdout.split()
        return marker.encode() in cmdline

    def wait_exit(self, node: NodeState, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        pid = node.pid or 0
        while time.monotonic() < deadline:
            process = self._processes.get(node.node_id)
            if process is not None and process.pid == pid:
                if process.poll() is not None:
                    return True
            elif not self.is_ours(pid, node.node_id):
                return True
            time.sleep(0.1)
        return False


class NodeLifecycle(ClusterFiles):
    """One node of a cluster, by id, as a real cluster loses and regains one: stopped cleanly, killed (a crash),
    paused (SIGSTOP), resumed, started again with the same data and ports; and what every start of a node shares
    (its ports checked free, its metrics port chosen, its JVM spawned and waited for). The base of
    :class:`~kip848_harness.kafka_cluster.LocalKafka`, which sets the attributes below."""

    processes: NodeProcesses
    exporter: JmxExporterAgent
    heap: str
    tuning: Tuning
    start_timeout: float
    metrics: bool | None
    #: node id -> the release it runs when it is not the cluster's (a rolling broker upgrade)
    node_distributions: dict[int, KafkaDistribution]

    def stop_node(self, node_id: int, timeout: float = 30.0) -> bool:
        """A clean shutdown of one node (SIGTERM; SIGKILL after ``timeout``). True if it was running."""
        state = self._started_state()
        node = state.node(node_id)
        if not self.processes.running(node):
            return False
        self.processes.terminate(node)
        self.processes.wait_exit_or_kill(node, timeout)
        self.processes.forget(node)
        self._write_state(state)
        return True

    def kill_node(self, node_id: int) -> bool:
        """SIGKILL one node (a crash). True if it was running."""
        state = self._started_state()
        node = state.node(node_id)
        if not self.processes.running(node):
            return False
        self.processes.kill(node)
        self.processes.wait_exit(node, 10)
        self.processes.forget(node)
        self._write_state(state)
        return True

    def pause_node(self, node_id: int) -> None:
        """SIGSTOP one node: it keeps its sockets open and answers nothing (a GC pause, a frozen VM)."""
        state = self._started_state()
        node = state.node(node_id)
        if not self.processes.running(node):
            raise LocalKafkaError(f"Node {node_id} is not running; it cannot be paused.")
        self.processes.pause(node)
        self._write_state(state)

    def resume_node(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        state = self._started_state()
        node = state.node(node_id)
        self.processes.resume(node)
        self._write_state(state)

    def start_node(self, node_id: int) -> float:
        """Start one stopped node (same data, same ports) and wait until it answers; returns the seconds."""
        state = self._started_state()
        node = state.node(node_id)
        if self.processes.running(node):
            raise LocalKafkaError(f"Node {node_id} is already running (pid {node.pid}).")
        self._choose_metrics(state)
        self._check_ports_free(state.host, node)
        t0 = time.monotonic()
        offset = log_size(self.node_log_path(node_id))
        self._spawn(state, node)
        self._write_state(state)
        try:
            self._wait_ready(state, node, offset)
        except BaseException:
            self._kill_spawned(node_id)
            raise
        return time.monotonic() - t0

    def restart_node(self, node_id: int, timeout: float = 30.0) -> float:
        """Stop one node cleanly and start it again; returns the seconds from stop to answering."""
        t0 = time.monotonic()
        self.stop_node(node_id, timeout)
        self.start_node(node_id)
        return time.monotonic() - t0

    def node_of_port(self, port: int) -> int:
        """The node whose PLAINTEXT listener is ``port`` (to map a client's coordinator to a node)."""
        for node in self._started_state().nodes:
            if port in (node.port, node.sasl_port):
                return node.node_id
        raise LocalKafkaError(f"No node of {self.workdir} listens on port {port}.")

    @staticmethod
    def _check_port_free(host: str, port: int, role: str) -> None:
        if not can_bind(host, port):
            raise PortInUseError(f"Cannot start the local Kafka: {role} port {host}:{port} is already in use.")

    def _check_ports_free(self, host: str, node: NodeState) -> None:
        # A restart keeps the cluster's ports (the KRaft voter set records them).
        which = f"node {node.node_id} " if self.nodes > 1 else ""
        self._check_port_free(host, node.port, f"{which}broker")
        self._check_port_free(host, node.controller_port, f"{which}controller")
        if node.sasl_port:
            self._check_port_free(host, node.sasl_port, f"{which}SASL")
        if node.metrics_port:
            self._check_port_free(host, node.metrics_port, f"{which}metrics")

    def _choose_metrics(self, state: ClusterState) -> None:
        """Give each stopped node a metrics port (``metrics=True``) or take it away (``False``); ``None`` keeps
        what the state records. A running node keeps its own: its JVM already runs with or without the agent.
        A recorded metrics port something else took meanwhile is replaced by a free one (unlike the broker
        and controller ports, no part of the cluster remembers it; only the URL changes). A node that has just
        stopped may hold its sockets for a moment after its pid is gone: only a port that stays busy moves."""
        taken = {p for n in state.nodes for p in (n.port, n.controller_port, n.sasl_port, n.metrics_port) if p}
        for node in state.nodes:
            if self.processes.running(node):
                continue
            if self.metrics is False:
                node.metrics_port = None
            elif (self.metrics and not node.metrics_port) or (
                    node.metrics_port and stays_busy(state.host, node.metrics_port)):
                node.metrics_port = free_port(state.host, avoid=taken)
                taken.add(node.metrics_port)


    def _spawn(self, state: ClusterState, node: NodeState) -> None:
        jvm_options = [f"-Xmx{self.heap}", "-Xms128m", *BROKER_JVM_OPTIONS[self.tuning], self.node_marker(node.node_id),
                       *exporter_jvm_options(self.exporter, self.exporter_config_path, state.host, node.metrics_port)]
        distribution = self.node_distributions.get(node.node_id, self.distribution)
        self.processes.spawn(node, broker_command(distribution, self.node_config_path(node.node_id), jvm_options),
                             self.node_log_path(node.node_id), self.node_dir(node.node_id))

    def _wait_ready(self, state: ClusterState, node: NodeState, log_offset: int) -> str | None:
        return self.processes.wait_ready(node, state.host, self.node_log_path(node.node_id), log_offset,
                                         self.start_timeout)

    def _kill_spawned(self, node_id: int) -> None:
        self.processes.kill_spawned(node_id)
        state = self._read_state()
        if state is not None:
            self.processes.forget(state.node(node_id))
            self._write_state(state)


# -- ports -------------------------------------------------------------------------------------


def free_port(host: str, avoid: set[int] | None = None) -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in (avoid or set()):
            return port
    raise PortInUseError(f"Could not find a free port on {host}.")


def can_bind(host: str, port: int) -> bool:
    # SO_REUSEADDR as Kafka's acceptor sets it: a port in TIME_WAIT is usable, a listening one is not.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def stays_busy(host: str, port: int, grace: float = 3.0) -> bool:
    """True when ``port`` cannot be bound for ``grace`` seconds (a process of ours exiting frees it sooner)."""
    deadline = time.monotonic() + grace
    while not can_bind(host, port):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.1)
    return False


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def answers_metadata(host: str, port: int) -> bool:
    """True once the broker serves a Metadata request (not just an open socket)."""
    if not port_open(host, port):
        return False
    config: dict[str, Any] = {"bootstrap.servers": f"{host}:{port}", "log_level": 0, "logger": QUIET_LOGGER}
    admin = AdminClient(config)
    try:
        md = admin.list_topics(timeout=3)
        return bool(md.brokers)
    except Exception:
        return False


# -- logs --------------------------------------------------------------------------------------


def read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def errors_only(text: str) -> str:
    """The broker's first ERROR line and the exception line that follows it (the cause, in Kafka's words)."""
    lines = text.splitlines()
    picked = []
    for i, line in enumerate(lines):
        if " ERROR " in line:
            picked.append(line)
            picked += [ln for ln in lines[i + 1:i + 4] if re.match(r"^[\w.$]+(Exception|Error)\b", ln)][:1]
            if len(picked) >= 2:
                break
    return "\n".join(picked) or text


def log_size(path: Path) -> int:
    """Where new output will start in ``path`` (0 for no file yet)."""
    return path.stat().st_size if path.exists() else 0


__all__ = ["NodeLifecycle", "NodeProcesses", "answers_metadata", "can_bind", "errors_only", "free_port", "log_size",
           "port_open", "read_from", "stays_busy"]

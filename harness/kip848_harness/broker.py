"""A real Apache Kafka cluster (KRaft, combined broker+controller nodes) for demos and tests.

This is the cluster ``make demo`` and the whole test suite run against: one
node by default, or several (``nodes=3``: a quorum of three voters, internal
topics on three replicas) where a test needs the group coordinator to move.
It is the real broker from Maven Central (see
:mod:`airflow_provider_kip848.kafka.cli.distribution`), formatted and started
the way ``kafka-storage format`` and ``kafka-server-start`` would, with two
deliberate differences:

* ports are free ones picked at start (or the ones you give), so several
  brokers and a developer's own Kafka can coexist on one machine;
* the ``fast`` tuning lowers the group coordinator's session/heartbeat minimums
  and initial rebalance delays, so tests do not wait on production timeouts,
  and runs the JVM with the serial collector and C1 only (less CPU per broker).
  The ``production`` tuning keeps every broker default (benchmarks use it).

With ``metrics=True`` each node also serves its group-coordinator metrics in
Prometheus text format through the Prometheus JMX exporter's Java agent, on a
free port of its own (:attr:`LocalKafka.metrics_url`; see
:mod:`~kip848_harness.jmx_exporter`).

A cluster is identified by its work directory: ``state.json`` there records
each node's pid and ports and the version, and each JVM carries
``-Dkip848.instance=<node dir>`` so ``stop`` only ever signals the processes
this launcher started.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from airflow_provider_kip848.kafka.cli.distribution import (
    CLUSTER_TOOLS,
    DEFAULT_KAFKA_VERSION,
    KafkaDistribution,
    tail_lines,
)
from airflow_provider_kip848.kafka.cli.java import find_java
from airflow_provider_kip848.kafka.native.transport import QUIET_LOGGER
from airflow_provider_kip848.kafka.settings import jaas_escape, java_properties_text
from kip848_harness.apps import StreamsApp, wordcount_properties
from kip848_harness.errors import (
    BrokerNotRunning,
    BrokerStartError,
    LocalKafkaError,
    PortInUseError,
    ToolError,
)
from kip848_harness.jmx_exporter import EXPORTER_CONFIG, JmxExporterAgent, metrics_url
from kip848_harness.processes import die_with_parent, send_signal

BROKER_MAIN_CLASS = "kafka.Kafka"

Tuning = Literal["fast", "production"]

#: Replication settings of a cluster of ``n`` nodes: internal topics (and new topics) on min(n, 3)
#: replicas, writes acknowledged by one in-sync replica, so that losing one node of three loses nothing
#: and blocks nothing.
def replication_config(nodes: int) -> dict[str, str]:
    rf = str(min(nodes, 3))
    return {
        "num.partitions": "1",
        "default.replication.factor": rf,
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": "1",
    }


#: A single-node cluster's replication settings (kept for callers that read them).
SINGLE_NODE_CONFIG: dict[str, str] = replication_config(1)

#: The ``fast`` tuning: production defaults in comments. Names checked against
#: ``kafka-configs --describe --all --entity-type brokers`` on 4.2.1 and 4.3.1.
FAST_TUNING: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",  # 3000
    "group.min.session.timeout.ms": "1000",  # 6000 (classic protocol)
    "group.consumer.min.session.timeout.ms": "2000",  # 45000
    "group.consumer.session.timeout.ms": "6000",  # 45000
    "group.consumer.min.heartbeat.interval.ms": "100",  # 5000
    "group.consumer.heartbeat.interval.ms": "500",  # 5000
    "group.streams.min.session.timeout.ms": "2000",  # 45000
    "group.streams.session.timeout.ms": "6000",  # 45000
    "group.streams.min.heartbeat.interval.ms": "100",  # 5000
    "group.streams.heartbeat.interval.ms": "500",  # 5000
    "group.streams.initial.rebalance.delay.ms": "0",  # 3000
    "offsets.topic.num.partitions": "10",  # 50: creating 50 partitions costs seconds per fresh broker
    # An idle test broker's CPU (a run keeps a few alive for most of an hour): 3.9% of a core with Kafka's defaults
    # for the three below, 2.3% with them (bench/idle_broker.py, one node, 1.7x). The controller's no-op record every
    # 500 ms is replicated and published like any metadata change; eight request handlers and three network threads
    # each wake several times a second to poll empty queues. A test broker serves a few clients at a time.
    "metadata.max.idle.interval.ms": "5000",  # 500
    "num.io.threads": "2",  # 8
    "num.network.threads": "2",  # 3
}

#: Garbage collector and JIT per tuning. ``fast`` (tests, the demo) spends the least CPU on a shared machine: the
#: serial collector (no concurrent GC threads) and C1 only (no C2 compile bursts in each new JVM's first minutes;
#: a test broker moves kilobytes). ``production`` keeps a broker's own choice (G1, low pauses) for benchmarks.
BROKER_JVM_OPTIONS: dict[str, tuple[str, ...]] = {
    "fast": ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"),
    "production": ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"),
}

_STARTED_RE = re.compile(r"Kafka Server started")
_VERSION_RE = re.compile(r"Kafka version: (\S+)")
_BIND_FAIL_RE = re.compile(r"(Address already in use|Socket server failed to bind to \S+)")


@dataclass
class StartReport:
    """What ``start()`` did, in numbers (printed by the CLI and the demo)."""

    version: str
    reported_version: str | None
    bootstrap_servers: str
    pid: int
    cluster_id: str
    fetched_jars: bool
    resolve_seconds: float
    format_seconds: float
    ready_seconds: float
    log_path: str
    nodes: int = 1
    pids: dict[int, int] = field(default_factory=dict)
    #: node id -> the URL its Prometheus JMX exporter serves (empty: started without metrics)
    metrics_urls: dict[int, str] = field(default_factory=dict)

    @property
    def metrics_url(self) -> str | None:
        """Every node's metrics URL, comma-separated (the ``metrics_url`` extra of a connection), or None."""
        return ",".join(url for _, url in sorted(self.metrics_urls.items())) or None

    def summary(self) -> str:
        fetched = "fetched from Maven Central" if self.fetched_jars else "jars from cache"
        shape = ("broker+controller" if self.nodes == 1
                 else f"{self.nodes} broker+controller nodes, {self.nodes} voters")
        pids = (f"pid {self.pid}" if self.nodes == 1
                else "pids " + ", ".join(f"node {n}: {p}" for n, p in sorted(self.pids.items())))
        return (
            f"Kafka {self.reported_version or self.version} (KRaft, {shape}) ready at "
            f"{self.bootstrap_servers} in {self.ready_seconds:.1f} s "
            f"(format {self.format_seconds:.1f} s, {fetched} {self.resolve_seconds:.1f} s); "
            f"{pids}, log {self.log_path}"
            + (f"; metrics at {self.metrics_url}" if self.metrics_url else "")
        )


@dataclass
class NodeStatus:
    node_id: int
    running: bool
    paused: bool
    pid: int | None
    bootstrap_server: str
    answering: bool
    log_path: str
    metrics_url: str | None = None


@dataclass
class BrokerStatus:
    running: bool
    workdir: str
    pid: int | None = None
    version: str | None = None
    bootstrap_servers: str | None = None
    answering: bool = False
    log_path: str | None = None
    detail: str = ""
    nodes: list[NodeStatus] = field(default_factory=list)


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    sasl_port: int | None = None
    pid: int | None = None
    paused: bool = False
    metrics_port: int | None = None  # the Prometheus JMX exporter's HTTP port (None: no exporter)


@dataclass
class _State:
    version: str
    host: str
    cluster_id: str
    tuning: str
    nodes: list[_Node]
    started_at: float | None = None
    overrides: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> _State:
        return cls(**{**data, "nodes": [_Node(**n) for n in data["nodes"]]})

    def node(self, node_id: int) -> _Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise LocalKafkaError(f"The cluster has no node {node_id}; its nodes are "
                              f"{', '.join(str(n.node_id) for n in self.nodes)}.")


class LocalKafka:
    """Start, inspect and stop one local KRaft cluster living in ``workdir``: ``nodes`` combined
    broker+controller nodes (ids 1..n), one cluster id, a quorum of ``nodes`` voters.

    >>> with LocalKafka("/tmp/k1") as kafka:       # doctest: +SKIP
    ...     print(kafka.bootstrap_servers)
    ...     kafka.run_tool("kafka-features", ["describe"])

    Re-starting a stopped cluster in the same ``workdir`` keeps its data and
    ports (a restart, not a new cluster); pass ``fresh=True`` to :meth:`start`
    for a new cluster. One node can be stopped, killed, paused (SIGSTOP),
    resumed and restarted by id, as a real cluster loses a node.

    A single node uses a dynamic quorum (``controller.quorum.bootstrap.servers``,
    formatted ``--standalone``) and lives directly in ``workdir``; several
    nodes use a static quorum (``controller.quorum.voters``) and each lives in
    ``workdir/node-<id>``.

    ``metrics=True`` starts every node with the Prometheus JMX exporter's Java
    agent on a free port of its own (:attr:`metrics_url`, one URL per node);
    ``False`` starts them without it; ``None`` (the default) keeps what the
    cluster in ``workdir`` was last started with (no exporter for a new one), so
    a restart, also of one node, keeps the exporter and its port.
    """

    def __init__(
        self,
        workdir: Path | str,
        *,
        version: str = DEFAULT_KAFKA_VERSION,
        nodes: int = 1,
        port: int = 0,
        controller_port: int = 0,
        host: str = "127.0.0.1",
        tuning: Tuning = "fast",
        heap: str = "512m",
        overrides: dict[str, str] | None = None,
        cache_dir: Path | str | None = None,
        start_timeout: float = 90.0,
        die_with_parent: bool = False,
        sasl_users: Mapping[str, str] | None = None,
        super_users: Iterable[str] | None = None,
        metrics: bool | None = None,
        release_version: str | None = None,
    ) -> None:
        if tuning not in ("fast", "production"):
            raise LocalKafkaError(f"Unknown tuning {tuning!r}.", remedy="Use 'fast' or 'production'.")
        if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 9:
            raise LocalKafkaError(f"nodes must be a number from 1 to 9, not {nodes!r}.",
                                  remedy="Use 1 (a single node) or 3 (a quorum that survives the loss of one).")
        if metrics is not None and not isinstance(metrics, bool):
            raise LocalKafkaError(f"metrics must be True, False or None, not {metrics!r}.")
        if nodes > 1 and (port or controller_port):
            raise LocalKafkaError("Fixed ports are for a single node.", remedy="Leave the ports at 0 (free ones).")
        self.workdir = Path(workdir).resolve()
        self.distribution = KafkaDistribution(version, cache_dir)
        self.nodes = nodes
        self.host = host
        self.port = port
        self.controller_port = controller_port
        self.tuning: Tuning = tuning
        self.heap = heap
        self.overrides = dict(overrides or {})
        self.start_timeout = start_timeout
        self.die_with_parent = die_with_parent
        #: SASL users (name -> password) of an extra SASL_PLAINTEXT listener (SCRAM-SHA-256/512 and
        #: PLAIN) with the StandardAuthorizer on. ``super_users`` (default: all of them) bypass ACLs;
        #: the PLAINTEXT listener's ANONYMOUS principal always does, so the harness keeps working.
        self.sasl_users = dict(sasl_users or {})
        self.super_users = tuple(self.sasl_users if super_users is None else super_users)
        self.metrics = metrics
        #: ``kafka-storage format --release-version`` of a new cluster (e.g. ``4.1-IV1``): a cluster whose
        #: metadata.version lags its software, as one upgraded from an older release is (None: the newest)
        self.release_version = release_version
        self.exporter = JmxExporterAgent(cache_dir=self.distribution.cache_dir)
        self._processes: dict[int, subprocess.Popen] = {}
        self._log_handles: dict[int, IO[bytes]] = {}
        #: What the last successful :meth:`start` of this object measured.
        self.last_start: StartReport | None = None

    @classmethod
    def existing(cls, workdir: Path | str, **kwargs: Any) -> LocalKafka:
        """The cluster already created in ``workdir``, with the version and node count it was started with
        (defaults when nothing was started there yet)."""
        try:
            state = json.loads((Path(workdir) / "state.json").read_text())
            kwargs = {"version": state["version"], "nodes": len(state["nodes"]), **kwargs}
        except (OSError, ValueError, KeyError, TypeError):
            kwargs.setdefault("version", os.environ.get("KIP848_KAFKA_VERSION", DEFAULT_KAFKA_VERSION))
        return cls(workdir, **kwargs)

    # -- paths -------------------------------------------------------------

    @property
    def version(self) -> str:
        return self.distribution.version

    def node_dir(self, node_id: int = 1) -> Path:
        return self.workdir if self.nodes == 1 else self.workdir / f"node-{node_id}"

    def node_data_dir(self, node_id: int = 1) -> Path:
        return self.node_dir(node_id) / "data"

    def node_log_path(self, node_id: int = 1) -> Path:
        return self.node_dir(node_id) / "logs" / "server.log"

    def node_config_path(self, node_id: int = 1) -> Path:
        return self.node_dir(node_id) / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.node_data_dir(1)

    @property
    def log_path(self) -> Path:
        return self.node_log_path(1)

    @property
    def config_path(self) -> Path:
        return self.node_config_path(1)

    @property
    def state_path(self) -> Path:
        return self.workdir / "state.json"

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.nodes + 1))

    def _started_state(self) -> _State:
        state = self._read_state()
        if state is None:
            raise BrokerNotRunning(f"No broker has been started in {self.workdir}.")
        return state

    @property
    def bootstrap_servers(self) -> str:
        """Every node's PLAINTEXT listener (a client follows the cluster when one node is down)."""
        state = self._started_state()
        return ",".join(f"{state.host}:{n.port}" for n in state.nodes)

    def node_bootstrap(self, node_id: int) -> str:
        state = self._started_state()
        return f"{state.host}:{state.node(node_id).port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        state = self._started_state()
        if not all(n.sasl_port for n in state.nodes):
            raise BrokerNotRunning(f"The broker in {self.workdir} has no SASL listener (start it with sasl_users).")
        return ",".join(f"{state.host}:{n.sasl_port}" for n in state.nodes)

    @property
    def metrics_url(self) -> str:
        """Every node's Prometheus metrics URL, comma-separated in node order (as a connection's ``metrics_url``
        extra takes them); :class:`LocalKafkaError` when the cluster runs without the exporter."""
        return ",".join(self.metrics_urls)

    @property
    def metrics_urls(self) -> list[str]:
        """One Prometheus metrics URL per node, in node order."""
        return [self.node_metrics_url(n.node_id) for n in self._started_state().nodes]

    def node_metrics_url(self, node_id: int) -> str:
        """The URL node ``node_id``'s JMX exporter serves its metrics on (Prometheus text format)."""
        state = self._started_state()
        node = state.node(node_id)
        if not node.metrics_port:
            raise LocalKafkaError(f"The cluster in {self.workdir} runs without metrics.",
                                  remedy="Start it with metrics=True (kafka start --metrics).")
        return metrics_url(state.host, node.metrics_port)

    @property
    def exporter_config_path(self) -> Path:
        return self.workdir / "jmx-exporter.yaml"

    def node_marker(self, node_id: int = 1) -> str:
        return f"-Dkip848.instance={self.node_dir(node_id)}"

    @property
    def marker(self) -> str:
        return self.node_marker(1)

    # -- lifecycle of the cluster --------------------------------------------

    def start(self, *, fresh: bool = False) -> StartReport:
        """Fetch jars if needed, format storage if new, start every node that is not running and wait
        until each answers. Raises when every node already runs."""
        status = self.status()
        if status.running:
            raise LocalKafkaError(
                f"A broker started by this launcher is already running in {self.workdir} "
                f"(pid {status.pid}, {status.bootstrap_servers}).",
                remedy="Use it, or stop it first: python -m kip848_harness kafka stop",
            )
        find_java()  # before anything else: the one-line answer to "why does nothing start?"
        resolve = self.distribution.ensure()
        if fresh:
            self._wipe()
        state = self._read_state()
        formatted = state is not None and all(
            (self.node_data_dir(n.node_id) / "meta.properties").is_file() for n in state.nodes)
        if formatted and state is not None:
            self._check_same_cluster(state)
        else:
            self._wipe()
            state = self._new_state()
        self._choose_metrics(state)
        agent_seconds, agent_fetched = 0.0, False
        if any(n.metrics_port for n in state.nodes):
            agent = self.exporter.ensure()
            agent_seconds, agent_fetched = agent.seconds, agent.fetched
        for node in state.nodes:
            if not self._running(node):
                self._check_ports_free(state.host, node)
        for node in state.nodes:
            # 0600: with SASL the file holds the PLAIN mechanism's server-side passwords
            _write_private(self.node_config_path(node.node_id), self._server_properties(state, node))
            self.node_log_path(node.node_id).parent.mkdir(parents=True, exist_ok=True)
        self._write_state(state)

        t0 = time.monotonic()
        if not formatted:
            self._format(state)
        format_seconds = time.monotonic() - t0

        t1 = time.monotonic()
        to_start = [n for n in state.nodes if not self._running(n)]
        offsets = {n.node_id: _size(self.node_log_path(n.node_id)) for n in to_start}
        try:
            for node in to_start:
                self._spawn(state, node)
            state.started_at = time.time()
            self._write_state(state)
            reported = None
            for node in to_start:
                reported = self._wait_ready(state, node, offsets[node.node_id]) or reported
            if self.sasl_users and not formatted:
                self._create_scram_users(self.bootstrap_servers)
        except BaseException:
            for node in to_start:
                self._kill_spawned(node.node_id)
            raise
        ready_seconds = time.monotonic() - t1
        first = state.nodes[0]
        self.last_start = StartReport(
            version=self.version,
            reported_version=reported,
            bootstrap_servers=self.bootstrap_servers,
            pid=first.pid or 0,
            cluster_id=state.cluster_id,
            fetched_jars=resolve.fetched or agent_fetched,
            resolve_seconds=resolve.seconds + agent_seconds,
            format_seconds=format_seconds,
            ready_seconds=ready_seconds,
            log_path=str(self.node_log_path(first.node_id)),
            nodes=len(state.nodes),
            pids={n.node_id: n.pid or 0 for n in state.nodes},
            metrics_urls={n.node_id: metrics_url(state.host, n.metrics_port) for n in state.nodes if n.metrics_port},
        )
        return self.last_start

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop every node this launcher started in ``workdir``; never signals any other process.

        Returns True if a running node was stopped, False if none was running.
        SIGTERM first (a clean shutdown writes a clean-shutdown marker), SIGKILL
        after ``timeout``. Paused nodes are resumed first so they can shut down.
        """
        state = self._read_state()
        if state is None:
            return False
        running = [n for n in state.nodes if self._running(n)]
        for node in running:
            if node.paused:
                send_signal(node.pid or 0, signal.SIGCONT)
            send_signal(node.pid or 0, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in running:
            if not self._wait_exit(node, max(deadline - time.monotonic(), 0.1)):
                send_signal(node.pid or 0, signal.SIGKILL)
                self._wait_exit(node, 10)
        for node in state.nodes:
            self._forget(node)
        self._write_state(state)
        return bool(running)

    def kill(self) -> bool:
        """SIGKILL every node (a crash, for fault tests). Data stays; ``start()`` restarts them."""
        state = self._read_state()
        if state is None:
            return False
        running = [n for n in state.nodes if self._running(n)]
        for node in running:
            send_signal(node.pid or 0, signal.SIGKILL)
        for node in running:
            self._wait_exit(node, 10)
        for node in state.nodes:
            self._forget(node)
        self._write_state(state)
        return bool(running)

    def restart(self, timeout: float = 30.0) -> StartReport:
        self.stop(timeout)
        return self.start()

    def status(self) -> BrokerStatus:
        state = self._read_state()
        if state is None:
            return BrokerStatus(False, str(self.workdir), detail="never started here")
        nodes = [
            NodeStatus(
                node_id=n.node_id,
                running=(running := self._running(n)),
                paused=running and n.paused,
                pid=n.pid if running else None,
                bootstrap_server=f"{state.host}:{n.port}",
                answering=running and not n.paused and _port_open(state.host, n.port),
                log_path=str(self.node_log_path(n.node_id)),
                metrics_url=metrics_url(state.host, n.metrics_port) if n.metrics_port else None,
            )
            for n in state.nodes
        ]
        running = all(n.running for n in nodes)
        up = [n for n in nodes if n.running]
        detail = "" if running else ("stopped" if not up else
                                     f"nodes down: {', '.join(str(n.node_id) for n in nodes if not n.running)}")
        return BrokerStatus(
            running=running,
            workdir=str(self.workdir),
            pid=nodes[0].pid,
            version=state.version,
            bootstrap_servers=",".join(n.bootstrap_server for n in nodes),
            answering=running and all(n.answering for n in nodes),
            log_path=nodes[0].log_path,
            detail=detail,
            nodes=nodes,
        )

    def __enter__(self) -> LocalKafka:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- one node ------------------------------------------------------------

    def stop_node(self, node_id: int, timeout: float = 30.0) -> bool:
        """A clean shutdown of one node (SIGTERM; SIGKILL after ``timeout``). True if it was running."""
        state = self._started_state()
        node = state.node(node_id)
        if not self._running(node):
            return False
        if node.paused:
            send_signal(node.pid or 0, signal.SIGCONT)
        send_signal(node.pid or 0, signal.SIGTERM)
        if not self._wait_exit(node, timeout):
            send_signal(node.pid or 0, signal.SIGKILL)
            self._wait_exit(node, 10)
        self._forget(node)
        self._write_state(state)
        return True

    def kill_node(self, node_id: int) -> bool:
        """SIGKILL one node (a crash). True if it was running."""
        state = self._started_state()
        node = state.node(node_id)
        if not self._running(node):
            return False
        send_signal(node.pid or 0, signal.SIGKILL)
        self._wait_exit(node, 10)
        self._forget(node)
        self._write_state(state)
        return True

    def pause_node(self, node_id: int) -> None:
        """SIGSTOP one node: it keeps its sockets open and answers nothing (a GC pause, a frozen VM)."""
        state = self._started_state()
        node = state.node(node_id)
        if not self._running(node):
            raise LocalKafkaError(f"Node {node_id} is not running; it cannot be paused.")
        send_signal(node.pid or 0, signal.SIGSTOP)
        node.paused = True
        self._write_state(state)

    def resume_node(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        state = self._started_state()
        node = state.node(node_id)
        if self._running(node):
            send_signal(node.pid or 0, signal.SIGCONT)
        node.paused = False
        self._write_state(state)

    def start_node(self, node_id: int) -> float:
        """Start one stopped node (same data, same ports) and wait until it answers; returns the seconds."""
        state = self._started_state()
        node = state.node(node_id)
        if self._running(node):
            raise LocalKafkaError(f"Node {node_id} is already running (pid {node.pid}).")
        self._choose_metrics(state)
        self._check_ports_free(state.host, node)
        t0 = time.monotonic()
        offset = _size(self.node_log_path(node_id))
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


    # -- tools and apps ----------------------------------------------------

    def tool_command(self, tool: str, args: list[str] | tuple[str, ...] = ()) -> list[str]:
        """Argument list for a Kafka CLI tool; adds ``--bootstrap-server`` for cluster tools if absent."""
        args = list(args)
        name = tool.removesuffix(".sh")
        if name in CLUSTER_TOOLS and not any(
            a in ("--bootstrap-server", "--bootstrap-controller") or a.startswith("--bootstrap-server=")
            for a in args
        ):
            args = ["--bootstrap-server", self.bootstrap_servers, *args]
        return self.distribution.tool_command(name, args)

    def run_tool(
        self,
        tool: str,
        args: list[str] | tuple[str, ...] = (),
        *,
        timeout: float = 120.0,
        check: bool = True,
    ) -> subprocess.CompletedProcess:
        """Run a Kafka CLI tool against this broker and return its completed process."""
        cmd = self.tool_command(tool, args)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and proc.returncode != 0:
            message = tail_lines(proc.stderr or proc.stdout, 3)
            raise ToolError(
                f"{tool} {' '.join(args)} exited {proc.returncode}: {message}",
                returncode=proc.returncode,
                stdout=proc.stdout,
                stderr=proc.stderr,
            )
        return proc

    def start_wordcount(
        self,
        application_id: str = "streams-wordcount",
        *,
        group_protocol: Literal["streams", "classic"] = "streams",
        properties: dict[str, str] | None = None,
    ) -> StreamsApp:
        """Start Kafka's ``WordCountDemo`` (a real Kafka Streams app) against this broker.

        It reads ``streams-plaintext-input`` and writes word counts (String key,
        Long value) to ``streams-wordcount-output``. The caller owns the returned
        app and must ``stop()`` it.
        """
        props = wordcount_properties(
            self.bootstrap_servers,
            application_id,
            group_protocol=group_protocol,
            state_dir=self.workdir / "apps" / f"{application_id}-state",
            extra=properties,
        )
        return StreamsApp.start(
            self.distribution,
            props,
            workdir=self.workdir / "apps",
            name=application_id,
            die_with_parent=self.die_with_parent,
        )

    # -- internals ---------------------------------------------------------

    def _new_state(self) -> _State:
        taken: set[int] = set()
        nodes = []
        for node_id in self.node_ids:
            port = (self.port if self.nodes == 1 and self.port else None) or _free_port(self.host, avoid=taken)
            taken.add(port)
            cport = ((self.controller_port if self.nodes == 1 and self.controller_port else None)
                     or _free_port(self.host, avoid=taken))
            if port == cport:
                raise PortInUseError(
                    f"The broker and controller ports must differ (both {port}).", remedy="Give two different ports."
                )
            taken.add(cport)
            sasl_port = None
            if self.sasl_users:
                sasl_port = _free_port(self.host, avoid=taken)
                taken.add(sasl_port)
            nodes.append(_Node(node_id, port, cport, sasl_port))
        return _State(version=self.version, host=self.host, cluster_id=_random_cluster_id(), tuning=self.tuning,
                      nodes=nodes, overrides=self.overrides)

    def _check_same_cluster(self, state: _State) -> None:
        if state.version != self.version:
            raise LocalKafkaError(
                f"{self.workdir} holds a Kafka {state.version} cluster, not {self.version}.",
                remedy="Start it with that version, or pass fresh=True (--fresh) for a new cluster.",
            )
        if len(state.nodes) != self.nodes:
            raise LocalKafkaError(
                f"{self.workdir} holds a cluster of {len(state.nodes)} node(s), not {self.nodes}.",
                remedy="Start it with that many nodes, or pass fresh=True (--fresh) for a new cluster.",
            )
        if any(n.sasl_port for n in state.nodes) and not self.sasl_users:
            raise LocalKafkaError(
                f"The cluster in {self.workdir} has a SASL listener.",
                remedy="Restart it with the same sasl_users, or pass fresh=True for a new cluster.",
            )

    @staticmethod
    def _check_port_free(host: str, port: int, role: str) -> None:
        if not _can_bind(host, port):
            raise PortInUseError(f"Cannot start the local Kafka: {role} port {host}:{port} is already in use.")

    def _check_ports_free(self, host: str, node: _Node) -> None:
        # A restart keeps the cluster's ports (the KRaft voter set records them).
        which = f"node {node.node_id} " if self.nodes > 1 else ""
        self._check_port_free(host, node.port, f"{which}broker")
        self._check_port_free(host, node.controller_port, f"{which}controller")
        if node.sasl_port:
            self._check_port_free(host, node.sasl_port, f"{which}SASL")
        if node.metrics_port:
            self._check_port_free(host, node.metrics_port, f"{which}metrics")

    def _choose_metrics(self, state: _State) -> None:
        """Give each stopped node a metrics port (``metrics=True``) or take it away (``False``); ``None`` keeps
        what the state records. A running node keeps its own: its JVM already runs with or without the agent.
        A recorded metrics port something else took meanwhile is replaced by a free one (unlike the broker
        and controller ports, no part of the cluster remembers it; only the URL changes). A node that has just
        stopped may hold its sockets for a moment after its pid is gone: only a port that stays busy moves."""
        taken = {p for n in state.nodes for p in (n.port, n.controller_port, n.sasl_port, n.metrics_port) if p}
        for node in state.nodes:
            if self._running(node):
                continue
            if self.metrics is False:
                node.metrics_port = None
            elif (self.metrics and not node.metrics_port) or (
                    node.metrics_port and _stays_busy(state.host, node.metrics_port)):
                node.metrics_port = _free_port(state.host, avoid=taken)
                taken.add(node.metrics_port)

    def _exporter_options(self, state: _State, node: _Node) -> list[str]:
        """The JVM option that starts the Prometheus JMX exporter on the node's metrics port (none without)."""
        if not node.metrics_port:
            return []
        self.exporter.ensure()  # cached after the first start: a file check
        if not self.exporter_config_path.is_file() or self.exporter_config_path.read_text() != EXPORTER_CONFIG:
            self.exporter_config_path.write_text(EXPORTER_CONFIG)
        return [self.exporter.jvm_option(state.host, node.metrics_port, self.exporter_config_path)]

    def _server_properties(self, state: _State, node: _Node) -> str:
        host = state.host
        listeners = f"PLAINTEXT://{host}:{node.port},CONTROLLER://{host}:{node.controller_port}"
        advertised = f"PLAINTEXT://{host}:{node.port}"
        protocol_map = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        if node.sasl_port:
            listeners += f",SASL_PLAINTEXT://{host}:{node.sasl_port}"
            advertised += f",SASL_PLAINTEXT://{host}:{node.sasl_port}"
            protocol_map += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        if len(state.nodes) == 1:
            quorum = {"controller.quorum.bootstrap.servers": f"{host}:{node.controller_port}"}
        else:
            quorum = {"controller.quorum.voters": ",".join(f"{n.node_id}@{host}:{n.controller_port}"
                                                           for n in state.nodes)}
        config: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            **quorum,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocol_map,
            "log.dirs": str(self.node_data_dir(node.node_id)),
            **replication_config(len(state.nodes)),
        }
        if node.sasl_port:
            config.update(self._sasl_config())
        if self.tuning == "fast":
            config.update(FAST_TUNING)
        config.update(self.overrides)
        return f"# generated by kip848_harness ({self.tuning} tuning)\n" + java_properties_text(config)

    def _sasl_config(self) -> dict[str, str]:
        plain_users = " ".join(f'user_{u}="{jaas_escape(p)}"' for u, p in self.sasl_users.items())
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(["User:ANONYMOUS", *(f"User:{u}" for u in self.super_users)]),
        }

    def _create_scram_users(self, bootstrap: str) -> None:
        """SCRAM credentials go into the cluster metadata through the Admin API (never a command line)."""
        config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": QUIET_LOGGER}
        admin = AdminClient(config)
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            # one mechanism per request: a request may not alter the same user twice
            upserts: list[UserScramCredentialAlteration] = [
                UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), password.encode())
                for user, password in self.sasl_users.items()]
            for fut in admin.alter_user_scram_credentials(upserts).values():
                fut.result(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # credentials propagate through the metadata log
            try:
                described = admin.describe_user_scram_credentials()
                if not isinstance(described, dict):  # the future of all users (no user list given)
                    described = described.result(30)
            except Exception:  # noqa: BLE001 - not yet visible: keep polling until the deadline
                described = {}
            if all(len(getattr(described.get(u), "scram_credential_infos", [])) == 2 for u in self.sasl_users):
                return
            time.sleep(0.2)
        raise BrokerStartError("SCRAM credentials did not become visible within 30 s.")

    def _format(self, state: _State) -> None:
        """Format every node's storage with the cluster id, the format tools running side by side."""
        standalone = ["--standalone"] if len(state.nodes) == 1 else []  # several nodes: the static voter set
        procs = {}
        for node in state.nodes:
            release = ["--release-version", self.release_version] if self.release_version else []
            cmd = self.distribution.tool_command(
                "kafka-storage", ["format", *standalone, *release, "-t", state.cluster_id, "-c",
                                  str(self.node_config_path(node.node_id))])
            procs[node.node_id] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                                   stdin=subprocess.DEVNULL)
        for node_id, proc in procs.items():
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise BrokerStartError(
                    f"kafka-storage format of node {node_id} failed (exit {proc.returncode}): {tail_lines(out, 4)}",
                    remedy="Check the generated config in " + str(self.node_config_path(node_id)) + ".",
                )

    def _spawn(self, state: _State, node: _Node) -> None:
        cmd = self.distribution.java_command(
            BROKER_MAIN_CLASS,
            [str(self.node_config_path(node.node_id))],
            log_config="broker",
            jvm_options=[
                f"-Xmx{self.heap}",
                "-Xms128m",
                *BROKER_JVM_OPTIONS[self.tuning],
                self.node_marker(node.node_id),
                *self._exporter_options(state, node),
            ],
        )
        self._close_log(node.node_id)
        handle = open(self.node_log_path(node.node_id), "ab")  # closed by _close_log
        self._log_handles[node.node_id] = handle
        process = subprocess.Popen(
            cmd,
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.node_dir(node.node_id),
            start_new_session=True,  # a Ctrl-C in the terminal must not kill a daemonised broker
            preexec_fn=die_with_parent if self.die_with_parent else None,
        )
        self._processes[node.node_id] = process
        node.pid, node.paused = process.pid, False

    def _wait_ready(self, state: _State, node: _Node, log_offset: int) -> str | None:
        log_path = self.node_log_path(node.node_id)
        deadline = time.monotonic() + self.start_timeout
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
                    f"{tail_lines(_errors_only(text), 3)} (log {log_path})."
                )
            if started and _answers_metadata(state.host, node.port):
                return reported
            time.sleep(0.2)
        raise BrokerStartError(
            f"Kafka node {node.node_id} did not answer on {state.host}:{node.port} within {self.start_timeout:.0f} s "
            f"(log {log_path}).",
            remedy="The machine may be overloaded; read the log, then retry with a longer start timeout.",
        )

    def _kill_spawned(self, node_id: int) -> None:
        process = self._processes.get(node_id)
        if process and process.poll() is None:
            process.kill()
            process.wait(10)
        state = self._read_state()
        if state is not None:
            self._forget(state.node(node_id))
            self._write_state(state)

    def _forget(self, node: _Node) -> None:
        """The node is down: no pid, not paused, log handle closed and process reaped."""
        node.pid, node.paused = None, False
        self._close_log(node.node_id)

    def _close_log(self, node_id: int) -> None:
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

    def _running(self, node: _Node) -> bool:
        return bool(node.pid) and self._is_ours(node.pid or 0, node.node_id)

    def _is_ours(self, pid: int, node_id: int = 1) -> bool:
        marker = self.node_marker(node_id)
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

    def _wait_exit(self, node: _Node, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        pid = node.pid or 0
        while time.monotonic() < deadline:
            process = self._processes.get(node.node_id)
            if process is not None and process.pid == pid:
                if process.poll() is not None:
                    return True
            elif not self._is_ours(pid, node.node_id):
                return True
            time.sleep(0.1)
        return False

    def _wipe(self) -> None:
        for node_id in self.node_ids:
            shutil.rmtree(self.node_data_dir(node_id), ignore_errors=True)
        self.state_path.unlink(missing_ok=True)

    def _read_state(self) -> _State | None:
        try:
            return _State.from_dict(json.loads(self.state_path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def _write_state(self, state: _State) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=1))
        tmp.replace(self.state_path)


# -- helpers ---------------------------------------------------------------


def _random_cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage random-uuid`` makes it (base64url, 22 chars), without a JVM start."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):  # Kafka avoids ids that look like CLI options
            return cid


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def _free_port(host: str, avoid: set[int] | None = None) -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in (avoid or set()):
            return port
    raise PortInUseError(f"Could not find a free port on {host}.")


def _can_bind(host: str, port: int) -> bool:
    # SO_REUSEADDR as Kafka's acceptor sets it: a port in TIME_WAIT is usable, a listening one is not.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _stays_busy(host: str, port: int, grace: float = 3.0) -> bool:
    """True when ``port`` cannot be bound for ``grace`` seconds (a process of ours exiting frees it sooner)."""
    deadline = time.monotonic() + grace
    while not _can_bind(host, port):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.1)
    return False


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _answers_metadata(host: str, port: int) -> bool:
    """True once the broker serves a Metadata request (not just an open socket)."""
    if not _port_open(host, port):
        return False
    config: dict[str, Any] = {"bootstrap.servers": f"{host}:{port}", "log_level": 0, "logger": QUIET_LOGGER}
    admin = AdminClient(config)
    try:
        md = admin.list_topics(timeout=3)
        return bool(md.brokers)
    except Exception:
        return False





def read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _errors_only(text: str) -> str:
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


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0

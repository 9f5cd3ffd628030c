"""What a local Kafka cluster records about itself and what it reports.

A cluster is identified by its work directory: ``state.json`` there records the version, the cluster id, the
tuning and each node's pid and ports (:class:`ClusterState`), so a later process (``kafka stop`` in another
terminal, a test session's next start) finds the same cluster and never signals a process it did not start.
:class:`StartReport`, :class:`BrokerStatus` and :class:`NodeStatus` are what :class:`~kip848_harness.kafka_cluster.
LocalKafka` answers to ``start()`` and ``status()``.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_kip848.kafka.cli.distribution import KafkaDistribution
from kip848_harness.errors import BrokerNotRunning, LocalKafkaError
from kip848_harness.jmx_exporter import metrics_url


@dataclass
class NodeState:
    """One node as ``state.json`` records it: its id, its ports (kept across restarts: the KRaft voter set
    records the controller ports), and the pid of its JVM while it runs."""

    node_id: int
    port: int
    controller_port: int
    sasl_port: int | None = None
    pid: int | None = None
    paused: bool = False
    metrics_port: int | None = None  # the Prometheus JMX exporter's HTTP port (None: no exporter)
    version: str | None = None  # the Kafka release this node runs when not the cluster's (a rolling upgrade)


@dataclass
class ClusterState:
    """The whole cluster as ``state.json`` records it."""

    version: str
    host: str
    cluster_id: str
    tuning: str
    nodes: list[NodeState]
    started_at: float | None = None
    overrides: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterState:  # Any: the JSON of state.json, checked by the caller
        return cls(**{**data, "nodes": [NodeState(**n) for n in data["nodes"]]})

    def node(self, node_id: int) -> NodeState:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise LocalKafkaError(f"The cluster has no node {node_id}; its nodes are "
                              f"{', '.join(str(n.node_id) for n in self.nodes)}.")


def read_state(path: Path) -> ClusterState | None:
    """The state recorded at ``path``; None when nothing (readable) was recorded there."""
    try:
        return ClusterState.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_state(path: Path, state: ClusterState) -> None:
    """Record ``state`` at ``path`` whole (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=1))
    tmp.replace(path)


def random_cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage random-uuid`` makes it (base64url, 22 chars), without a JVM start."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):  # Kafka avoids ids that look like CLI options
            return cid


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


class ClusterFiles:
    """Where a local cluster lives on disk and what its recorded state says: each node's directory, data, log and
    config; the state file; the addresses and metrics URLs of a started cluster. A single node lives directly in
    ``workdir``; several each in ``workdir/node-<id>``. The base of
    :class:`~kip848_harness.kafka_cluster.LocalKafka`, which sets the attributes below."""

    workdir: Path
    nodes: int
    distribution: KafkaDistribution

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

    def _started_state(self) -> ClusterState:
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

    def _read_state(self) -> ClusterState | None:
        return read_state(self.state_path)

    def _write_state(self, state: ClusterState) -> None:
        write_state(self.state_path, state)


__all__ = ["BrokerStatus", "ClusterFiles", "ClusterState", "NodeState", "NodeStatus", "StartReport",
           "random_cluster_id", "read_state", "write_state"]

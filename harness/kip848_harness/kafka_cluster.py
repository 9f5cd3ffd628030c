"""A real Apache Kafka cluster (KRaft, combined broker+controller nodes) for demos and tests.

This is the cluster ``make demo`` and the whole test suite run against: one
node by default, or several (``nodes=3``: a quorum of three voters, internal
topics on three replicas) where a test needs the group coordinator to move.
It is the real broker from Maven Central (:mod:`~kip848_harness.kafka_distribution`),
formatted and started the way ``kafka-storage format`` and ``kafka-server-start``
would, with two deliberate differences:

* ports are free ones picked at start (or the ones you give), so several
  brokers and a developer's own Kafka can coexist on one machine;
* the ``fast`` tuning (:mod:`~kip848_harness.kafka_tuning`) lowers the group
  coordinator's timeouts and the JVM's CPU; ``production`` keeps every default.

With ``metrics=True`` each node also serves its group-coordinator metrics in
Prometheus text format through the Prometheus JMX exporter's Java agent, on a
free port of its own (:attr:`LocalKafka.metrics_url`; see
:mod:`~kip848_harness.jmx_exporter`).

A cluster is identified by its work directory: ``state.json`` there records
each node's pid and ports and the version (:mod:`~kip848_harness.kafka_state`),
and each JVM carries ``-Dkip848.instance=<node dir>`` so ``stop`` only ever
signals the processes this launcher started (:mod:`~kip848_harness.kafka_process`).
This module is the cluster: its nodes' ports and voters, formatting, SCRAM users,
and the cluster-wide and per-node lifecycle built on those four.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION, KafkaDistribution, tail_lines
from airflow_provider_kip848.kafka.cli.java import find_java
from airflow_provider_kip848.kafka.native.quiet import QUIET_LOGGER
from kip848_harness.apps import StreamsApp, wordcount_properties
from kip848_harness.errors import BrokerStartError, LocalKafkaError, PortInUseError
from kip848_harness.jmx_exporter import JmxExporterAgent, metrics_url
from kip848_harness.kafka_distribution import resolve_jars, run_tool, tool_command
from kip848_harness.kafka_process import NodeLifecycle, NodeProcesses, free_port, log_size, port_open
from kip848_harness.kafka_state import (
    BrokerStatus,
    ClusterState,
    NodeState,
    NodeStatus,
    StartReport,
    random_cluster_id,
)
from kip848_harness.kafka_tuning import Tuning, server_properties


class LocalKafka(NodeLifecycle):
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
        node_versions: Mapping[int, str] | None = None,
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
        #: node id -> the Kafka release that node runs instead of ``version``: a cluster in the middle of a
        #: rolling broker upgrade (``version="4.3.1", node_versions={1: "4.4.0"}``: formatted and run by 4.3.1,
        #: node 1 already upgraded). The storage is formatted by ``version``'s tool, as the cluster was before
        #: its upgrade began, so its metadata.version is one every node supports.
        unknown = sorted(set(node_versions or {}) - set(range(1, nodes + 1)))
        if unknown:
            raise LocalKafkaError(f"node_versions names node(s) {unknown} of a {nodes}-node cluster.",
                                  remedy=f"Use node ids 1 to {nodes}.")
        self.node_distributions = {n: KafkaDistribution(v, cache_dir) for n, v in (node_versions or {}).items()
                                   if v != version}
        self.exporter = JmxExporterAgent(cache_dir=self.distribution.cache_dir)
        self.processes = NodeProcesses(self.node_marker, die_with_parent=die_with_parent)
        #: What the last successful :meth:`start` of this object measured.
        self.last_start: StartReport | None = None

    @classmethod
    def existing(cls, workdir: Path | str, **kwargs: Any) -> LocalKafka:  # Any: the keyword arguments of __init__
        """The cluster already created in ``workdir``, with the version and node count it was started with
        (defaults when nothing was started there yet)."""
        try:
            state = json.loads((Path(workdir) / "state.json").read_text())
            kwargs = {"version": state["version"], "nodes": len(state["nodes"]), **kwargs}
        except (OSError, ValueError, KeyError, TypeError):
            kwargs.setdefault("version", os.environ.get("KIP848_KAFKA_VERSION", DEFAULT_KAFKA_VERSION))
        return cls(workdir, **kwargs)

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
        jars = resolve_jars(self.distribution, self.exporter, with_agent=any(n.metrics_port for n in state.nodes))
        for other in self.node_distributions.values():
            more = resolve_jars(other, self.exporter, with_agent=False)
            jars = type(jars)(jars.seconds + more.seconds, jars.fetched or more.fetched)
        for node in state.nodes:
            if not self.processes.running(node):
                self._check_ports_free(state.host, node)
        for node in state.nodes:
            # 0600: with SASL the file holds the PLAIN mechanism's server-side passwords
            _write_private(self.node_config_path(node.node_id), self.server_properties(state, node))
            self.node_log_path(node.node_id).parent.mkdir(parents=True, exist_ok=True)
        self._write_state(state)

        t0 = time.monotonic()
        if not formatted:
            self._format(state)
        format_seconds = time.monotonic() - t0

        t1 = time.monotonic()
        to_start = [n for n in state.nodes if not self.processes.running(n)]
        offsets = {n.node_id: log_size(self.node_log_path(n.node_id)) for n in to_start}
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
            fetched_jars=jars.fetched,
            resolve_seconds=jars.seconds,
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
        running = [n for n in state.nodes if self.processes.running(n)]
        for node in running:
            self.processes.terminate(node)
        deadline = time.monotonic() + timeout
        for node in running:
            self.processes.wait_exit_or_kill(node, max(deadline - time.monotonic(), 0.1))
        for node in state.nodes:
            self.processes.forget(node)
        self._write_state(state)
        return bool(running)

    def kill(self) -> bool:
        """SIGKILL every node (a crash, for fault tests). Data stays; ``start()`` restarts them."""
        state = self._read_state()
        if state is None:
            return False
        running = [n for n in state.nodes if self.processes.running(n)]
        for node in running:
            self.processes.kill(node)
        for node in running:
            self.processes.wait_exit(node, 10)
        for node in state.nodes:
            self.processes.forget(node)
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
                running=(running := self.processes.running(n)),
                paused=running and n.paused,
                pid=n.pid if running else None,
                bootstrap_server=f"{state.host}:{n.port}",
                answering=running and not n.paused and port_open(state.host, n.port),
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

    # -- tools and apps ----------------------------------------------------

    def tool_command(self, tool: str, args: list[str] | tuple[str, ...] = ()) -> list[str]:
        """Argument list for a Kafka CLI tool; adds ``--bootstrap-server`` for cluster tools if absent."""
        return tool_command(self.distribution, tool, args, self.bootstrap_servers)

    def run_tool(
        self,
        tool: str,
        args: list[str] | tuple[str, ...] = (),
        *,
        timeout: float = 120.0,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run a Kafka CLI tool against this broker and return its completed process."""
        return run_tool(self.tool_command(tool, args), tool, args, timeout=timeout, check=check)

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

    def server_properties(self, state: ClusterState, node: NodeState) -> str:
        """Node ``node``'s server.properties in this cluster (:func:`~kip848_harness.kafka_tuning.server_properties`
        with this launcher's tuning, overrides and SASL users)."""
        return server_properties(state, node, data_dir=self.node_data_dir(node.node_id), tuning=self.tuning,
                                 overrides=self.overrides, sasl_users=self.sasl_users, super_users=self.super_users)

    def _new_state(self) -> ClusterState:
        taken: set[int] = set()
        nodes = []
        for node_id in self.node_ids:
            port = (self.port if self.nodes == 1 and self.port else None) or free_port(self.host, avoid=taken)
            taken.add(port)
            cport = ((self.controller_port if self.nodes == 1 and self.controller_port else None)
                     or free_port(self.host, avoid=taken))
            if port == cport:
                raise PortInUseError(
                    f"The broker and controller ports must differ (both {port}).", remedy="Give two different ports."
                )
            taken.add(cport)
            sasl_port = None
            if self.sasl_users:
                sasl_port = free_port(self.host, avoid=taken)
                taken.add(sasl_port)
            nodes.append(NodeState(node_id, port, cport, sasl_port,
                                   version=self.node_distributions[node_id].version
                                   if node_id in self.node_distributions else None))
        return ClusterState(version=self.version, host=self.host, cluster_id=random_cluster_id(), tuning=self.tuning,
                            nodes=nodes, overrides=self.overrides)

    def _check_same_cluster(self, state: ClusterState) -> None:
        if state.version != self.version:
            raise LocalKafkaError(
                f"{self.workdir} holds a Kafka {state.version} cluster, not {self.version}.",
                remedy="Start it with that version, or pass fresh=True (--fresh) for a new cluster.",
            )
        recorded = {n.node_id: n.version for n in state.nodes if n.version}
        wanted = {n: d.version for n, d in self.node_distributions.items()}
        if recorded != wanted:
            raise LocalKafkaError(
                f"{self.workdir} holds a cluster whose nodes run {recorded or 'one release'} beside {state.version}, "
                f"not {wanted or 'one release'}.",
                remedy="Start it with the same node_versions, or pass fresh=True (--fresh) for a new cluster.")
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

    def _format(self, state: ClusterState) -> None:
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

    def _wipe(self) -> None:
        for node_id in self.node_ids:
            shutil.rmtree(self.node_data_dir(node_id), ignore_errors=True)
        self.state_path.unlink(missing_ok=True)

def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


__all__ = ["LocalKafka"]

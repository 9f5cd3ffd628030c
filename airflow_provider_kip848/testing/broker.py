"""A real single-node Apache Kafka (KRaft, combined broker+controller) for demos and tests.

This is the cluster ``make demo`` and the whole test suite run against. It is
the real broker from Maven Central (see :mod:`.distribution`), formatted and
started the way ``kafka-storage format --standalone`` and
``kafka-server-start`` would, with two deliberate differences:

* ports are free ones picked at start (or the ones you give), so several
  brokers and a developer's own Kafka can coexist on one machine;
* the ``fast`` tuning lowers the group coordinator's session/heartbeat minimums
  and initial rebalance delays, so tests do not wait on production timeouts.
  The ``production`` tuning keeps every broker default (benchmarks use it).

A broker is identified by its work directory: ``state.json`` there records the
pid, ports and version, and the JVM carries ``-Dkip848.instance=<workdir>`` so
``stop`` only ever signals the process this launcher started.
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
from airflow_provider_kip848.testing.apps import StreamsApp, wordcount_properties
from airflow_provider_kip848.testing.errors import (
    BrokerNotRunning,
    BrokerStartError,
    LocalKafkaError,
    PortInUseError,
    ToolError,
)
from airflow_provider_kip848.testing.processes import die_with_parent, send_signal

BROKER_MAIN_CLASS = "kafka.Kafka"

Tuning = Literal["fast", "production"]

#: Broker settings every single-node cluster needs (replication factors of 1).
SINGLE_NODE_CONFIG: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}

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

    def summary(self) -> str:
        fetched = "fetched from Maven Central" if self.fetched_jars else "jars from cache"
        return (
            f"Kafka {self.reported_version or self.version} (KRaft, broker+controller) ready at "
            f"{self.bootstrap_servers} in {self.ready_seconds:.1f} s "
            f"(format {self.format_seconds:.1f} s, {fetched} {self.resolve_seconds:.1f} s); "
            f"pid {self.pid}, log {self.log_path}"
        )


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


@dataclass
class _State:
    version: str
    host: str
    port: int
    controller_port: int
    cluster_id: str
    tuning: str
    pid: int | None = None
    started_at: float | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    sasl_port: int | None = None


class LocalKafka:
    """Start, inspect and stop one local KRaft broker living in ``workdir``.

    >>> with LocalKafka("/tmp/k1") as kafka:       # doctest: +SKIP
    ...     print(kafka.bootstrap_servers)
    ...     kafka.run_tool("kafka-features", ["describe"])

    Re-starting a stopped broker in the same ``workdir`` keeps its data and
    ports (a broker restart, not a new cluster); pass ``fresh=True`` to
    :meth:`start` for a new cluster.
    """

    def __init__(
        self,
        workdir: Path | str,
        *,
        version: str = DEFAULT_KAFKA_VERSION,
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
    ) -> None:
        if tuning not in ("fast", "production"):
            raise LocalKafkaError(f"Unknown tuning {tuning!r}.", remedy="Use 'fast' or 'production'.")
        self.workdir = Path(workdir).resolve()
        self.distribution = KafkaDistribution(version, cache_dir)
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
        self._process: subprocess.Popen | None = None
        self._log_handle: IO[bytes] | None = None
        #: What the last successful :meth:`start` of this object measured.
        self.last_start: StartReport | None = None

    # -- paths -------------------------------------------------------------

    @property
    def version(self) -> str:
        return self.distribution.version

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "logs" / "server.log"

    @property
    def config_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def state_path(self) -> Path:
        return self.workdir / "state.json"

    @property
    def bootstrap_servers(self) -> str:
        state = self._read_state()
        if state is None or not state.port:
            raise BrokerNotRunning(f"No broker has been started in {self.workdir}.")
        return f"{state.host}:{state.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        state = self._read_state()
        if state is None or not state.sasl_port:
            raise BrokerNotRunning(f"The broker in {self.workdir} has no SASL listener (start it with sasl_users).")
        return f"{state.host}:{state.sasl_port}"

    @property
    def marker(self) -> str:
        return f"-Dkip848.instance={self.workdir}"

    # -- lifecycle ---------------------------------------------------------

    def start(self, *, fresh: bool = False) -> StartReport:
        """Fetch jars if needed, format storage if new, start the broker and wait until it answers."""
        status = self.status()
        if status.running:
            raise LocalKafkaError(
                f"A broker started by this launcher is already running in {self.workdir} "
                f"(pid {status.pid}, {status.bootstrap_servers}).",
                remedy="Use it, or stop it first: python -m airflow_provider_kip848.testing kafka stop",
            )
        find_java()  # before anything else: the one-line answer to "why does nothing start?"
        resolve = self.distribution.ensure()
        if fresh:
            self._wipe()
        state = self._read_state()
        formatted = (self.data_dir / "meta.properties").is_file() and state is not None
        if formatted and state is not None:
            if state.version != self.version:
                raise LocalKafkaError(
                    f"{self.workdir} holds a Kafka {state.version} cluster, not {self.version}.",
                    remedy="Start it with that version, or pass fresh=True (--fresh) for a new cluster.",
                )
            if state.sasl_port and not self.sasl_users:
                raise LocalKafkaError(
                    f"The cluster in {self.workdir} has a SASL listener.",
                    remedy="Restart it with the same sasl_users, or pass fresh=True for a new cluster.",
                )
            # A restart keeps the cluster: same ports (the KRaft voter set records them).
            host, port, cport = state.host, state.port, state.controller_port
            sasl_port = state.sasl_port
            cluster_id = state.cluster_id
        else:
            self._wipe()
            host = self.host
            port, cport = self._pick_ports()
            sasl_port = _free_port(host, avoid={port, cport}) if self.sasl_users else None
            cluster_id = _random_cluster_id()
        self._check_port_free(host, port, "broker")
        self._check_port_free(host, cport, "controller")
        if sasl_port:
            self._check_port_free(host, sasl_port, "SASL")

        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # 0600: with SASL the file holds the PLAIN mechanism's server-side passwords
        _write_private(self.config_path, self._server_properties(host, port, cport, sasl_port))
        state = _State(
            version=self.version,
            host=host,
            port=port,
            controller_port=cport,
            cluster_id=cluster_id,
            tuning=self.tuning,
            overrides=self.overrides,
            sasl_port=sasl_port,
        )
        self._write_state(state)

        t0 = time.monotonic()
        if not formatted:
            self._format(cluster_id)
        format_seconds = time.monotonic() - t0

        t1 = time.monotonic()
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._spawn()
        state.pid = self._process.pid  # type: ignore[union-attr]
        state.started_at = time.time()
        self._write_state(state)
        try:
            reported = self._wait_ready(host, port, log_offset)
            if self.sasl_users:
                self._create_scram_users(f"{host}:{port}")
        except BaseException:
            self._kill_spawned()
            raise
        ready_seconds = time.monotonic() - t1
        self.last_start = StartReport(
            version=self.version,
            reported_version=reported,
            bootstrap_servers=f"{host}:{port}",
            pid=state.pid,
            cluster_id=cluster_id,
            fetched_jars=resolve.fetched,
            resolve_seconds=resolve.seconds,
            format_seconds=format_seconds,
            ready_seconds=ready_seconds,
            log_path=str(self.log_path),
        )
        return self.last_start

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the broker this launcher started in ``workdir``; never signals any other process.

        Returns True if a running broker was stopped, False if none was running.
        SIGTERM first (a clean shutdown writes a clean-shutdown marker), SIGKILL
        after ``timeout``.
        """
        state = self._read_state()
        pid = state.pid if state else None
        if not pid or not self._is_ours(pid):
            self._clear_pid(state)
            return False
        send_signal(pid, signal.SIGTERM)
        if not self._wait_exit(pid, timeout):
            send_signal(pid, signal.SIGKILL)
            self._wait_exit(pid, 10)
        self._clear_pid(state)
        self._close_log()
        return True

    def kill(self) -> bool:
        """SIGKILL the broker (a crash, for fault tests). Data stays; ``start()`` restarts it."""
        state = self._read_state()
        pid = state.pid if state else None
        if not pid or not self._is_ours(pid):
            return False
        send_signal(pid, signal.SIGKILL)
        self._wait_exit(pid, 10)
        self._clear_pid(state)
        self._close_log()
        return True

    def restart(self, timeout: float = 30.0) -> StartReport:
        self.stop(timeout)
        return self.start()

    def status(self) -> BrokerStatus:
        state = self._read_state()
        if state is None:
            return BrokerStatus(False, str(self.workdir), detail="never started here")
        running = bool(state.pid) and self._is_ours(state.pid)  # type: ignore[arg-type]
        bootstrap = f"{state.host}:{state.port}"
        return BrokerStatus(
            running=running,
            workdir=str(self.workdir),
            pid=state.pid if running else None,
            version=state.version,
            bootstrap_servers=bootstrap,
            answering=running and _port_open(state.host, state.port),
            log_path=str(self.log_path),
            detail="" if running else "stopped",
        )

    def __enter__(self) -> LocalKafka:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

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

    def _pick_ports(self) -> tuple[int, int]:
        port = self.port or _free_port(self.host)
        cport = self.controller_port or _free_port(self.host, avoid={port})
        if port == cport:
            raise PortInUseError(
                f"The broker and controller ports must differ (both {port}).", remedy="Give two different ports."
            )
        return port, cport

    @staticmethod
    def _check_port_free(host: str, port: int, role: str) -> None:
        if not _can_bind(host, port):
            raise PortInUseError(f"Cannot start the local Kafka: {role} port {host}:{port} is already in use.")

    def _server_properties(self, host: str, port: int, cport: int, sasl_port: int | None = None) -> str:
        listeners = f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}"
        advertised = f"PLAINTEXT://{host}:{port}"
        protocol_map = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        if sasl_port:
            listeners += f",SASL_PLAINTEXT://{host}:{sasl_port}"
            advertised += f",SASL_PLAINTEXT://{host}:{sasl_port}"
            protocol_map += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        config: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{host}:{cport}",
            "listeners": listeners,
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocol_map,
            "log.dirs": str(self.data_dir),
            **SINGLE_NODE_CONFIG,
        }
        if sasl_port:
            config.update(self._sasl_config())
        if self.tuning == "fast":
            config.update(FAST_TUNING)
        config.update(self.overrides)
        return f"# generated by airflow_provider_kip848.testing ({self.tuning} tuning)\n" + java_properties_text(config)

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

    def _format(self, cluster_id: str) -> None:
        cmd = self.distribution.tool_command(
            "kafka-storage", ["format", "--standalone", "-t", cluster_id, "-c", str(self.config_path)]
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise BrokerStartError(
                f"kafka-storage format failed (exit {proc.returncode}): {tail_lines(proc.stderr + proc.stdout, 4)}",
                remedy="Check the generated config in " + str(self.config_path) + ".",
            )

    def _spawn(self) -> None:
        cmd = self.distribution.java_command(
            BROKER_MAIN_CLASS,
            [str(self.config_path)],
            log_config="broker",
            jvm_options=[
                f"-Xmx{self.heap}",
                "-Xms128m",
                "-XX:+UseG1GC",
                "-XX:MaxGCPauseMillis=20",
                self.marker,
            ],
        )
        self._log_handle = open(self.log_path, "ab")
        self._process = subprocess.Popen(
            cmd,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            start_new_session=True,  # a Ctrl-C in the terminal must not kill a daemonised broker
            preexec_fn=die_with_parent if self.die_with_parent else None,
        )

    def _wait_ready(self, host: str, port: int, log_offset: int) -> str | None:
        deadline = time.monotonic() + self.start_timeout
        reported: str | None = None
        started = False
        while time.monotonic() < deadline:
            text = _read_from(self.log_path, log_offset)
            if reported is None and (m := _VERSION_RE.search(text)):
                reported = m.group(1)
            started = started or bool(_STARTED_RE.search(text))
            code = self._process.poll() if self._process else None
            if code is not None:
                bind = _BIND_FAIL_RE.search(text)
                if bind:
                    raise PortInUseError(f"Kafka could not bind its port: {bind.group(0)} (log {self.log_path}).")
                raise BrokerStartError(
                    f"The Kafka broker exited with code {code} during start-up: "
                    f"{tail_lines(_errors_only(text), 3)} (log {self.log_path})."
                )
            if started and _answers_metadata(host, port):
                return reported
            time.sleep(0.2)
        raise BrokerStartError(
            f"The Kafka broker did not answer on {host}:{port} within {self.start_timeout:.0f} s "
            f"(log {self.log_path}).",
            remedy="The machine may be overloaded; read the log, then retry with a longer start timeout.",
        )

    def _kill_spawned(self) -> None:
        if self._process and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)
        self._clear_pid(self._read_state())
        self._close_log()

    def _close_log(self) -> None:
        if self._log_handle:
            self._log_handle.close()
            self._log_handle = None
        if self._process:
            try:
                self._process.wait(0)  # reap, so no zombie is left behind
            except subprocess.TimeoutExpired:
                pass

    def _is_ours(self, pid: int) -> bool:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            if sys.platform.startswith("linux"):
                return False
            proc = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True)
            return self.marker in proc.stdout.split()
        return self.marker.encode() in cmdline

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.pid == pid:
                if self._process.poll() is not None:
                    return True
            elif not self._is_ours(pid):
                return True
            time.sleep(0.1)
        return False

    def _wipe(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.state_path.unlink(missing_ok=True)

    def _read_state(self) -> _State | None:
        try:
            return _State(**json.loads(self.state_path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def _write_state(self, state: _State) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=1))
        tmp.replace(self.state_path)

    def _clear_pid(self, state: _State | None) -> None:
        if state is not None and state.pid is not None:
            state.pid = None
            self._write_state(state)


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





def _read_from(path: Path, offset: int) -> str:
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

"""The embedded demo's application controllers: Kafka's WordCountDemo, and a consumer application of
real confluent-kafka instances, on the local broker.

It implements :class:`airflow_provider_kip848.controllers.ApplicationController`
(stop every instance, start with a ``group.protocol``) with processes on this
machine; the example DAG's default, the demo and the end-to-end tests use it.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_kip848.testing.apps import StreamsApp, wordcount_properties
from airflow_provider_kip848.testing.broker import LocalKafka
from airflow_provider_kip848.testing.clients import ConsumerProcess


def stop_processes(running_pids: Callable[[], list[int]], stop_mode: str, grace_s: float = 60.0) -> dict[str, Any]:
    """Signal every running instance (SIGTERM for ``graceful``, SIGKILL for ``kill``), wait up to ``grace_s``
    for them to go, then SIGKILL what is left; says what it did, and ``instances_gone`` when no instance's
    process is left (looked at after the last signal: the confirmation the empty wait acts on at once)."""
    pids = running_pids()
    sig = signal.SIGKILL if stop_mode == "kill" else signal.SIGTERM
    for pid in pids:
        os.kill(pid, sig)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and running_pids():
        time.sleep(0.05)
    left = running_pids()
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while left and time.monotonic() < deadline and running_pids():
        time.sleep(0.05)
    return {"stopped_pids": pids, "signal": sig.name, "forced": left, "instances_gone": not running_pids()}


class LocalWordCountController:
    """Stops and starts ``WordCountDemo`` instances of one application id on a local broker.

    ``stop`` finds running instances by their pid files (written at start) and
    checks each process's command line before signalling it. ``stop_mode``
    ``graceful`` sends SIGTERM: a classic Streams app closes without leaving
    its group (Kafka Streams' default), so its members stay until the session
    times out, exactly as in production, and the DAG empties the group.
    ``kill`` sends SIGKILL (a crash). ``confirms_gone`` False: ``stop`` does not report ``instances_gone``
    (a controller that cannot confirm its instances are gone; the empty wait then gives members
    ``remove_members_after`` to leave).
    """

    def __init__(self, kafka_workdir: str, application_id: str, stop_mode: str = "graceful",
                 properties: dict[str, str] | None = None,
                 protocol_properties: dict[str, dict[str, str]] | None = None, confirms_gone: bool = True) -> None:
        self.kafka = LocalKafka.existing(kafka_workdir)
        self.application_id = application_id
        self.stop_mode = stop_mode
        self.confirms_gone = confirms_gone
        self.properties = dict(properties or {})
        #: extra properties for one protocol only (e.g. a setting the streams protocol rejects, to rehearse
        #: a failed switch and the way back)
        self.protocol_properties = {k: dict(v) for k, v in (protocol_properties or {}).items()}

    @property
    def apps_dir(self) -> Path:
        return self.kafka.workdir / "apps"

    def _pid_files(self) -> list[Path]:
        return sorted(self.apps_dir.glob(f"{self.application_id}*.pid"))

    def running_pids(self) -> list[int]:
        pids = []
        for pid_file in self._pid_files():
            try:
                pid = int(pid_file.read_text())
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue
            if f"-Dkip848.app={self.apps_dir / pid_file.stem}".encode() in cmdline:
                pids.append(pid)
        return pids

    def stop(self) -> dict[str, Any]:
        stopped = stop_processes(self.running_pids, self.stop_mode)
        if not self.confirms_gone:
            stopped.pop("instances_gone")
        return {"application_id": self.application_id, **stopped}

    def start(self, group_protocol: str) -> dict[str, Any]:
        running = self.running_pids()
        if running:  # idempotent: a rerun after a failure must not start a second copy
            return {"application_id": self.application_id, "already_running": running,
                    "group_protocol": group_protocol}
        name = f"{self.application_id}-{group_protocol}-{int(time.time())}"
        props = wordcount_properties(self.kafka.bootstrap_servers, self.application_id,
                                     group_protocol=group_protocol,
                                     state_dir=self.apps_dir / f"{self.application_id}-state",
                                     extra={**self.properties, **self.protocol_properties.get(group_protocol, {})})
        app = StreamsApp.start(self.kafka.distribution, props, workdir=self.apps_dir, name=name)
        return {"application_id": self.application_id, "pid": app.process.pid, "group_protocol": group_protocol,
                "log": str(app.log_path)}


class LocalConsumerAppController:
    """Stops and starts the instances of one consumer application (``testing.consumer_app``, real
    confluent-kafka consumers) on a local broker: the example offline consumer migration's default.

    Each instance is a process whose pid file sits in ``workdir``; ``stop`` checks each process's
    command line (the app module and ``--group``) before signalling it. ``stop_mode`` ``graceful``
    sends SIGTERM (the consumer closes and leaves its group), ``kill`` SIGKILL (a crash: the member
    stays until its session times out). ``classic_assignor`` is the classic protocol's
    ``partition.assignment.strategy``; ``remote_assignor`` the consumer protocol's
    ``group.remote.assignor``; ``properties`` adds client properties per protocol (e.g. a setting the
    new protocol rejects, to rehearse a failed start and the way back).
    """

    APP = "airflow_provider_kip848.testing.consumer_app"

    def __init__(self, workdir: str, bootstrap_servers: str, group_id: str, topics: list[str], instances: int = 2,
                 classic_assignor: str | None = None, remote_assignor: str | None = None,
                 output_topic: str | None = None, stop_mode: str = "graceful",
                 properties: dict[str, dict[str, str]] | None = None) -> None:
        if stop_mode not in ("graceful", "kill"):
            raise ValueError(f"stop_mode must be 'graceful' or 'kill', not {stop_mode!r}")
        self.workdir = Path(workdir)
        self.bootstrap_servers, self.group_id, self.topics = bootstrap_servers, group_id, list(topics)
        self.instances, self.stop_mode = int(instances), stop_mode
        self.classic_assignor, self.remote_assignor, self.output_topic = classic_assignor, remote_assignor, output_topic
        self.properties = {k: dict(v) for k, v in (properties or {}).items()}

    def _pid_file(self, i: int) -> Path:
        return self.workdir / f"{self.group_id}.{i}.pid"

    def running_pids(self) -> list[int]:
        pids = []
        for i in range(self.instances):
            try:
                pid = int(self._pid_file(i).read_text())
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError):
                continue
            if self.APP.encode() in args and self.group_id.encode() in args:
                pids.append(pid)
        return pids

    def stop(self) -> dict[str, Any]:
        return {"group_id": self.group_id, **stop_processes(self.running_pids, self.stop_mode)}

    def _running_pid(self, i: int) -> int | None:
        try:
            pid = int(self._pid_file(i).read_text())
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        return pid if self.APP.encode() in args and self.group_id.encode() in args else None

    def _still_running(self, i: int, pid: int) -> list[int]:
        return [pid] if self._running_pid(i) == pid else []

    def _start_instance(self, i: int, group_protocol: str) -> int:
        self.workdir.mkdir(parents=True, exist_ok=True)
        app = ConsumerProcess.start(
            self.bootstrap_servers, self.group_id, self.topics, protocol=group_protocol, client_id=f"app-{i}",
            assignor=self.classic_assignor if group_protocol == "classic" else self.remote_assignor,
            output_topic=self.output_topic, properties=self.properties.get(group_protocol),
            log_file=str(self.workdir / f"{self.group_id}.{i}.{group_protocol}.log"))
        self._pid_file(i).write_text(str(app.process.pid))
        return app.process.pid

    def start(self, group_protocol: str) -> dict[str, Any]:
        running = self.running_pids()
        if running:  # idempotent: a rerun after a failure must not start a second copy
            return {"group_id": self.group_id, "already_running": running, "group_protocol": group_protocol}
        started = [self._start_instance(i, group_protocol) for i in range(self.instances)]
        return {"group_id": self.group_id, "pids": started, "group_protocol": group_protocol,
                "instances": self.instances}

    def roll(self, group_protocol: str) -> dict[str, Any]:
        """A rolling restart: each instance in turn is stopped (``stop_mode``) and started again with
        ``group.protocol``, while the others keep running (what a Kubernetes rolling update does)."""
        rolled = []
        for i in range(self.instances):
            pid = self._running_pid(i)
            if pid is not None:
                stop_processes(functools.partial(self._still_running, i, pid), self.stop_mode)
            rolled.append({"instance": i, "stopped": pid, "started": self._start_instance(i, group_protocol)})
        return {"group_id": self.group_id, "rolled": rolled, "group_protocol": group_protocol}


class LocalConsumerFleetAppController:
    """One application of a test fleet: several consumer groups (each its own
    :class:`LocalConsumerAppController`, ``instances`` processes per group) stopped, started and rolled
    together, as one deployment running several consumers would be.

    ``groups`` maps each group id to its topics; ``properties`` adds client properties per protocol
    (e.g. a setting the consumer protocol rejects, to plant a failure)."""

    def __init__(self, workdir: str, bootstrap_servers: str, groups: dict[str, list[str]], instances: int = 1,
                 classic_assignor: str | None = None, remote_assignor: str | None = None,
                 stop_mode: str = "graceful", properties: dict[str, dict[str, str]] | None = None) -> None:
        self.parts = [LocalConsumerAppController(workdir, bootstrap_servers, group, list(topics), instances=instances,
                                                 classic_assignor=classic_assignor, remote_assignor=remote_assignor,
                                                 stop_mode=stop_mode, properties=properties)
                      for group, topics in sorted(groups.items())]

    def running_pids(self) -> list[int]:
        return [pid for part in self.parts for pid in part.running_pids()]

    def stop(self) -> dict[str, Any]:
        parts = [part.stop() for part in self.parts]
        return {"groups": parts, "instances_gone": all(p.get("instances_gone") for p in parts)}

    def start(self, group_protocol: str) -> dict[str, Any]:
        return {"groups": [part.start(group_protocol) for part in self.parts]}

    def roll(self, group_protocol: str) -> dict[str, Any]:
        return {"groups": [part.roll(group_protocol) for part in self.parts]}

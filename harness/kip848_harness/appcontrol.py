"""The embedded demo's application controllers: Kafka's WordCountDemo, and a consumer application of
real confluent-kafka instances, on the local broker.

They implement :class:`airflow_provider_kip848.controllers.ApplicationController` with processes on this
machine, and are configured like any controller: kinds ``local-wordcount``, ``local-consumer-app`` and
``local-consumer-fleet-app`` (entry points of this distribution), named in a registry
(``[kip848] controllers``) by the demo and the tests. Their ``status`` finds *every* process of the
application on the machine (by its command line, not only the pid files of the processes they started), so
an instance started some other way is seen, and never forced out of its group as if it were gone.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from confluent_kafka import libversion

from airflow_provider_kip848.controllers import ApplicationController, ApplicationStatus, Arg, ClientConfig, Instance
from kip848_harness.apps import StreamsApp, describe_topology, wordcount_properties
from kip848_harness.clients import ConsumerProcess
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.processes import find_processes, wait_visible

_STOP_MODE = Arg("string", run=True, enum=("graceful", "kill"),
                 description="graceful: SIGTERM (a classic Streams app keeps its members until the session times "
                             "out); kill: SIGKILL (a crash)")
_REPORTS_STATUS = Arg("boolean", description="False: status() cannot tell (a platform without a status), so the "
                                             "empty wait falls back to the members' session timeout")


def stop_processes(running_pids: Callable[[], list[int]], stop_mode: str, grace_s: float = 60.0) -> dict[str, Any]:
    """Signal every running instance (SIGTERM for ``graceful``, SIGKILL for ``kill``), wait up to ``grace_s``
    for them to go, then SIGKILL what is left; says what it did."""
    pids = running_pids()
    sig = signal.SIGKILL if stop_mode == "kill" else signal.SIGTERM
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and running_pids():
        time.sleep(0.05)
    left = running_pids()
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while left and time.monotonic() < deadline and running_pids():
        time.sleep(0.05)
    return {"stopped_pids": pids, "signal": sig.name, "forced": left}


def _arg(argv: list[bytes], flag: str) -> str | None:
    """The value after ``flag`` in a command line."""
    try:
        return argv[argv.index(flag.encode()) + 1].decode()
    except (ValueError, IndexError):
        return None


class LocalWordCountController(ApplicationController):
    """Stops and starts ``WordCountDemo`` instances of one application id on a local broker.

    ``stop_mode`` ``graceful`` sends SIGTERM: a classic Streams app closes without leaving its group (Kafka
    Streams' default), so its members stay until the session times out, exactly as in production, and the DAG
    empties the group. ``kill`` sends SIGKILL (a crash). ``reports_status`` False: a platform that cannot say
    which instances exist (``status`` is unknown; the empty wait then leaves the members to their session
    timeout).
    """

    schema: ClassVar[Mapping[str, Arg]] = {
        "kafka_workdir": Arg("string", required=True, description="the local broker's work dir"),
        "application_id": Arg("string", required=True),
        "stop_mode": _STOP_MODE,
        "properties": Arg("object", description="extra client properties for every start"),
        "protocol_properties": Arg("object", description="extra client properties per group.protocol"),
        "reports_status": _REPORTS_STATUS,
    }

    def __init__(self, kafka_workdir: str, application_id: str, stop_mode: str = "graceful",
                 properties: dict[str, str] | None = None,
                 protocol_properties: dict[str, dict[str, str]] | None = None, reports_status: bool = True) -> None:
        self.kafka = LocalKafka.existing(kafka_workdir)
        self.application_id = application_id
        self.stop_mode = stop_mode
        self.reports_status = reports_status
        self.properties = dict(properties or {})
        #: extra properties for one protocol only (e.g. a setting the streams protocol rejects, to rehearse
        #: a failed switch and the way back)
        self.protocol_properties = {k: dict(v) for k, v in (protocol_properties or {}).items()}

    @property
    def apps_dir(self) -> Path:
        return self.kafka.workdir / "apps"

    def _processes(self) -> list[tuple[int, list[bytes]]]:
        marker = f"-Dkip848.app={self.apps_dir / self.application_id}-".encode()
        return find_processes(lambda argv: any(a.startswith(marker) for a in argv))

    def running_pids(self) -> list[int]:
        return [pid for pid, _ in self._processes()]

    def stop(self) -> dict[str, Any]:
        return {"application_id": self.application_id, **stop_processes(self.running_pids, self.stop_mode)}

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
        wait_visible(app.process.pid, b"-Dkip848.app=")  # a status right after the start must list it
        return {"application_id": self.application_id, "pid": app.process.pid, "group_protocol": group_protocol,
                "log": str(app.log_path)}

    def status(self) -> ApplicationStatus:
        if not self.reports_status:
            return ApplicationStatus.unknown("this platform does not report its instances (reports_status false)")
        instances = []
        for pid, argv in self._processes():
            marker = next(a for a in argv if a.startswith(b"-Dkip848.app=")).decode()
            instances.append(Instance(name=Path(marker.partition("=")[2]).name, running=True, ready=True,
                                      incarnation=str(pid), state="running", host=socket.gethostname()))
        return ApplicationStatus(known=True, instances=tuple(instances),
                                 source=f"WordCountDemo processes of {self.application_id} on {socket.gethostname()}")

    def config(self, group_protocol: str | None = None) -> ClientConfig | None:
        protocol = group_protocol or "classic"
        props = wordcount_properties(self.kafka.bootstrap_servers, self.application_id, group_protocol=protocol,
                                     state_dir=self.apps_dir / f"{self.application_id}-state",
                                     extra={**self.properties, **self.protocol_properties.get(protocol, {})})
        return ClientConfig(properties=props, source=f"the demo's WordCountDemo properties on {protocol}",
                            client="java", client_version=self.kafka.version)

    def topology(self) -> str | None:
        """WordCountDemo's ``Topology#describe()``, built by this release's Kafka Streams from the demo's own
        topology method (:func:`~kip848_harness.apps.describe_topology`)."""
        return describe_topology(self.kafka.distribution, self.apps_dir)

    def actions(self, group_protocol: str | None) -> Mapping[str, str]:
        signal_name = "SIGKILL" if self.stop_mode == "kill" else "SIGTERM"
        return {"stop": f"{signal_name} to every WordCountDemo process of {self.application_id} on this machine",
                "start": f"launch WordCountDemo with group.protocol={group_protocol or '<protocol>'}",
                "status": "list the WordCountDemo processes of the application id (/proc)"}


class LocalConsumerAppController(ApplicationController):
    """Stops and starts the instances of one consumer application (``kip848_harness.consumer_app``, real
    confluent-kafka consumers) on a local broker: the example offline consumer migration's demo.

    Instances are found by their command line (the app module and ``--group``). ``stop_mode`` ``graceful``
    sends SIGTERM (the consumer closes and leaves its group), ``kill`` SIGKILL (a crash: the member stays
    until its session times out). ``classic_assignor`` is the classic protocol's
    ``partition.assignment.strategy``; ``remote_assignor`` the consumer protocol's ``group.remote.assignor``;
    ``properties`` adds client properties per protocol (e.g. a setting the new protocol rejects, to rehearse
    a failed start and the way back); ``static`` gives each instance a ``group.instance.id``.
    """

    APP = "kip848_harness.consumer_app"
    schema: ClassVar[Mapping[str, Arg]] = {
        "workdir": Arg("string", required=True), "bootstrap_servers": Arg("string", required=True),
        "group_id": Arg("string", required=True), "topics": Arg("array", required=True),
        "instances": Arg("integer", minimum=1), "classic_assignor": Arg("string"),
        "remote_assignor": Arg("string"), "output_topic": Arg("string"), "stop_mode": _STOP_MODE,
        "properties": Arg("object", description="extra client properties per group.protocol"),
        "static": Arg("boolean", description="static members (group.instance.id per instance)"),
        "reports_status": _REPORTS_STATUS,
        "instance_args": Arg("object", description="extra consumer_app arguments per instance index ('1': "
                                                   "['--exit-after-s', '2'] crashes instance 1 two seconds after "
                                                   "each start; '1:consumer': only when started on that protocol)"),
    }

    def __init__(self, workdir: str, bootstrap_servers: str, group_id: str, topics: list[str], instances: int = 2,
                 classic_assignor: str | None = None, remote_assignor: str | None = None,
                 output_topic: str | None = None, stop_mode: str = "graceful",
                 properties: dict[str, dict[str, str]] | None = None, static: bool = False,
                 reports_status: bool = True, instance_args: dict[str, list[str]] | None = None) -> None:
        if stop_mode not in ("graceful", "kill"):
            raise ValueError(f"stop_mode must be 'graceful' or 'kill', not {stop_mode!r}")
        self.workdir = Path(workdir)
        self.bootstrap_servers, self.group_id, self.topics = bootstrap_servers, group_id, list(topics)
        self.instances, self.stop_mode = int(instances), stop_mode
        self.classic_assignor, self.remote_assignor, self.output_topic = classic_assignor, remote_assignor, output_topic
        self.properties = {k: dict(v) for k, v in (properties or {}).items()}
        self.static, self.reports_status = static, reports_status
        self.instance_args = {str(k): [str(a) for a in v] for k, v in (instance_args or {}).items()}

    def _processes(self) -> list[tuple[int, list[bytes]]]:
        """This application's instances: the app module with this group *on this cluster*. A group of the same
        name on another cluster (another copy of the test suite, another demo) is another application; taking
        its processes for ours would stop them, or find the application already running and start nothing."""
        app = self.APP.encode()
        return find_processes(lambda argv: app in argv and _arg(argv, "--group") == self.group_id
                              and _arg(argv, "--bootstrap-servers") == self.bootstrap_servers)

    def running_pids(self) -> list[int]:
        return [pid for pid, _ in self._processes()]

    def stop(self) -> dict[str, Any]:
        return {"group_id": self.group_id, **stop_processes(self.running_pids, self.stop_mode)}

    def _instance_pid(self, i: int) -> int | None:
        client = f"app-{i}"
        return next((pid for pid, argv in self._processes() if _arg(argv, "--client-id") == client), None)

    def _still_running(self, i: int, pid: int) -> list[int]:
        return [pid] if self._instance_pid(i) == pid else []

    def _start_instance(self, i: int, group_protocol: str) -> int:
        self.workdir.mkdir(parents=True, exist_ok=True)
        app = ConsumerProcess.start(
            self.bootstrap_servers, self.group_id, self.topics, protocol=group_protocol, client_id=f"app-{i}",
            instance_id=f"{self.group_id}-{i}" if self.static else None,
            assignor=self.classic_assignor if group_protocol == "classic" else self.remote_assignor,
            output_topic=self.output_topic, properties=self.properties.get(group_protocol),
            log_file=str(self.workdir / f"{self.group_id}.{i}.{group_protocol}.log"),
            extra_args=self.instance_args.get(f"{i}:{group_protocol}", self.instance_args.get(str(i))))
        wait_visible(app.process.pid, self.APP.encode())  # a status right after the start must list it
        return app.process.pid

    def start(self, group_protocol: str) -> dict[str, Any]:
        running = self.running_pids()
        if running:  # idempotent: a rerun after a failure must not start a second copy
            return {"group_id": self.group_id, "already_running": running, "group_protocol": group_protocol}
        started = [self._start_instance(i, group_protocol) for i in range(self.instances)]
        return {"group_id": self.group_id, "pids": started, "group_protocol": group_protocol,
                "instances": self.instances}

    def can_roll(self) -> bool:
        return True

    def roll(self, group_protocol: str) -> dict[str, Any]:
        """A rolling restart: each instance in turn is stopped (``stop_mode``) and started again with
        ``group.protocol``, while the others keep running (what a Kubernetes rolling update does)."""
        rolled = []
        for i in range(self.instances):
            pid = self._instance_pid(i)
            if pid is not None:
                stop_processes(functools.partial(self._still_running, i, pid), self.stop_mode)
            rolled.append({"instance": i, "stopped": pid, "started": self._start_instance(i, group_protocol)})
        return {"group_id": self.group_id, "rolled": rolled, "group_protocol": group_protocol}

    def status(self) -> ApplicationStatus:
        if not self.reports_status:
            return ApplicationStatus.unknown("this platform does not report its instances (reports_status false)")
        instances = tuple(
            Instance(name=f"{self.group_id}/{_arg(argv, '--client-id') or pid}", running=True, ready=True,
                     incarnation=str(pid), state=f"running on {_arg(argv, '--protocol')}",
                     client_id=_arg(argv, "--client-id"), group_instance_id=_arg(argv, "--instance-id"))
            for pid, argv in self._processes())
        return ApplicationStatus(known=True, instances=instances,
                                 source=f"consumer_app processes of {self.group_id} on {socket.gethostname()}")

    def config(self, group_protocol: str | None = None) -> ClientConfig | None:
        protocols = {_arg(argv, "--protocol") for _, argv in self._processes()}
        protocol = group_protocol or (protocols.pop() if len(protocols) == 1 else "classic")
        props = {"group.protocol": str(protocol), "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
        if protocol == "classic" and self.classic_assignor:
            props["partition.assignment.strategy"] = self.classic_assignor
        if protocol == "consumer" and self.remote_assignor:
            props["group.remote.assignor"] = self.remote_assignor
        props.update(self.properties.get(str(protocol), {}))
        return ClientConfig(properties=props, source=f"the demo's settings for {self.group_id} on {protocol}",
                            client="librdkafka", client_version=libversion()[0])

    def actions(self, group_protocol: str | None) -> Mapping[str, str]:
        signal_name = "SIGKILL" if self.stop_mode == "kill" else "SIGTERM"
        return {"stop": f"{signal_name} to every consumer_app process of group {self.group_id} on "
                         f"{self.bootstrap_servers} on this machine",
                "start": f"launch {self.instances} consumer_app instance(s) with "
                         f"group.protocol={group_protocol or '<protocol>'}",
                "roll": f"restart the {self.instances} instance(s) one at a time with "
                        f"group.protocol={group_protocol or '<protocol>'}",
                "status": "list the consumer_app processes of the group (/proc)"}


class LocalConsumerFleetAppController(ApplicationController):
    """One application of a test fleet: several consumer groups (each its own
    :class:`LocalConsumerAppController`, ``instances`` processes per group) stopped, started and rolled
    together, as one deployment running several consumers would be.

    ``groups`` maps each group id to its topics; ``properties`` adds client properties per protocol
    (e.g. a setting the consumer protocol rejects, to plant a failure)."""

    schema: ClassVar[Mapping[str, Arg]] = {
        "workdir": Arg("string", required=True), "bootstrap_servers": Arg("string", required=True),
        "groups": Arg("object", required=True), "instances": Arg("integer", minimum=1),
        "classic_assignor": Arg("string"), "remote_assignor": Arg("string"), "stop_mode": _STOP_MODE,
        "properties": Arg("object"),
    }

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
        return {"groups": [part.stop() for part in self.parts]}

    def start(self, group_protocol: str) -> dict[str, Any]:
        return {"groups": [part.start(group_protocol) for part in self.parts]}

    def can_roll(self) -> bool:
        return True

    def roll(self, group_protocol: str) -> dict[str, Any]:
        return {"groups": [part.roll(group_protocol) for part in self.parts]}

    def config(self, group_protocol: str | None = None) -> ClientConfig | None:
        """Every group's consumers run with the same settings: the first one's."""
        return self.parts[0].config(group_protocol) if self.parts else None

    def status(self) -> ApplicationStatus:
        parts = [part.status() for part in self.parts]
        return ApplicationStatus(known=True, instances=tuple(i for p in parts for i in p.instances),
                                 source="; ".join(p.source for p in parts))

    def actions(self, group_protocol: str | None) -> Mapping[str, str]:
        groups = ", ".join(p.group_id for p in self.parts)
        return {"stop": f"stop the consumer_app processes of {groups}",
                "start": f"start them with group.protocol={group_protocol or '<protocol>'}",
                "roll": f"restart them one at a time with group.protocol={group_protocol or '<protocol>'}",
                "status": f"list the consumer_app processes of {groups} (/proc)"}

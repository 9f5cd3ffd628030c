"""The ``command`` controller against the real thing: consumer applications under supervisord, driven by
``supervisorctl`` on the worker and over SSH (Airflow's SSHHook to the session's OpenSSH server), with their
group on the session's broker.

* The operator's recipe (``kip848_harness.supervised``): a start writes the protocol file and starts the program
  group, the status is supervisorctl's own, the config is the files the application reads, a stop stops the
  group and is confirmed by the status, a roll restarts one process at a time. What the broker shows (the
  members, their protocol) and what supervisord did (its log, the pids) is checked, not only what the
  controller says.
* Bad input: each failure is a ControllerError naming the controller and the step, with the platform's own
  words and ``retriable`` as a retry would fare; nothing is started twice, and a stop that leaves an
  instance running says so.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_kip848.controllers import (
    ApplicationStatus,
    ControllerError,
    NamedController,
)
from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.kafka.errors import GroupNotFound
from airflow_provider_kip848.kafka.model.groups import ConsumerGroupDescription, GroupType, MemberProtocol
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from kip848_harness.clients import create_topics
from kip848_harness.processes import find_processes, send_signal
from kip848_harness.registry import RegistryFile
from kip848_harness.sshd import LocalSshd, descendants, free_port
from kip848_harness.supervised import SupervisedConsumerApp
from kip848_harness.supervisor import LocalSupervisor
from tests.conftest import wait_until

INSTANCES = 2
SSH_CONN = "ssh_cmd_ctl"
_SUPERVISORD_EVENT = re.compile(r"INFO (?P<event>stopped|spawned|success): '?(?P<proc>[A-Za-z0-9_.-]+?)'? ")


# -- fixtures and helpers -------------------------------------------------------------------------------------

@pytest.fixture
def admin(bootstrap: str) -> Iterator[KafkaAdmin]:
    with KafkaAdmin(ClientSettings(bootstrap)) as client:
        yield client


@pytest.fixture
def app(supervisor: LocalSupervisor, bootstrap: str, tmp_path: Path, unique) -> Iterator[SupervisedConsumerApp]:
    """Two consumer processes of a fresh group on a fresh 2-partition topic, installed on classic (not started);
    stopped and removed from supervisord afterwards."""
    topic = unique("cc-topic")
    create_topics(bootstrap, {topic: 2})
    consumer_app = SupervisedConsumerApp(supervisor, unique("cc"), tmp_path / "app", bootstrap_servers=bootstrap,
                                         group_id=unique("cc-group"), topics=[topic], instances=INSTANCES)
    try:
        consumer_app.install("classic")
        yield consumer_app
    finally:
        consumer_app.remove()


def ssh_connection(monkeypatch: pytest.MonkeyPatch, sshd: LocalSshd, conn_id: str = SSH_CONN, *,
                   key: Path | None = None, port: int | None = None) -> str:
    """An Airflow SSH connection to the session's sshd (``key``: another private key; ``port``: another port)."""
    connection = json.loads(sshd.connection_uri(conn_id, private_key_path=key))
    if port is not None:
        connection["port"] = port
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))
    return conn_id


@pytest.fixture(params=["worker", "ssh"])
def where(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[str | None, str]:
    """(ssh_conn_id, how the controller names where its commands ran): on the worker, or over SSH."""
    if request.param == "worker":
        return None, "the Airflow worker ("
    sshd: LocalSshd = request.getfixturevalue("sshd")
    return (ssh_connection(monkeypatch, sshd),
            f"{sshd.user}@{sshd.host}:{sshd.port} (SSH connection {SSH_CONN!r})")


def register(controllers: RegistryFile, name: str, target: dict) -> NamedController:
    controllers.add(name, "command", target, description=f"{name} under the session's supervisord")
    return resolve_controller(name)


def group_of(admin: KafkaAdmin, group_id: str) -> ConsumerGroupDescription | None:
    try:
        group = admin.describe_group(group_id)
    except GroupNotFound:
        return None
    assert isinstance(group, ConsumerGroupDescription)
    return group


def members_joined(admin: KafkaAdmin, group_id: str, protocol: MemberProtocol) -> ConsumerGroupDescription | None:
    """The group once it is Stable with app-0 .. app-N-1, each speaking ``protocol`` (else None)."""
    group = group_of(admin, group_id)
    if group is None or group.state != "Stable":
        return None
    if sorted(m.client_id for m in group.members) != [f"app-{i}" for i in range(INSTANCES)]:
        return None
    if any(m.protocol is not protocol for m in group.members):
        return None
    return group


def group_empty(admin: KafkaAdmin, group_id: str) -> bool:
    group = group_of(admin, group_id)
    return group is not None and group.is_empty and group.state == "Empty"


def supervisord_events(supervisor: LocalSupervisor, since: int, name: str) -> list[tuple[str, str]]:
    """(event, process) of program ``name`` in supervisord's log after byte ``since``: stopped, spawned, success."""
    with supervisor.log_path.open("rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return [(m["event"], m["proc"]) for m in _SUPERVISORD_EVENT.finditer(text)
            if m["proc"].startswith(f"{name}_")]


def close(controller: NamedController) -> None:
    controller.close()


# -- the recipe, on the worker and over SSH ---------------------------------------------------------------------

def test_start_status_config_stop(app: SupervisedConsumerApp, where, controllers: RegistryFile,
                                  admin: KafkaAdmin, unique) -> None:
    """start -> every process RUNNING with a pid and every member in the classic group; a second start with the
    instances expected starts nothing; config of the consumer protocol is the files the app would read; stop ->
    confirmed gone by supervisorctl, and the group is empty."""
    ssh_conn_id, ran_on = where
    controller = register(controllers, unique("cc-ctl"), app.target(ssh_conn_id))
    try:
        started = controller.start("classic", expected=INSTANCES)
        assert started["already_running"] is False
        assert ran_on in started["platform"]["where"]
        assert started["platform"]["exit_code"] == 0
        assert app.protocol == "classic"

        status = controller.status()
        pids = app.pids()
        assert status.known and len(status.running) == INSTANCES
        assert all(i.ready and i.state == "RUNNING" for i in status.running), status.summary()
        assert {i.name: i.incarnation for i in status.instances} == {
            f"{app.name}:{proc}": str(pid) for proc, pid in pids.items()}
        assert ran_on in status.source and "status" in status.source

        group = wait_until(lambda: members_joined(admin, app.group_id, MemberProtocol.CLASSIC), timeout=30,
                           what=f"both classic members in {app.group_id}")
        assert isinstance(group, ConsumerGroupDescription) and group.type is GroupType.CLASSIC

        again = controller.start("classic", expected=INSTANCES)
        assert again["already_running"] is True and "skipped" in again["platform"]
        assert app.pids() == pids, "nothing was started twice"

        config = controller.config("consumer")
        assert config is not None
        assert config.properties == {
            "bootstrap.servers": app.bootstrap_servers, "group.id": app.group_id, "enable.auto.commit": "false",
            "auto.offset.reset": "earliest", "group.protocol": "consumer", "group.remote.assignor": "uniform"}
        assert config.source.startswith(f"`cat {app.workdir}/app.properties {app.workdir}/consumer.properties`")
        assert ran_on in config.source
        assert (config.client, config.client_version) == ("librdkafka", app.target()["client_version"])
        assert app.protocol == "classic", "reading the config changed nothing"

        stopped = controller.stop()
        assert stopped["instances_gone"] is True
        assert stopped["status"]["known"] and stopped["status"]["instances"], "supervisorctl lists them, stopped"
        assert not any(i["running"] for i in stopped["status"]["instances"])
        assert app.pids() == {}
        assert not [pid for pid in pids.values() if Path(f"/proc/{pid}").exists()], "supervisord reaped them"
        wait_until(lambda: group_empty(admin, app.group_id), timeout=30, what=f"{app.group_id} to be empty")
    finally:
        close(controller)


def test_roll_one_process_at_a_time(app: SupervisedConsumerApp, where, controllers: RegistryFile,
                                    supervisor: LocalSupervisor, admin: KafkaAdmin, unique) -> None:
    """roll("consumer") restarts the processes one after the other (supervisord's log: each is RUNNING again
    before the next one stops), every member then speaks the consumer protocol, and every incarnation changed."""
    ssh_conn_id, ran_on = where
    app.start("classic")
    wait_until(lambda: members_joined(admin, app.group_id, MemberProtocol.CLASSIC), timeout=30,
               what=f"both classic members in {app.group_id}")
    controller = register(controllers, unique("cc-ctl"), app.target(ssh_conn_id))
    try:
        before = controller.status()
        assert len(before.running) == INSTANCES and all(i.incarnation for i in before.running)
        since = supervisor.log_path.stat().st_size

        rolled = controller.roll("consumer")

        assert ran_on in rolled["platform"]["where"] and rolled["platform"]["exit_code"] == 0
        assert app.protocol == "consumer"
        procs = [f"{app.name}_{i}" for i in range(INSTANCES)]
        assert supervisord_events(supervisor, since, app.name) == [
            (event, proc) for proc in procs for event in ("stopped", "spawned", "success")]
        status = ApplicationStatus.from_dict(rolled["status"])
        assert status is not None
        after = {i.name: i for i in status.instances}
        assert set(after) == {i.name for i in before.instances}
        for instance in before.running:
            now = after[instance.name]
            assert now.running and now.ready, now.describe()
            assert now.incarnation and now.incarnation != instance.incarnation, now.describe()

        group = wait_until(lambda: members_joined(admin, app.group_id, MemberProtocol.CONSUMER), timeout=30,
                           what=f"both members of {app.group_id} on the consumer protocol")
        assert isinstance(group, ConsumerGroupDescription)
        assert group.type is GroupType.CONSUMER and not group.is_mixed
    finally:
        close(controller)


# -- bad input ---------------------------------------------------------------------------------------------

def test_a_failing_stop_keeps_supervisorctls_words(app: SupervisedConsumerApp, where,
                                                            controllers: RegistryFile, unique) -> None:
    """A stop command that exits non-zero (it names a program supervisord does not have): the error names the
    controller and the step, carries supervisorctl's own text, is not retriable; the instances still run."""
    ssh_conn_id, ran_on = where
    app.start("classic")
    pids = app.pids()
    target = app.target(ssh_conn_id)
    missing = f"{app.name}-missing"
    target["commands"]["stop"] = f"{app.supervisor.ctl} stop '{missing}:*'"
    name = unique("cc-ctl")
    controller = register(controllers, name, target)
    try:
        with pytest.raises(ControllerError) as caught:
            controller.stop(confirm_seconds=5)
        error = caught.value
        assert (error.controller, error.step, error.retriable) == (name, "stop", False)
        message = str(error)
        assert f"controller {name!r}, step stop" in message
        assert f"{missing}: ERROR (no such group)" in message, message
        assert "exited 1" in message and ran_on in message
        assert app.pids() == pids, "a stop that failed stopped nothing, and said so"
    finally:
        close(controller)


@pytest.mark.parametrize("over_ssh", [False, True], ids=["worker", "ssh"])
def test_a_hanging_start_is_retriable_effect_unknown(
        app: SupervisedConsumerApp, over_ssh: bool, controllers: RegistryFile, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest, unique) -> None:
    """A start command still running at its timeout: retriable, the message says what it did is unknown; on the
    worker the command is killed; nothing was started."""
    marker = unique("hang").replace("-", "_")
    target = app.target(ssh_connection(monkeypatch, request.getfixturevalue("sshd")) if over_ssh else None)
    target["commands"]["start"] = f"sleep 60 && echo {marker}"
    target["timeout_seconds"] = 2
    name = unique("cc-ctl")
    controller = register(controllers, name, target)

    def hung() -> list[int]:
        """The command's shell and its children, while they run (found by the marker in its command line)."""
        shells = [pid for pid, argv in find_processes(lambda argv: any(marker.encode() in a for a in argv))]
        return [child for pid in shells for child in descendants(pid)] + shells

    try:
        with pytest.raises(ControllerError) as caught:
            controller.start("classic", expected=INSTANCES)
        error = caught.value
        assert (error.controller, error.step, error.retriable) == (name, "start", True)
        message = str(error)
        assert "did not finish within 2 s" in message and "unknown" in message, message
        if over_ssh:
            assert "may still be running" in message
        else:
            assert hung() == [], "the worker killed the command's process group"
        assert app.pids() == {}
    finally:
        close(controller)
        for pid in hung():  # the remote command of the SSH case outlives its closed session (the message says so)
            send_signal(pid, signal.SIGTERM)


def test_a_status_that_prints_nothing_is_an_error_not_no_instance(app: SupervisedConsumerApp,
                                                                  controllers: RegistryFile, unique) -> None:
    """A status command that prints nothing (``true``): status and start fail at the status step, the stop at its
    own step saying the stop ran but its effect is unknown; none of them reads it as "no instance" (a stop is not
    confirmed, a start does not start a second copy)."""
    app.start("classic")
    pids = app.pids()
    target = app.target()
    target["commands"]["status"] = "true"
    name = unique("cc-ctl")
    controller = register(controllers, name, target)
    try:
        with pytest.raises(ControllerError) as caught:
            controller.status()
        assert (caught.value.controller, caught.value.step, caught.value.retriable) == (name, "status", False)
        assert "printed nothing" in str(caught.value)

        with pytest.raises(ControllerError) as caught:
            controller.start("classic", expected=INSTANCES)
        assert caught.value.step == "status"
        assert app.pids() == pids, "nothing was started twice"

        with pytest.raises(ControllerError) as caught:
            controller.stop(confirm_seconds=2)
        assert caught.value.step == "stop" and "printed nothing" in str(caught.value)
        assert "the stop ran (`" in str(caught.value) and "whether the instances are gone is unknown" in str(
            caught.value)
        assert app.pids() == {}, "the stop command itself ran: only its confirmation failed"
    finally:
        close(controller)


def test_an_ssh_key_the_host_refuses(app: SupervisedConsumerApp, sshd: LocalSshd, controllers: RegistryFile,
                                     monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """A connection whose key the host does not accept: the first step fails, not retriable, naming
    user@host:port and the connection."""
    conn_id = ssh_connection(monkeypatch, sshd, "ssh_cmd_wrong_key", key=sshd.other_key())
    name = unique("cc-ctl")
    controller = register(controllers, name, app.target(conn_id))
    try:
        with pytest.raises(ControllerError) as caught:
            controller.start("classic", expected=INSTANCES)
        error = caught.value
        assert (error.controller, error.step, error.retriable) == (name, "status", False)
        message = str(error)
        assert "authentication" in message.lower(), message
        assert f"{sshd.user}@{sshd.host}:{sshd.port}" in message and repr(conn_id) in message
        assert app.pids() == {}
    finally:
        close(controller)


def test_an_ssh_port_where_nothing_listens_is_retriable(app: SupervisedConsumerApp, sshd: LocalSshd,
                                                        controllers: RegistryFile,
                                                        monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """A host that does not answer on the connection's port: retriable (it may answer later)."""
    port = free_port(sshd.host)
    conn_id = ssh_connection(monkeypatch, sshd, "ssh_cmd_no_listener", port=port)
    name = unique("cc-ctl")
    controller = register(controllers, name, app.target(conn_id))
    try:
        with pytest.raises(ControllerError) as caught:
            controller.stop()
        error = caught.value
        assert (error.controller, error.step, error.retriable) == (name, "stop", True)
        assert f"{sshd.user}@{sshd.host}:{port}" in str(error) and repr(conn_id) in str(error)
        assert "cannot reach" in str(error)
    finally:
        close(controller)


def test_a_stop_that_leaves_an_instance_running_says_so(app: SupervisedConsumerApp, controllers: RegistryFile,
                                                        unique) -> None:
    """The stop command returns 0 but stops only one of the two processes: after confirm_seconds the stop fails,
    retriable, naming the instance still running (and it does still run)."""
    app.start("classic")
    pids = app.pids()
    target = app.target()
    target["commands"]["stop"] = f"{app.supervisor.ctl} stop '{app.name}:{app.name}_0'"
    name = unique("cc-ctl")
    controller = register(controllers, name, target)
    try:
        with pytest.raises(ControllerError) as caught:
            controller.stop(confirm_seconds=2, poll_seconds=0.2)
        error = caught.value
        assert (error.controller, error.step, error.retriable) == (name, "stop", True)
        message = str(error)
        assert f"{app.name}:{app.name}_1 (RUNNING, incarnation {pids[f'{app.name}_1']})" in message, message
        assert f"{app.name}_0 " not in message
        assert "NOT stopped" in message
        assert app.pids() == {f"{app.name}_1": pids[f"{app.name}_1"]}
    finally:
        close(controller)

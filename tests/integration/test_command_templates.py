"""Command templates that cannot be made into shell, against a real supervisord and a real sshd (issue 45).

A program under the session's supervisord (a sleeper: nothing of Kafka is needed to show where a value goes) is
stopped through ``argv.sh``, which records the arguments and the environment it got and then runs
``supervisorctl stop``. On the worker and over SSH (Airflow's SSHHook to the session's OpenSSH server):

* an entry whose placeholder sits inside single or double quotes, ``$( )``, a here-document or ``sh -c "..."``
  is refused when it is resolved, naming the entry, the step, the placeholder and why; nothing ran (the program
  runs on with the same pid) and the hostile value's ``touch X`` never happened;
* with the bare placeholder, the hostile value reaches ``argv.sh`` as one argument, in ``KIP848_ARG_region``
  (never in the command's text), X is never created, and the program is stopped;
* a registry number that is not finite (``timeout_seconds`` NaN) and a run's NaN are refused before anything
  runs; the program keeps running;
* an SSH connection whose ``host_key`` lacks its type fails the controller's check, before any approval, not
  retriable and saying so (it was a retriable "cannot reach"); with the type, the check passes, its probe value
  coming back through the remote account's shell untouched.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_kip848.controllers import ControllerError, ControllerRefused, ControllerRegistryInvalid
from airflow_provider_kip848.controllers.registry import resolve_controller
from kip848_harness.registry import RegistryFile
from kip848_harness.sshd import LocalSshd
from kip848_harness.supervisor import LocalSupervisor

SSH_CONN = "ssh_templates"
#: what a shell would run if it parsed the value: each form plants X
HOSTILE = "eu; touch {x}; echo '$(touch {x})' `touch {x}`"


def ssh_connection(monkeypatch: pytest.MonkeyPatch, sshd: LocalSshd, conn_id: str = SSH_CONN, *,
                   host_key: str | None = None) -> str:
    connection = json.loads(sshd.connection_uri(conn_id))
    if host_key is not None:
        extra = json.loads(connection["extra"]) if isinstance(connection["extra"], str) else connection["extra"]
        extra["host_key"] = host_key
        connection["extra"] = json.dumps(extra)
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))
    return conn_id


@pytest.fixture(params=["worker", "ssh"])
def ssh_conn_id(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """None (the commands run on the worker) or the SSH connection to the session's sshd."""
    if request.param == "worker":
        return None
    return ssh_connection(monkeypatch, request.getfixturevalue("sshd"))


class Sleeper:
    """A program of the session's supervisord that only sleeps, stopped through ``argv.sh`` (which writes its
    argument count, each argument and its KIP848_ environment to ``args.txt``, then stops the program)."""

    def __init__(self, supervisor: LocalSupervisor, name: str, workdir: Path) -> None:
        self.supervisor, self.name, self.workdir = supervisor, name, workdir
        self.args = workdir / "args.txt"
        self.x = workdir / "X"
        self.argv = workdir / "argv.sh"
        self.argv.write_text(
            "#!/bin/sh\n"
            f"out={shlex.quote(str(self.args))}\n"
            'printf \'%s\\n\' "$#" > "$out"\n'
            'for a in "$@"; do printf \'[%s]\\n\' "$a" >> "$out"; done\n'
            'env | grep \'^KIP848_ARG_\' | sort >> "$out"\n'
            f"exec {supervisor.ctl} stop {shlex.quote(name)}\n")
        self.argv.chmod(0o755)

    def start(self) -> None:
        self.supervisor.add_program(self.name, "/bin/sleep 600", startsecs=1, directory=str(self.workdir))
        self.supervisor.run_ctl("start", f"{self.name}:*", check=True)

    def pids(self) -> dict[str, int]:
        return self.supervisor.pids(self.name)

    def target(self, stop: str, ssh_conn_id: str | None, **extra: object) -> dict:
        target = {"commands": {"stop": stop.replace("ARGV", shlex.quote(str(self.argv))), "start": "true",
                               "status": f"{self.supervisor.ctl} status {shlex.quote(self.name)}"},
                  "status_format": "supervisorctl", "timeout_seconds": 60,
                  "params": {"region": {"type": "string", "default": "eu"}}, **extra}
        if ssh_conn_id:
            target["ssh_conn_id"] = ssh_conn_id
        return target

    @property
    def hostile(self) -> str:
        return HOSTILE.format(x=self.x)


@pytest.fixture
def sleeper(supervisor: LocalSupervisor, tmp_path: Path, unique) -> Iterator[Sleeper]:
    program = Sleeper(supervisor, unique("tpl").replace("-", "_"), tmp_path)
    program.start()
    try:
        yield program
    finally:
        supervisor.remove_program(program.name)


QUOTED = [
    ("ARGV stop '{region}'", "{region} sits inside single quotes"),
    ('ARGV stop "{region}"', "{region} sits inside double quotes"),
    ("ARGV stop $(echo {region})", "{region} sits inside $( )"),
    ("ARGV stop <<EOF\n{region}\nEOF", "{region} sits in a here-document's body"),
    ('sh -c "ARGV stop {region}"', "the template runs `sh -c`"),
]


@pytest.mark.parametrize("stop, why", QUOTED, ids=["single", "double", "cmdsub", "heredoc", "sh-c"])
def test_a_placeholder_where_its_quoting_does_not_hold_is_refused_and_nothing_runs(
        sleeper: Sleeper, ssh_conn_id, stop, why, controllers: RegistryFile, unique) -> None:
    pids = sleeper.pids()
    name = controllers.add(unique("tpl-ctl"), "command", sleeper.target(stop, ssh_conn_id))
    with pytest.raises(ControllerRegistryInvalid) as err:
        resolve_controller(name, {"region": sleeper.hostile}).close()
    message = str(err.value)
    assert f"controllers.{name} (kind command): commands.stop: " in message and why in message, message
    assert str(controllers.path) not in message
    assert sleeper.pids() == pids, "the program runs on: nothing of the entry ran"
    assert not sleeper.args.exists() and not sleeper.x.exists()


def test_a_bare_placeholder_gives_the_hostile_value_as_one_argument_through_the_environment(
        sleeper: Sleeper, ssh_conn_id, controllers: RegistryFile, unique) -> None:
    assert sleeper.pids()
    name = controllers.add(unique("tpl-ctl"), "command", sleeper.target("ARGV stop {region}", ssh_conn_id))
    with resolve_controller(name, {"region": sleeper.hostile}) as controller:
        plan = controller.plan("consumer")
        assert plan["actions"]["stop"] == f"{shlex.quote(str(sleeper.argv))} stop {shlex.quote(sleeper.hostile)}"
        assert controller.check()  # the probe value came back through the (remote) shell untouched
        done = controller.stop(confirm_seconds=30, poll_seconds=0.2)
    assert done["instances_gone"] is True and sleeper.pids() == {}
    assert done["platform"]["command"] == plan["actions"]["stop"], "the report shows what the approval showed"
    assert sleeper.args.read_text().splitlines() == [
        "2", "[stop]", f"[{sleeper.hostile}]", f"KIP848_ARG_region={sleeper.hostile}"]
    assert not sleeper.x.exists(), "no shell parsed the value"


def test_a_registry_number_or_a_run_argument_that_is_not_finite_is_refused_before_anything_runs(
        sleeper: Sleeper, controllers: RegistryFile, unique) -> None:
    """The issue: ``timeout_seconds: NaN`` started the stop command, then failed its wait with a raw ValueError
    while the command ran on. Now the entry is refused when resolved; a run's NaN likewise."""
    pids = sleeper.pids()
    nan_timeout = controllers.add(unique("tpl-nan"), "command",
                                  sleeper.target("ARGV stop {region}", None, timeout_seconds=math.nan))
    with pytest.raises(ControllerRegistryInvalid) as err:
        resolve_controller(nan_timeout).close()
    assert f"controllers.{nan_timeout}.target.timeout_seconds" in str(err.value) and "finite" in str(err.value)
    numeric = controllers.add(unique("tpl-num"), "command", {
        **sleeper.target("ARGV stop --drain={drain}", None),
        "params": {"drain": {"type": "number", "minimum": 0, "maximum": 600, "default": 30}}})
    for value in (math.nan, math.inf, 601):
        with pytest.raises(ControllerRefused, match=f"arguments of controller {numeric!r}: drain must be"):
            resolve_controller(numeric, {"drain": value}).close()
    assert sleeper.pids() == pids and not sleeper.args.exists()


def test_a_host_key_without_its_type_fails_the_check_not_retriable(
        sleeper: Sleeper, sshd: LocalSshd, controllers: RegistryFile, monkeypatch: pytest.MonkeyPatch,
        unique) -> None:
    key_type, key_data = sshd.host_public_key.split()
    bare = ssh_connection(monkeypatch, sshd, "ssh_bare_host_key", host_key=key_data)
    name = controllers.add(unique("tpl-key"), "command", sleeper.target("ARGV stop {region}", bare))
    with resolve_controller(name) as controller:
        with pytest.raises(ControllerError) as err:
            controller.check()
    error = err.value
    assert (error.controller, error.step, error.retriable) == (name, "check", False)
    assert "the host_key of SSH connection 'ssh_bare_host_key' holds no key type" in str(error)
    assert f"e.g. `{key_type} AAAAC3Nza...`" in str(error) and "cannot reach" not in str(error)
    typed = controllers.add(unique("tpl-key"), "command",
                            sleeper.target("ARGV stop {region}", ssh_connection(monkeypatch, sshd)))
    with resolve_controller(typed) as controller:
        assert controller.check() == f"{sshd.user}@{sshd.host}:{sshd.port} (SSH connection {SSH_CONN!r})"
    assert sleeper.pids(), "the program still runs"

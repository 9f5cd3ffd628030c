"""The application platforms of the test harness are the real thing: supervisord and OpenSSH's sshd.

The tests of application control rely on them, so this checks first what they rely on:

* supervisord runs a program group of several processes, reports their pids, stops them by group
  (``supervisorctl stop name:*``), and hands the environment it was given to each process;
* Airflow's own ``SSHHook``, configured the way deployments do (an ``AIRFLOW_CONN_*`` variable), logs in
  to the session's sshd with the host key checked, and brings back a command's exit status, stdout and
  stderr; over it, ``supervisorctl`` drives the session's supervisord;
* the server is not a pushover: a key it does not know is refused (``AuthenticationException``), and a
  server whose host key is not the one in the connection is refused by the client (``BadHostKeyException``).
"""

from __future__ import annotations

import json
from pathlib import Path

import paramiko
import pytest
from airflow.providers.ssh.hooks.ssh import SSHHook

from kip848_harness.sshd import LocalSshd
from kip848_harness.supervisor import LocalSupervisor
from tests.conftest import wait_until


def process_environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def process_gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def run(hook: SSHHook, client: paramiko.SSHClient, command: str) -> tuple[int, str, str]:
    status, stdout, stderr = hook.exec_ssh_client_command(client, command, get_pty=False, environment=None)
    return status, stdout.decode(), stderr.decode()


def set_ssh_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, uri: str) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", uri)
    return conn_id


def test_supervisord_runs_a_program_group_and_stops_it_by_group(supervisor: LocalSupervisor, unique) -> None:
    """Two processes of one program, started and stopped as the group ``name:*``, each with the environment
    the program was defined with (values with commas, spaces and ``%`` survive supervisord's config syntax)."""
    name = unique("sleeper")
    environment = {"KIP848_APP": name, "KIP848_NOTE": "a, b=c 100%"}
    supervisor.add_program(name, "sh -c 'exec sleep 300'", numprocs=2, environment=environment)
    try:
        assert supervisor.pids(name) == {}, "autostart is off: nothing runs before a start"

        supervisor.run_ctl("start", f"{name}:*", check=True)
        pids = supervisor.pids(name)
        assert set(pids) == {f"{name}_0", f"{name}_1"}
        assert len(set(pids.values())) == 2
        for pid in pids.values():
            assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"300"]
            env = process_environ(pid)
            assert {key: env.get(key) for key in environment} == environment

        supervisor.run_ctl("stop", f"{name}:*", check=True)
        assert supervisor.pids(name) == {}
        for pid in pids.values():
            wait_until(lambda pid=pid: process_gone(pid), timeout=10, what=f"process {pid} to be gone",
                       interval=0.05)
    finally:
        supervisor.remove_program(name)


def test_the_ssh_hook_runs_commands_on_the_sshd_and_drives_the_supervisor(
        sshd: LocalSshd, supervisor: LocalSupervisor, monkeypatch: pytest.MonkeyPatch, unique) -> None:
    """Exit status, stdout and stderr come back over a real SSH session, and ``supervisorctl`` run there starts,
    reports and stops a program of the session's supervisord."""
    conn_id = set_ssh_connection(monkeypatch, "ssh_app_hosts", sshd.connection_uri("ssh_app_hosts"))
    hook = SSHHook(ssh_conn_id=conn_id)
    name = unique("remote")
    supervisor.add_program(name, "sh -c 'exec sleep 300'")
    client = hook.get_conn()
    try:
        status, stdout, stderr = run(hook, client, 'echo "$SSH_CONNECTION"; id -un; echo oops >&2; exit 7')
        assert status == 7
        connection, user = stdout.splitlines()
        assert connection.endswith(f"127.0.0.1 {sshd.port}"), "the command ran in a session of our sshd"
        assert user == sshd.user
        assert stderr == "oops\n"

        assert run(hook, client, f"{supervisor.ctl} start {name}:*")[0] == 0
        pids = supervisor.pids(name)
        assert list(pids) == [name]
        status, stdout, _ = run(hook, client, f"{supervisor.ctl} status {name}:*")
        assert status == 0
        assert "RUNNING" in stdout and f"pid {pids[name]}," in stdout

        assert run(hook, client, f"{supervisor.ctl} stop {name}:*")[0] == 0
        assert supervisor.pids(name) == {}
        status, stdout, _ = run(hook, client, f"{supervisor.ctl} status {name}:*")
        assert status == 3 and "STOPPED" in stdout, "supervisorctl's exit status for 'not running' comes back"
    finally:
        client.close()
        supervisor.remove_program(name)


def test_a_key_the_server_does_not_know_is_refused(sshd: LocalSshd, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same connection with another (valid) key fails to authenticate: the server checks the key."""
    conn_id = set_ssh_connection(monkeypatch, "ssh_wrong_key",
                                 sshd.connection_uri("ssh_wrong_key", private_key_path=sshd.other_key()))
    hook = SSHHook(ssh_conn_id=conn_id, conn_retry_attempts=1)
    with pytest.raises(paramiko.AuthenticationException):
        hook.get_conn()


def test_a_server_with_another_host_key_is_refused(sshd: LocalSshd, monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection pins the host key: the hook refuses a server that shows another one (here: the connection
    expects a key the server does not have)."""
    connection = json.loads(sshd.connection_uri("ssh_other_host"))
    other_public_key = Path(f"{sshd.other_key()}.pub").read_text().split()[:2]
    connection["extra"]["host_key"] = " ".join(other_public_key)
    conn_id = set_ssh_connection(monkeypatch, "ssh_other_host", json.dumps(connection))
    hook = SSHHook(ssh_conn_id=conn_id, conn_retry_attempts=1)
    with pytest.raises(paramiko.BadHostKeyException):
        hook.get_conn()

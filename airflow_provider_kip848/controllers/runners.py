"""Where a command controller's commands run: on the Airflow worker, or on a host over SSH.

Both runners give the same :class:`CommandOutcome` (exit code, output, where,
how long) and the same failures as :class:`PlatformError`:

* a command that does not finish within its timeout is killed (on the worker:
  its whole process group) and reported retriable, saying that the step's
  effect is unknown (over SSH the remote command may still run: the message
  says so);
* over SSH (Airflow's SSH provider, ``SSHHook`` with an Airflow connection: the
  key and the host key live in the connection, never in the registry or on a
  command line), a refused key or a host key that does not match is not
  retriable, a host that does not answer is.

Commands get a clean environment (``PATH``, ``HOME``, ``LANG``, ``LC_ALL``,
``USER``, ``LOGNAME``, ``TZ`` and the controller's declared ``env``), never the
worker's: a worker's environment can hold Airflow connections and their secrets.
"""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from airflow_provider_kip848.controllers.errors import PlatformError

#: the environment every command gets, on top of the controller's ``env``
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TZ")
#: how much of a command's output is kept (the tail: errors come last)
OUTPUT_LIMIT = 4000


@dataclass(frozen=True)
class CommandOutcome:
    """One command's run: where, its exit code, its output (decoded, whole) and its duration."""

    command: str
    where: str
    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    def tail(self, text: str) -> str:
        return text if len(text) <= OUTPUT_LIMIT else "..." + text[-OUTPUT_LIMIT:]


class Runner(Protocol):
    """Runs a shell command somewhere."""

    @property
    def where(self) -> str: ...

    def run(self, command: str, *, timeout: float, env: Mapping[str, str]) -> CommandOutcome: ...

    def close(self) -> None: ...


class LocalRunner:
    """Runs commands with ``/bin/sh -c`` on this worker, each in its own process group."""

    def __init__(self) -> None:
        self.where = f"the Airflow worker ({socket.gethostname()})"

    def run(self, command: str, *, timeout: float, env: Mapping[str, str]) -> CommandOutcome:
        started = time.monotonic()
        base = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        process = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env={**base, **env}, start_new_session=True)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.communicate()
            raise PlatformError(
                f"`{command}` did not finish within {timeout:g} s on {self.where}: it was killed, and what it "
                "did before is unknown", retriable=True,
                remedy="Check the application's state on its platform, then rerun the task (the step is "
                       "idempotent), or raise the controller's timeout_seconds.") from None
        return CommandOutcome(command, self.where, process.returncode, out.decode("utf-8", "replace"),
                              err.decode("utf-8", "replace"), time.monotonic() - started)

    def close(self) -> None:
        pass


class SSHRunner:
    """Runs commands on a host over SSH, through the Airflow connection ``ssh_conn_id``."""

    def __init__(self, ssh_conn_id: str, *, connect_timeout: float = 10.0) -> None:
        self.ssh_conn_id = ssh_conn_id
        self.connect_timeout = connect_timeout
        self._hook: Any = None
        self._client: Any = None
        self.where = f"the host of SSH connection {ssh_conn_id!r}"

    def _connect(self) -> Any:
        if self._client is not None:
            transport = self._client.get_transport()
            if transport is not None and transport.is_active():
                return self._client
        try:
            # optional dependency: apache-airflow-providers-ssh (the provider's [ssh] extra) and paramiko
            import paramiko  # noqa: PLC0415
            from airflow.providers.ssh.hooks.ssh import SSHHook  # noqa: PLC0415
        except ImportError as exc:
            raise PlatformError(f"commands over SSH need Airflow's SSH provider on this worker: {exc}",
                                retriable=False,
                                remedy="Install it on every worker: pip install 'airflow-provider-kip848[ssh]'.",
                                ) from exc

        try:
            self._hook = SSHHook(ssh_conn_id=self.ssh_conn_id, conn_timeout=int(self.connect_timeout),
                                 conn_retry_attempts=1, auth_timeout=int(self.connect_timeout),
                                 banner_timeout=self.connect_timeout)
            self.where = f"{self._hook.username}@{self._hook.remote_host}:{self._hook.port or 22} " \
                         f"(SSH connection {self.ssh_conn_id!r})"
            self._client = self._hook.get_conn()
        except paramiko.AuthenticationException as exc:
            raise PlatformError(f"SSH authentication to {self.where} failed: {exc}", retriable=False,
                                remedy="Check the connection's login and key (key_file / private_key) and the "
                                       "host's authorized_keys for that user.") from exc
        except paramiko.BadHostKeyException as exc:
            raise PlatformError(f"the host key of {self.where} does not match the connection's host_key: {exc}",
                                retriable=False,
                                remedy="Check the host (a changed key can mean a rebuilt host, or a man in the "
                                       "middle); then update the connection's host_key.") from exc
        except (paramiko.SSHException, OSError) as exc:
            raise PlatformError(f"cannot reach {self.where} over SSH: {type(exc).__name__}: {exc}", retriable=True,
                                remedy="Check that the host is up and sshd answers on that port from this "
                                       "worker, then rerun the task.") from exc
        except Exception as exc:  # noqa: BLE001 - a missing or malformed connection: not retriable
            raise PlatformError(f"cannot use SSH connection {self.ssh_conn_id!r}: {type(exc).__name__}: {exc}",
                                retriable=False,
                                remedy="Create the Airflow connection (conn type ssh) the registry names.") from exc
        return self._client

    def run(self, command: str, *, timeout: float, env: Mapping[str, str]) -> CommandOutcome:
        client = self._connect()
        started = time.monotonic()
        prefix = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
        try:
            _stdin, stdout, _stderr = client.exec_command(prefix + command, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the session broke: retriable
            raise PlatformError(f"`{command}` could not be started on {self.where}: {type(exc).__name__}: {exc}",
                                retriable=True) from exc
        channel = stdout.channel
        channel.shutdown_write()
        out, err = bytearray(), bytearray()
        deadline = started + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(channel, selectors.EVENT_READ)
            while True:
                while channel.recv_ready():
                    out += channel.recv(65536)
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    channel.close()
                    raise PlatformError(
                        f"`{command}` did not finish within {timeout:g} s on {self.where}: the session was closed, "
                        "and the command may still be running there; what it did is unknown", retriable=True,
                        remedy="Check the application's state on that host, then rerun the task (the step is "
                               "idempotent), or raise the controller's timeout_seconds.")
                selector.select(min(left, 1.0))
        code = channel.recv_exit_status()
        return CommandOutcome(command, self.where, code, out.decode("utf-8", "replace"),
                              err.decode("utf-8", "replace"), time.monotonic() - started)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


__all__ = ["OUTPUT_LIMIT", "CommandOutcome", "LocalRunner", "Runner", "SSHRunner"]

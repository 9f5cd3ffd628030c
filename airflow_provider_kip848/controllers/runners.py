"""Where a command controller's commands run: on the Airflow worker, or on a host over SSH.

Both runners give the same :class:`CommandOutcome` (exit code, output, where,
how long) and the same failures as :class:`PlatformError`:

* a command that does not finish within its timeout is killed (on the worker:
  its whole process group) and reported retriable, saying that the step's
  effect is unknown (over SSH the remote command may still run: the message
  says so);
* over SSH (Airflow's SSH provider, ``SSHHook`` with an Airflow connection: the
  key and the host key live in the connection, never in the registry or on a
  command line), a refused key, a host key that does not match or that lacks
  its type (``ssh-ed25519 AAAA...``) is not retriable, a host that does not
  answer is.

Commands get a clean environment (``PATH``, ``HOME``, ``LANG``, ``LC_ALL``,
``USER``, ``LOGNAME``, ``TZ`` and the ``env`` the caller gives: the controller's
declared ``env`` and the values of its placeholders), never the worker's: a
worker's environment can hold Airflow connections and their secrets. On the
worker that environment is the process's own (no shell parses it); over SSH
each variable is exported first as one POSIX single-quoted word
(``export KIP848_ARG_region='eu; touch X';``): the remote account's shell must
be a POSIX shell (sh, dash, bash, ksh, zsh), which the controller's check()
proves with a probe value before the approval.
"""

from __future__ import annotations

import binascii
import os
import re
import selectors
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from airflow.sdk import BaseHook

from airflow_provider_kip848.controllers.errors import PlatformError

#: the environment every command gets, on top of the controller's ``env``
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "USER", "LOGNAME", "TZ")
#: how much of a command's output is kept (the tail: errors come last)
OUTPUT_LIMIT = 4000
#: what an exported variable's name may look like
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: the host key types Airflow's SSH provider reads (``host_key`` extra: "<type> <base64>")
HOST_KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")


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

    def run(self, command: str, *, timeout: float, env: Mapping[str, str],
            shown: str | None = None) -> CommandOutcome:
        """Run shell text ``command`` with ``env`` added to the clean environment; ``shown``: how messages and
        the outcome name it (default: ``command`` itself)."""
        ...

    def close(self) -> None: ...


class LocalRunner:
    """Runs commands with ``/bin/sh -c`` on this worker, each in its own process group."""

    def __init__(self) -> None:
        self.where = f"the Airflow worker ({socket.gethostname()})"

    def run(self, command: str, *, timeout: float, env: Mapping[str, str],
            shown: str | None = None) -> CommandOutcome:
        shown = command if shown is None else shown
        started = time.monotonic()
        base = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        process = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env={**base, **env}, start_new_session=True)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(process)
            raise PlatformError(
                f"`{shown}` did not finish within {timeout:g} s on {self.where}: it was killed, and what it "
                "did before is unknown", retriable=True,
                remedy="Check the application's state on its platform, then rerun the task (the step is "
                       "idempotent), or raise the controller's timeout_seconds.") from None
        except BaseException:  # never leave a command running behind a failed wait (an interrupt, a bad timeout)
            self._kill(process)
            raise
        return CommandOutcome(shown, self.where, process.returncode, out.decode("utf-8", "replace"),
                              err.decode("utf-8", "replace"), time.monotonic() - started)

    @staticmethod
    def _kill(process: subprocess.Popen[bytes]) -> None:
        """The command's whole process group killed, and reaped."""
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.communicate()

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

        self._check_host_key()
        try:  # the connection's own settings: whatever fails here fails again on a retry
            self._hook = SSHHook(ssh_conn_id=self.ssh_conn_id, conn_timeout=int(self.connect_timeout),
                                 conn_retry_attempts=1, auth_timeout=int(self.connect_timeout),
                                 banner_timeout=self.connect_timeout)
        except Exception as exc:  # noqa: BLE001 - a missing or malformed connection: not retriable
            raise PlatformError(f"cannot use SSH connection {self.ssh_conn_id!r}: {type(exc).__name__}: {exc}",
                                retriable=False,
                                remedy="Create (or fix) the Airflow connection (conn type ssh) the registry "
                                       "names.") from exc
        self.where = f"{self._hook.username}@{self._hook.remote_host}:{self._hook.port or 22} " \
                     f"(SSH connection {self.ssh_conn_id!r})"
        try:
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

    def _check_host_key(self) -> None:
        """The connection's ``host_key`` extra, if any, is "<type> <base64>": the SSH provider reads a key without
        its type as an RSA key, and the session then fails as if the host could not be reached."""
        try:
            extra = BaseHook.get_connection(self.ssh_conn_id).extra_dejson or {}
        except Exception:  # noqa: BLE001 - a connection that cannot be read is reported by SSHHook below
            return
        host_key = extra.get("host_key")
        if host_key is None:
            return
        parts = str(host_key).split()
        problem = None
        if len(parts) < 2:
            problem = ("holds no key type: it needs the type before the key, as a known_hosts line or the "
                       "host's .pub file has it (e.g. `ssh-ed25519 AAAAC3Nza...`)")
        elif parts[0] not in HOST_KEY_TYPES:
            problem = f"has the type {parts[0][:40]!r}, not one of {', '.join(HOST_KEY_TYPES)}"
        else:
            try:
                binascii.a2b_base64(parts[1].encode("ascii"), strict_mode=True)
            except (binascii.Error, UnicodeEncodeError, ValueError):
                problem = "has a key that is not base64 after its type"
        if problem is not None:
            raise PlatformError(f"the host_key of SSH connection {self.ssh_conn_id!r} {problem}", retriable=False,
                                remedy="Set the connection's host_key to '<type> <base64 key>' (ssh-keyscan -t "
                                       "ed25519 <host> prints it; leave out the host name), then rerun the task.")

    def run(self, command: str, *, timeout: float, env: Mapping[str, str],
            shown: str | None = None) -> CommandOutcome:
        shown = command if shown is None else shown
        bad = sorted(k for k in env if not _ENV_NAME.fullmatch(k))
        if bad:  # a name is exported as it is: it must be a name, never shell
            raise PlatformError(f"environment names {', '.join(map(repr, bad))} are not variable names",
                                retriable=False)
        client = self._connect()
        started = time.monotonic()
        # each value one POSIX single-quoted word: the remote shell reads it as a literal, never as code
        prefix = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
        try:
            _stdin, stdout, _stderr = client.exec_command(prefix + command, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the session broke: retriable
            raise PlatformError(f"`{shown}` could not be started on {self.where}: {type(exc).__name__}: {exc}",
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
                        f"`{shown}` did not finish within {timeout:g} s on {self.where}: the session was closed, "
                        "and the command may still be running there; what it did is unknown", retriable=True,
                        remedy="Check the application's state on that host, then rerun the task (the step is "
                               "idempotent), or raise the controller's timeout_seconds.")
                selector.select(min(left, 1.0))
        code = channel.recv_exit_status()
        return CommandOutcome(shown, self.where, code, out.decode("utf-8", "replace"),
                              err.decode("utf-8", "replace"), time.monotonic() - started)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


__all__ = ["OUTPUT_LIMIT", "CommandOutcome", "LocalRunner", "Runner", "SSHRunner"]

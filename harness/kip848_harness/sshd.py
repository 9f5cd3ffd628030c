"""A real OpenSSH server for the tests: how Airflow reaches an application host to drive its process manager.

Platform operators run commands on application hosts through Airflow's SSH
provider (paramiko). Whether a key is accepted, a host key verified or an exit
status carried back is OpenSSH's behaviour, not ours, so the tests talk to the
real ``/usr/sbin/sshd`` (Debian package openssh-server, installed by
``scripts/system-deps.sh``), never to a fake server::

    server = LocalSshd(tmp).start()      # 127.0.0.1, a free port, throwaway ed25519 keys
    os.environ["AIRFLOW_CONN_SSH_APP_HOSTS"] = server.connection_uri()
    SSHHook(ssh_conn_id="ssh_app_hosts").get_conn()   # verifies the host key, logs in with the user key

The server accepts exactly one user, the one running the tests, with one key
(``private_key_path``); passwords are off. Commands run through that user's
login shell on this machine, so a command can drive a :class:`LocalSupervisor`
by the absolute paths in its ``ctl``. sshd runs in the foreground (``-D -e``)
as a child of this Python and dies with it; its log is ``sshd.log`` in the
work directory. Start-up waits for a real login with the user key, never for
a fixed delay.

Run as root, sshd needs its privilege-separation directory ``/run/sshd``
(it chroots its pre-authentication child there); it is created when missing.
Run as a normal user it neither needs nor uses it, and can only log that user in.

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

import paramiko

from airflow_provider_kip848.kafka.cli.distribution import tail_lines
from kip848_harness.errors import LocalKafkaError
from kip848_harness.processes import die_with_parent, send_signal
from kip848_harness.waiting import wait_until

SSHD = Path("/usr/sbin/sshd")
SSH_KEYGEN = "ssh-keygen"
PRIVSEP_DIR = Path("/run/sshd")
SFTP_SERVER = Path("/usr/lib/openssh/sftp-server")
_BIND_ATTEMPTS = 3


class SshdError(LocalKafkaError):
    """The local sshd could not start; the message names its log or what this machine lacks."""

    remedy = "Read the sshd log named above; fix the cause and start again."


def free_port(host: str = "127.0.0.1") -> int:
    """A port of ``host`` nothing listens on right now (another process may take it before we bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def generate_key(path: Path, comment: str) -> Path:
    """A new ed25519 key pair without passphrase at ``path`` (private) and ``path.pub``; returns ``path``."""
    for stale in (path, path.with_name(path.name + ".pub")):
        stale.unlink(missing_ok=True)
    result = subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    if result.returncode != 0:
        raise SshdError(f"ssh-keygen could not create {path}: {tail_lines(result.stdout + result.stderr, 3)}.")
    return path


def process_children() -> dict[int, list[int]]:
    """Parent pid -> pids of its live (not zombie) children, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, the last ")" ends it
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(stat.parent.name))
    return children


def descendants(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """Every live process below ``pid`` (children, their children, ...)."""
    tree = process_children() if children is None else children
    found: list[int] = []
    pending = [pid]
    while pending:
        below = tree.get(pending.pop(), [])
        found.extend(below)
        pending.extend(below)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _quoted(path: Path) -> str:
    """``path`` as one sshd_config argument (double quotes keep spaces; sshd_config has no escapes)."""
    text = str(path)
    if '"' in text or "\n" in text:
        raise SshdError(f"sshd_config cannot name the path {text!r}.", remedy="Choose a simpler work directory.")
    return f'"{text}"' if any(char.isspace() for char in text) else text


class LocalSshd:
    """OpenSSH's sshd on ``127.0.0.1`` and a free port, serving only the current user with a key of its own."""

    host = "127.0.0.1"

    def __init__(self, workdir: Path | str, *, die_with_parent: bool = True) -> None:
        self.workdir = Path(workdir).absolute()
        self.die_with_parent = die_with_parent
        self.user = getpass.getuser()
        self.port = 0
        self.private_key_path = self.workdir / "user_ed25519_key"
        self.host_key_path = self.workdir / "host_ed25519_key"
        self.host_public_key = ""
        #: seconds from launch to the first successful login, after :meth:`start`
        self.ready_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # -- where things are -----------------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.workdir / "sshd_config"

    @property
    def authorized_keys_path(self) -> Path:
        return self.workdir / "authorized_keys"

    @property
    def log_path(self) -> Path:
        return self.workdir / "sshd.log"

    @property
    def pid(self) -> int | None:
        """The listening sshd's pid while it runs."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    # -- life cycle -----------------------------------------------------------------------------------

    def start(self, timeout: float = 30) -> LocalSshd:
        """Make the keys and config, start sshd, and wait until the user key logs in."""
        if self.pid is not None:
            return self
        if not os.access(SSHD, os.X_OK):
            raise SshdError(f"{SSHD} not found: OpenSSH's server is not installed.",
                            remedy="Run scripts/system-deps.sh (Debian package openssh-server).")
        self._ensure_privsep_dir()
        self.workdir.mkdir(parents=True, exist_ok=True)
        generate_key(self.host_key_path, "kip848-test-host")
        generate_key(self.private_key_path, f"kip848-test-{self.user}")
        self.host_public_key = " ".join(self._public_key(self.host_key_path).split()[:2])
        self.authorized_keys_path.write_text(self._public_key(self.private_key_path))
        self.authorized_keys_path.chmod(0o600)
        started = time.monotonic()
        for attempt in range(1, _BIND_ATTEMPTS + 1):
            self.port = free_port(self.host)
            self.config_path.write_text(self._config())
            self._launch()
            try:
                wait_until(self._logs_in_or_exited, timeout=timeout, what=f"a login to sshd on port {self.port}",
                           interval=0.1)
            except TimeoutError:
                self.stop()
                raise SshdError(f"sshd on {self.host}:{self.port} did not accept the test key within "
                                f"{timeout:.0f} s ({self._log_tail()}).") from None
            if self.pid is None:
                code = None if self._process is None else self._process.returncode
                log = self._log_text()
                self.stop()
                if "Address already in use" in log and attempt < _BIND_ATTEMPTS:
                    continue  # another process took the free port between our probe and sshd's bind
                raise SshdError(f"sshd exited with status {code} while starting ({self._log_tail()}).")
            break
        self.ready_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """End the sessions still open (and the commands they run), then sshd; safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            self._end_sessions(process.pid)
            send_signal(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                send_signal(process.pid, signal.SIGKILL)
                process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalSshd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what clients need ----------------------------------------------------------------------------

    def connection_uri(self, conn_id: str = "ssh_app_hosts", *, private_key_path: Path | None = None) -> str:
        """Airflow connection ``conn_id`` (type ``ssh``) to this server as the JSON an ``AIRFLOW_CONN_<ID>``
        variable takes: key file login, host key checked against ours, no other keys tried."""
        from airflow.sdk import Connection  # noqa: PLC0415 - Airflow reads its config at first import

        if not self.host_public_key:
            raise SshdError("sshd has not been started: no host key yet.", remedy="Call start() first.")
        extra = {
            "key_file": str(private_key_path or self.private_key_path),
            # "<type> <base64>": the SSH provider reads a bare base64 key as RSA, and an ed25519 key is not one
            "host_key": self.host_public_key,
            "no_host_key_check": False,
            "allow_host_key_change": False,
            "look_for_keys": False,
        }
        connection = Connection(conn_id=conn_id, conn_type="ssh", host=self.host, port=self.port, login=self.user,
                                extra=json.dumps(extra))
        return str(connection.as_json())

    def other_key(self) -> Path:
        """A valid ed25519 private key this server does not accept (not in ``authorized_keys``)."""
        path = self.workdir / "other_ed25519_key"
        if not path.exists():
            generate_key(path, "kip848-test-not-authorized")
        return path

    def client(self, *, private_key_path: Path | None = None, timeout: float = 10) -> paramiko.SSHClient:
        """A paramiko client logged in as ``user`` with ``private_key_path`` (default: the accepted key), the
        host key checked against ours; raises ``paramiko.AuthenticationException`` for a key we do not accept."""
        client = paramiko.SSHClient()
        key_type, key_data = self.host_public_key.split()
        client.get_host_keys().add(f"[{self.host}]:{self.port}", key_type,
                                   paramiko.PKey.from_type_string(key_type, base64.b64decode(key_data)))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(self.host, port=self.port, username=self.user,
                           key_filename=str(private_key_path or self.private_key_path), look_for_keys=False,
                           allow_agent=False, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
        except BaseException:
            client.close()
            raise
        return client

    # -- internals ------------------------------------------------------------------------------------

    def _launch(self) -> None:
        if self._log is None:
            self._log = self.log_path.open("wb")  # each launch's own log: a retry judges only its own
        self._process = subprocess.Popen(
            [str(SSHD), "-D", "-e", "-f", str(self.config_path)],
            cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent if self.die_with_parent else None,
            start_new_session=True,  # a Ctrl-C reaches pytest, whose teardown stops us
        )

    def _logs_in_or_exited(self) -> bool:
        """True once the user key logs in and a command runs, or once sshd has exited (the caller tells which);
        an error while it starts counts as "not yet"."""
        if self.pid is None:
            return True
        if f"Server listening on {self.host} port {self.port}." not in self._log_text():
            return False  # not bound yet: what answers on the port now may be another program
        with contextlib.closing(self.client(timeout=5)) as client:
            _, stdout, _ = client.exec_command("echo ready", timeout=5)
            return bool(stdout.channel.recv_exit_status() == 0 and stdout.read().strip() == b"ready")

    @staticmethod
    def _end_sessions(listener: int) -> None:
        """End every connection before the listener: no session or remote command outlives the server.

        SIGTERM goes to each connection's sshd (after login it passes the signal to its session process and
        reaps it) and to the commands the sessions run (each in a session of its own, which sshd does not
        signal); whatever of the tree is still there after that (a connection still authenticating leaves its
        unprivileged child behind) gets its own SIGTERM, if it is still the same program."""
        tree = process_children()
        connections = tree.get(listener, [])
        everything = {pid: _cmdline(pid) for pid in descendants(listener, tree)}
        commands = [pid for connection in connections for session in tree.get(connection, [])
                    for pid in descendants(session, tree)]
        for pid in commands + connections:
            send_signal(pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: not process_children().get(listener), timeout=5, what="sshd's connections to end",
                       interval=0.05)
        for pid, cmdline in everything.items():
            if cmdline and _cmdline(pid) == cmdline:
                send_signal(pid, signal.SIGTERM)

    def _ensure_privsep_dir(self) -> None:
        if os.geteuid() != 0 or PRIVSEP_DIR.is_dir():
            return  # a normal user's sshd does not chroot: it neither needs nor can create the directory
        try:
            PRIVSEP_DIR.mkdir(mode=0o755, parents=True)
            PRIVSEP_DIR.chmod(0o755)
        except OSError as exc:
            raise SshdError(f"sshd run as root needs its privilege-separation directory {PRIVSEP_DIR}, and it "
                            f"cannot be created: {exc}.",
                            remedy=f"Create it: install -d -m 0755 -o root {PRIVSEP_DIR}") from exc

    def _config(self) -> str:
        lines = [
            "# written by kip848_harness.sshd: rewritten at every start",
            f"ListenAddress {self.host}",
            f"Port {self.port}",
            f"HostKey {_quoted(self.host_key_path)}",
            f"PidFile {_quoted(self.workdir / 'sshd.pid')}",
            f"AuthorizedKeysFile {_quoted(self.authorized_keys_path)}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "UsePAM no",
            "StrictModes no",  # temporary directories are not laid out like a home's .ssh
            "PermitRootLogin prohibit-password",
            f"AllowUsers {self.user}",
            "PermitUserEnvironment no",
            "X11Forwarding no",
            "PrintMotd no",
            "LogLevel VERBOSE",
        ]
        if SFTP_SERVER.exists():
            lines.append(f"Subsystem sftp {SFTP_SERVER}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _public_key(private_key: Path) -> str:
        return private_key.with_name(private_key.name + ".pub").read_text()

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _log_tail(self) -> str:
        return f"{self.log_path}: {tail_lines(self._log_text(), 5)}"

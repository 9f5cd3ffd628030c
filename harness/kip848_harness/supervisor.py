"""A real supervisord for the tests: the process manager an application platform runs consumer apps under.

The provider's platform tests drive applications the way operators do on real
hosts: through a process manager's own command line (``supervisorctl stop
app:*``), often over SSH. Mocking that would only test our idea of
supervisord, so :class:`LocalSupervisor` runs the real one from the
``supervisor`` package installed next to this Python, in a work directory of
its own::

    sv = LocalSupervisor(tmp).start()
    sv.add_program("orders", "sh -c 'exec sleep 300'", numprocs=2)
    sv.run_ctl("start", "orders:*", check=True)
    sv.pids("orders")            # {"orders_0": 4242, "orders_1": 4243}
    sv.ctl                       # ".../bin/supervisorctl -c .../supervisord.conf": for a shell or SSH command
    sv.stop()

supervisord runs in the foreground (``nodaemon``) as a child of this Python and
dies with it (``die_with_parent``); it stops its programs when it stops. The
control socket is a unix socket, whose path Linux limits to 107 bytes: a
``workdir`` too deep for it gets the socket in a short directory under /tmp.
Start-up waits on a condition (``supervisorctl pid`` names our process), never
on a fixed delay.

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from airflow_provider_kip848.kafka.cli.distribution import tail_lines
from kip848_harness.errors import LocalKafkaError
from kip848_harness.processes import die_with_parent, send_signal
from kip848_harness.waiting import wait_until

#: Linux's sun_path holds 108 bytes with the terminating NUL; stay well below it.
MAX_SOCKET_PATH = 100
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# supervisord's config parser treats ";" or "#" after whitespace as the start of a comment, and has no escape for it
_INLINE_COMMENT_RE = re.compile(r"\s[;#]")
_RUNNING_RE = re.compile(r"^(?P<name>\S+)\s+RUNNING\s+pid (?P<pid>\d+),", re.MULTILINE)
_SIGNALS = {"TERM", "HUP", "INT", "QUIT", "KILL", "USR1", "USR2"}


class SupervisorError(LocalKafkaError):
    """supervisord could not start, or refused a command; the message carries its own words or log."""

    remedy = "Read supervisord's message or log named above; fix the cause and try again."


def supervisor_bin(name: str) -> Path:
    """``supervisord`` or ``supervisorctl`` of the ``supervisor`` package installed next to this Python."""
    path = Path(sys.executable).absolute().parent / name
    if not os.access(path, os.X_OK):
        raise SupervisorError(f"{path} not found: the supervisor package is not installed in this environment.",
                              remedy="Install the test dependencies (pip install -c constraints/python3.11.txt "
                                     "supervisor).")
    return path


def _config_value(value: str, what: str) -> str:
    """``value`` as it must be written into supervisord's ini file: one line, no inline comment, ``%`` escaped
    (supervisord expands ``%(name)s`` in most values)."""
    if "\n" in value or "\r" in value:
        raise ValueError(f"{what} must be one line for supervisord's config file: {value!r}")
    if _INLINE_COMMENT_RE.search(value):
        raise ValueError(f"{what} has ';' or '#' after a space, which supervisord's config file reads as a comment "
                         f"(write it without the space): {value!r}")
    return value.replace("%", "%%")


def environment_setting(environment: dict[str, str]) -> str:
    """``KEY="value",...`` as supervisord's ``environment=`` parses it (its non-POSIX shlex keeps quotes and has no
    escapes: a value is quoted with a quote character it does not contain)."""
    pairs = []
    for key, value in environment.items():
        if not _ENV_KEY_RE.match(key):
            raise ValueError(f"environment variable name {key!r} is not a valid name for supervisord")
        if value[:1] in ("'", '"') or value[-1:] in ("'", '"'):
            raise ValueError(f"{key}: supervisord strips quotes at either end of an environment value: {value!r}")
        quote = '"' if '"' not in value else "'"
        if quote in value:
            raise ValueError(f"{key}: supervisord cannot take an environment value with both kinds of quote: {value!r}")
        pairs.append(f"{key}={quote}{value}{quote}")
    return _config_value(",".join(pairs), "environment")


class LocalSupervisor:
    """One supervisord in ``workdir`` (config, log, pid file, control socket, programs' ``conf.d`` and logs)."""

    def __init__(self, workdir: Path | str, *, die_with_parent: bool = True) -> None:
        self.workdir = Path(workdir).absolute()
        self.die_with_parent = die_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None
        self._socket_dir: Path | None = None  # a short directory of ours under /tmp, when workdir is too deep
        #: seconds from launch to the first answer, after :meth:`start`
        self.ready_seconds: float | None = None

    # -- where things are -----------------------------------------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.workdir / "supervisord.conf"

    @property
    def programs_dir(self) -> Path:
        return self.workdir / "conf.d"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    @property
    def log_path(self) -> Path:
        return self.workdir / "supervisord.log"

    @property
    def output_path(self) -> Path:
        """supervisord's own stdout and stderr (start-up errors land here before its log is open)."""
        return self.workdir / "supervisord.out"

    @property
    def socket_path(self) -> Path:
        return (self._socket_dir or self.workdir) / "supervisor.sock"

    @property
    def pid(self) -> int | None:
        """supervisord's pid while it runs."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    @property
    def ctl(self) -> str:
        """The shell command prefix that drives this supervisord, e.g. ``<ctl> status``."""
        return shlex.join([str(supervisor_bin("supervisorctl")), "-c", str(self.config_path)])

    def program_log(self, name: str, process_num: int = 0) -> Path:
        """Where process ``process_num`` of program ``name`` writes its stdout and stderr."""
        return self.log_dir / f"{name}_{process_num}.log"

    # -- life cycle -----------------------------------------------------------------------------------

    def start(self, timeout: float = 30) -> LocalSupervisor:
        """Write the config, start supervisord in the foreground as a child, and wait until it answers."""
        if self.pid is not None:
            return self
        supervisord = supervisor_bin("supervisord")
        supervisor_bin("supervisorctl")
        if re.search(r"\s", str(self.workdir)):  # [include] files= is a space-separated list
            raise SupervisorError(f"supervisord's work directory must not contain whitespace: {self.workdir}",
                                  remedy="Choose a work directory without spaces.")
        running = self._running_pid()
        if running is not None:
            raise SupervisorError(f"a supervisord (pid {running}) already runs in {self.workdir}.",
                                  remedy="Stop it first, or give this one a work directory of its own.")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.programs_dir.mkdir(exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        if len(str(self.workdir / "supervisor.sock")) > MAX_SOCKET_PATH and self._socket_dir is None:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="sv-"))
        self.config_path.touch()
        self.config_path.chmod(0o600)  # it holds the control socket's password
        self.config_path.write_text(self._config())
        # an [include] pattern that matches nothing makes supervisord warn
        (self.programs_dir / "_programs.conf").write_text("; each program is a <name>.conf next to this file\n")
        self._output = self.output_path.open("ab")
        started = time.monotonic()
        self._process = subprocess.Popen(
            [str(supervisord), "-c", str(self.config_path)],
            cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=self._output, stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent if self.die_with_parent else None,
            start_new_session=True,  # a Ctrl-C reaches pytest, whose teardown stops us in order
        )
        try:
            wait_until(self._answers_or_exited, timeout=timeout, what="supervisord to answer supervisorctl",
                       interval=0.1)
        except TimeoutError:
            self.stop()
            raise SupervisorError(f"supervisord did not answer within {timeout:.0f} s "
                                  f"({self._log_tail()}).") from None
        if self.pid is None:
            code = self._process.returncode
            self.stop()
            raise SupervisorError(f"supervisord exited with status {code} while starting ({self._log_tail()}).")
        self.ready_seconds = time.monotonic() - started
        return self

    def _answers_or_exited(self) -> bool:
        """True once ``supervisorctl pid`` names our supervisord, or once it has exited (the caller tells which)."""
        if self._process is None or self.pid is None:
            return True
        result = self.run_ctl("pid", timeout=10)
        return result.returncode == 0 and result.stdout.strip() == str(self._process.pid)

    def stop(self, timeout: float = 30) -> None:
        """Stop every program and supervisord (SIGTERM: it stops its programs first); safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            send_signal(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                send_signal(process.pid, signal.SIGKILL)
                process.wait(10)
        if self._output is not None:
            self._output.close()
            self._output = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def __enter__(self) -> LocalSupervisor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands -------------------------------------------------------------------------------------

    def run_ctl(self, *args: str, check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``supervisorctl <args>`` against this supervisord; with ``check``, a non-zero exit raises
        :class:`SupervisorError` with its output (``status`` exits 3 when a process is not running)."""
        command = [str(supervisor_bin("supervisorctl")), "-c", str(self.config_path), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            raise SupervisorError(f"supervisorctl {shlex.join(args)} exited with status {result.returncode}: "
                                  f"{tail_lines(result.stdout + result.stderr, 5)}.")
        return result

    def add_program(self, name: str, command: str, *, numprocs: int = 1, environment: dict[str, str] | None = None,
                    autostart: bool = False, autorestart: bool = False, startsecs: int = 1,
                    stopwaitsecs: int = 30, stopsignal: str = "TERM", directory: str | None = None,
                    startretries: int = 3) -> None:
        """Define (or redefine) program group ``name`` and load it: ``reread`` + ``update``. With ``autostart``
        False nothing starts; a redefinition stops the group's running processes (supervisord's own rule).
        ``startretries``: how many failed starts (exits within ``startsecs``) a process is retried, in BACKOFF,
        before it is FATAL (supervisord's default, 3)."""
        self._check_name(name)
        if numprocs < 1:
            raise ValueError("numprocs must be at least 1")
        if startretries < 0:
            raise ValueError("startretries must be 0 or more")
        if stopsignal.upper() not in _SIGNALS:
            raise ValueError(f"stopsignal must be one of {sorted(_SIGNALS)}, not {stopsignal!r}")
        lines = [
            f"[program:{name}]",
            f"command={_config_value(command, 'command')}",
            f"numprocs={numprocs}",
            "process_name=%(program_name)s_%(process_num)d" if numprocs > 1 else "process_name=%(program_name)s",
            f"autostart={str(autostart).lower()}",
            f"autorestart={str(autorestart).lower()}",
            f"startsecs={startsecs}",
            f"startretries={int(startretries)}",  # a start that fails this often more is FATAL (3: supervisord's)
            f"stopwaitsecs={stopwaitsecs}",
            f"stopsignal={stopsignal.upper()}",
            # a shell wrapper's children go with it
            "stopasgroup=true",
            "killasgroup=true",
            "redirect_stderr=true",
            f"stdout_logfile={_config_value(str(self.log_dir), 'log directory')}/%(program_name)s_%(process_num)d.log",
        ]
        if environment:
            lines.append(f"environment={environment_setting(environment)}")
        if directory is not None:
            lines.append(f"directory={_config_value(directory, 'directory')}")
        path = self.programs_dir / f"{name}.conf"
        staged = path.with_suffix(".tmp")  # not matched by the include pattern until complete
        staged.write_text("\n".join(lines) + "\n")
        staged.replace(path)
        self._load(name)

    def remove_program(self, name: str) -> None:
        """Stop program group ``name`` and forget it; nothing happens for an unknown name."""
        self._check_name(name)
        path = self.programs_dir / f"{name}.conf"
        if path.exists():
            path.unlink()
            self._load(name)

    def pids(self, name: str) -> dict[str, int]:
        """Process name -> pid of the RUNNING processes of program group ``name``."""
        self._check_name(name)
        result = self.run_ctl("status", f"{name}:*")
        output = result.stdout + result.stderr
        if "no such group" in output or "no such process" in output:
            raise SupervisorError(f"supervisord has no program {name!r}: {tail_lines(output, 3)}.",
                                  remedy="Add it first with add_program().")
        return {match["name"].rpartition(":")[2]: int(match["pid"]) for match in _RUNNING_RE.finditer(output)}

    # -- internals ------------------------------------------------------------------------------------

    def _load(self, name: str) -> None:
        self.run_ctl("reread", check=True)
        result = self.run_ctl("update", name, check=True)
        if "ERROR" in result.stdout:
            raise SupervisorError(f"supervisorctl update {name} refused it: {tail_lines(result.stdout, 5)}.")

    @staticmethod
    def _check_name(name: str) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(f"program name {name!r}: use letters, digits, '_', '.' and '-' only")

    def _config(self) -> str:
        socket = _config_value(str(self.socket_path), "socket path")
        workdir = _config_value(str(self.workdir), "work directory")
        # supervisord warns when it runs as root without a user; user=root says we mean it. A normal user must not
        # name a user (no privileges to drop).
        user = "user=root\n" if os.geteuid() == 0 else ""
        # supervisord logs a CRIT line for a control socket without credentials (the socket is 0700 anyway)
        password = secrets.token_hex(16)
        return (
            "; written by kip848_harness.supervisor: rewritten at every start\n"
            "[unix_http_server]\n"
            f"file={socket}\n"
            "chmod=0700\n"
            "username=harness\n"
            f"password={password}\n"
            "\n"
            "[supervisord]\n"
            "nodaemon=true\n"
            "silent=true\n"  # its log goes to logfile only, not to our stdout too
            f"{user}"
            f"directory={workdir}\n"
            f"logfile={workdir}/supervisord.log\n"
            f"pidfile={workdir}/supervisord.pid\n"
            f"childlogdir={workdir}/logs\n"
            "loglevel=info\n"
            "\n"
            "[rpcinterface:supervisor]\n"
            "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
            "\n"
            "[supervisorctl]\n"
            f"serverurl=unix://{socket}\n"
            "username=harness\n"
            f"password={password}\n"
            "\n"
            "[include]\n"
            f"files = {workdir}/conf.d/*.conf\n"
        )

    def _running_pid(self) -> int | None:
        """The pid of a supervisord whose pid file is in ``workdir`` and that still runs (ours or another's)."""
        try:
            pid = int((self.workdir / "supervisord.pid").read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if b"supervisord" in cmdline and str(self.config_path).encode() in cmdline else None

    def _log_tail(self) -> str:
        texts = []
        for path in (self.output_path, self.log_path):
            try:
                texts.append(f"{path}: {tail_lines(path.read_text(errors='replace'), 5)}")
            except OSError:
                continue
        return "; ".join(texts) or "no log written"

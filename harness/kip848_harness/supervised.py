"""Real applications under the session's supervisord, and the ``command`` controller targets that drive them.

An operator who runs consumers under supervisord keeps their configuration in
files and changes ``group.protocol`` by editing one of them, then restarts the
program: that is the recipe these classes install, with absolute paths only, so
the same commands work on the worker and over SSH (a login shell of the same
user on this machine)::

    app = SupervisedConsumerApp(supervisor, "orders", tmp / "orders", bootstrap_servers=b, group_id="orders",
                                topics=["orders"], instances=2)
    app.install("classic")             # files, launcher and the supervisord program (nothing runs yet)
    controllers.add("orders", "command", app.target())           # or app.target(ssh_conn_id="app01")
    resolve_controller("orders").start("classic")
    ...
    app.remove()                       # stop every process, forget the program

The work directory holds:

* ``app.properties``: the client properties of every protocol (bootstrap, ``group.id``, commits ...);
* ``<protocol>.properties``: the keys of one protocol (``group.protocol`` and the protocol's own: the classic
  ``partition.assignment.strategy``, the consumer protocol's ``group.remote.assignor``);
* ``protocol``: the protocol the next start uses (the start and roll commands write it);
* ``run.sh``: the launcher supervisord runs (it reads ``protocol`` when a process starts);
* ``roll.sh``: the rolling restart (writes ``protocol``, then restarts the processes one at a time, each
  RUNNING again before the next; the first failure ends it with a non-zero exit).

:class:`SupervisedWordCount` does the same for Kafka's ``WordCountDemo`` (a Kafka Streams application): one
instance, a full properties file per protocol (``classic.properties``, ``streams.properties``).

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import libversion

from kip848_harness.apps import wordcount_command, wordcount_properties
from kip848_harness.kafka_cluster import LocalKafka
from kip848_harness.supervisor import LocalSupervisor, SupervisorError

#: the consumer application's module (``python -m``)
CONSUMER_APP_MODULE = "kip848_harness.consumer_app"
#: each command's timeout in the targets
TIMEOUT_SECONDS = 60
#: how long the roll waits for a restarted process to be RUNNING (supervisorctl restart already waits startsecs)
ROLL_RUNNING_WAIT_SECONDS = 20
#: the per-protocol keys of the consumer application, before the caller's. Not librdkafka's cooperative-sticky on
#: classic: it writes userData into the assignments, and the brokers refuse the online upgrade of such a group
#: ("userData from a custom assignor would be lost"), so a roll to the consumer protocol would fail
CLASSIC_DEFAULTS = {"group.protocol": "classic", "partition.assignment.strategy": "range"}
CONSUMER_DEFAULTS = {"group.protocol": "consumer", "group.remote.assignor": "uniform"}
_PROPERTIES_HEADER = "# written by kip848_harness.supervised\n"


def _q(path: Path | str) -> str:
    return shlex.quote(str(path))


def _literal(text: str) -> str:
    """``text`` as a literal part of a controller's command template (braces doubled: ``str.format``)."""
    return text.replace("{", "{{").replace("}", "}}")


def _escape_property(text: str, *, key: bool = False) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    return out


def properties_text(properties: Mapping[str, str]) -> str:
    """Java properties text of ``properties`` (one ``key=value`` a line, in the order given)."""
    return _PROPERTIES_HEADER + "".join(f"{_escape_property(str(k), key=True)}={_escape_property(str(v))}\n"
                                        for k, v in properties.items())


def _write_executable(path: Path, text: str) -> None:
    staged = path.with_name(path.name + ".tmp")
    staged.write_text(text)
    staged.chmod(0o755)
    staged.replace(path)


def roll_script(*, ctl: str, roll_path: str, protocol_path: str, processes: Sequence[str],
                protocols: Sequence[str], wait_seconds: int) -> str:
    """The rolling restart's script: docs/controllers.md's ``roll.sh`` (supervisord recipe) with these values
    (``ctl``: the supervisorctl command line; tests/unit/test_recipes.py holds the two texts together). Each
    process is stopped if it may run and started on ``$1`` whatever its state (RUNNING, STARTING, BACKOFF,
    STOPPED, EXITED, FATAL; ``supervisorctl restart`` reads a stopped one as an ERROR), then awaited RUNNING.
    One that was RUNNING and does not come back ends the roll (exit 1); one that was not is named at the end
    (exit 1) after the others were rolled: a way back brings back every process it can."""
    names = " ".join(_q(p) for p in processes)
    choices = " | ".join(protocols)
    return f"""#!/bin/sh
# {roll_path} <protocol>: restart each process on <protocol>, one at a time, whatever state it is in
# (RUNNING, STARTING, BACKOFF, STOPPED, EXITED, FATAL), each RUNNING again before the next. A process that was
# RUNNING and does not come back ends the roll (exit 1: a roll never takes down two that ran); one that was not
# RUNNING and does not come back is named at the end (exit 1), after the others were rolled.
set -u
protocol="${{1:-}}"
case "$protocol" in
  {choices}) ;;
  *) echo "roll: unknown protocol '$protocol' (one of: {choices})" >&2; exit 2 ;;
esac
printf '%s' "$protocol" > {_q(protocol_path)} || exit 1
state_of() {{ {ctl} status "$1" 2>&1 | awk '{{print $2; exit}}'; }}
not_back=""
for proc in {names}; do
  was=$(state_of "$proc")
  echo "roll: $proc is $was"
  case "$was" in
    RUNNING | STARTING | BACKOFF | STOPPING) {ctl} stop "$proc" ;;  # "ERROR (not running)": it just ended
    STOPPED | EXITED | FATAL) ;;
    *) echo "roll: $proc: unknown state: $({ctl} status "$proc" 2>&1)" >&2; exit 1 ;;
  esac
  case "$(state_of "$proc")" in
    STOPPED | EXITED | FATAL) ;;
    *) echo "roll: $proc does not stop: $({ctl} status "$proc" 2>&1)" >&2; exit 1 ;;
  esac
  {ctl} start "$proc"  # "ERROR (spawn error)": it did not stay up; the wait below says how it ends
  why=""
  deadline=$(( $(date +%s) + {wait_seconds} ))
  while :; do
    line=$({ctl} status "$proc" 2>&1)
    state=$(printf '%s\\n' "$line" | awk '{{print $2; exit}}')
    case "$state" in
      RUNNING) break ;;
      STARTING | BACKOFF) ;;
      *) why="$state after its start: $line"; break ;;
    esac
    if [ "$(date +%s)" -ge "$deadline" ]; then why="not RUNNING {wait_seconds} s after its start: $line"; break; fi
    sleep 0.2
  done
  if [ -z "$why" ]; then printf '%s\\n' "$line"; continue; fi
  if [ "$was" = RUNNING ]; then
    echo "roll: $proc was RUNNING and is $why: the roll stops here, the processes after it were not restarted" >&2
    exit 1
  fi
  echo "roll: $proc was $was and is $why: going on with the others" >&2
  not_back="$not_back $proc ($was before: $why);"
done
if [ -n "$not_back" ]; then
  echo "roll: not RUNNING on $protocol:$not_back" >&2; exit 1
fi
"""


class _Supervised:
    """What both applications share: a program group of ``instances`` processes under ``supervisor``, its work
    directory, its launcher and roll scripts, and the command controller target."""

    protocols: tuple[str, ...] = ()
    instances: int = 1
    autorestart: bool = False
    stopwaitsecs: int = 10
    #: how long a process must stay up to count as started (supervisorctl start and restart wait for it): long
    #: enough that a consumer refused by its group coordinator (it exits at its first heartbeat) is not RUNNING
    startsecs: int = 2
    #: starts that fail (exit before ``startsecs``) before a process is FATAL; a test sets it high to make an
    #: instance crash-loop for as long as it looks (a platform that restarts forever: systemd, Kubernetes)
    startretries: int = 3
    #: the launcher exits at once (status 3) when ``<workdir>/crash.<protocol>.<n>`` exists: a deployment fault
    #: planted by a test on one instance and one protocol (a crash loop, FATAL), never in the page's recipe
    crash_markers: bool = False

    def __init__(self, supervisor: LocalSupervisor, name: str, workdir: Path) -> None:
        LocalSupervisor._check_name(name)
        self.supervisor = supervisor
        self.name = name
        self.workdir = Path(workdir).absolute()

    # -- where things are -----------------------------------------------------------------------------

    @property
    def protocol_path(self) -> Path:
        return self.workdir / "protocol"

    @property
    def launcher_path(self) -> Path:
        return self.workdir / "run.sh"

    @property
    def roll_path(self) -> Path:
        return self.workdir / "roll.sh"

    def properties_path(self, protocol: str) -> Path:
        return self.workdir / f"{protocol}.properties"

    @property
    def process_names(self) -> list[str]:
        """supervisord's names of the group's processes (``name:name_0`` ...), in roll order."""
        if self.instances == 1:
            return [f"{self.name}:{self.name}"]
        return [f"{self.name}:{self.name}_{i}" for i in range(self.instances)]

    @property
    def group_pattern(self) -> str:
        return f"{self.name}:*"

    @property
    def protocol(self) -> str:
        """The protocol the next start uses (as the start and roll commands left it)."""
        return self.protocol_path.read_text().strip()

    # -- installing -----------------------------------------------------------------------------------

    def _check_protocol(self, protocol: str) -> str:
        if protocol not in self.protocols:
            raise ValueError(f"protocol must be one of {', '.join(self.protocols)}, not {protocol!r}")
        return protocol

    def _write_files(self) -> None:
        raise NotImplementedError

    def _exec_line(self) -> str:
        """The launcher's last line: ``exec ...`` (``$n``: the process number, ``$protocol``: the protocol)."""
        raise NotImplementedError

    def install(self, protocol: str = "classic") -> None:
        """Write the work directory's files and define the supervisord program (autostart off: nothing runs).
        A program of this name that runs is stopped by the redefinition (supervisord's rule)."""
        self._check_protocol(protocol)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_files()
        self.protocol_path.write_text(protocol)
        number = "n=0" if self.instances == 1 else f'n="${{SUPERVISOR_PROCESS_NAME#{self.name}_}}"'
        _write_executable(self.launcher_path, (
            "#!/bin/sh\n"
            f"# {self.name}: launcher run by supervisord (written by kip848_harness.supervised)\n"
            "set -eu\n"
            f"cd {_q(self.workdir)}\n"
            f"protocol=$(cat {_q(self.protocol_path)})\n"
            f"{number}  # the process number, from supervisord's name for this process\n"
            + (f'[ ! -e {_q(self.workdir)}/crash."$protocol"."$n" ] || {{ echo "planted crash on $protocol" >&2; '
               "exit 3; }\n" if self.crash_markers else "")
            + f"{self._exec_line()}\n"))
        _write_executable(self.roll_path, self._roll_script())
        self.supervisor.add_program(self.name, str(self.launcher_path), numprocs=self.instances,
                                    autostart=False, autorestart=self.autorestart, stopsignal="TERM",
                                    startsecs=self.startsecs, stopwaitsecs=self.stopwaitsecs,
                                    directory=str(self.workdir), startretries=self.startretries)

    def _roll_script(self) -> str:
        return roll_script(ctl=self.supervisor.ctl, roll_path=str(self.roll_path),
                           protocol_path=str(self.protocol_path), processes=self.process_names,
                           protocols=self.protocols, wait_seconds=ROLL_RUNNING_WAIT_SECONDS)

    # -- the controller's target ----------------------------------------------------------------------

    def _config_command(self) -> str:
        raise NotImplementedError

    def _client(self) -> tuple[str, str]:
        raise NotImplementedError

    def commands(self, by_instance: bool = False) -> dict[str, str]:
        """The command templates of the ``command`` controller (absolute paths, shell-quoted); ``by_instance``:
        also ``stop_instance`` / ``start_instance`` (one process, ``{instance}`` as supervisorctl names it)."""
        ctl = _literal(self.supervisor.ctl)
        group = shlex.quote(self.group_pattern)
        protocol = f"printf '%s' {{group_protocol}} > {_literal(_q(self.protocol_path))}"
        commands = {
            "stop": f"{ctl} stop {group}",
            "start": f"{protocol} && {ctl} start {group}",
            "roll": f"{_literal(_q(self.roll_path))} {{group_protocol}}",
            "status": f"{ctl} status {group}",
            "config": self._config_command(),
            "logs": f"{ctl} tail -{{max_bytes}} {{instance}}",  # stdout and stderr: the programs redirect stderr
        }
        if by_instance:
            commands["stop_instance"] = f"{ctl} stop {{instance}}"
            commands["start_instance"] = f"{protocol} && {ctl} start {{instance}}"
        return commands

    def member_identity(self) -> dict[str, str] | None:
        """How a process's supervisord name gives its group member's identity (None: not derivable)."""
        return None

    def target(self, ssh_conn_id: str | None = None, *, by_instance: bool = False) -> dict[str, Any]:
        """The ``command`` controller target for the registry (``ssh_conn_id``: run the commands over SSH;
        ``by_instance``: the one-instance commands and the members' identities too)."""
        client, version = self._client()
        target: dict[str, Any] = {
            "commands": self.commands(by_instance), "status_format": "supervisorctl", "config_format": "properties",
            "client": client, "client_version": version, "timeout_seconds": TIMEOUT_SECONDS,
        }
        if ssh_conn_id:
            target["ssh_conn_id"] = ssh_conn_id
        if by_instance and (identity := self.member_identity()):
            target["member_identity"] = identity
        return target

    # -- test set-up and tear-down --------------------------------------------------------------------

    def start(self, protocol: str) -> None:
        """Start every process on ``protocol``, as the start command does (locally)."""
        self.protocol_path.write_text(self._check_protocol(protocol))
        self.supervisor.run_ctl("start", self.group_pattern, check=True)

    def stop(self) -> None:
        """Stop every process (nothing happens for processes already stopped, or a program not installed)."""
        result = self.supervisor.run_ctl("stop", self.group_pattern)
        output = result.stdout + result.stderr
        if result.returncode != 0 and "no such group" not in output:
            raise SupervisorError(f"supervisorctl stop {self.group_pattern} exited {result.returncode}: "
                                  f"{output.strip()}")

    def remove(self) -> None:
        """Stop every process and forget the program."""
        self.stop()
        self.supervisor.remove_program(self.name)

    def pids(self) -> dict[str, int]:
        """Process name (``name_0`` ...) -> pid of the RUNNING processes."""
        return self.supervisor.pids(self.name)

    def crash_on(self, process_num: int, protocol: str, crash: bool = True) -> None:
        """Plant (or lift) a crash of process ``process_num`` whenever it starts on ``protocol`` (the app must be
        installed with ``crash_markers``): its launcher exits at once, so supervisord retries it (BACKOFF), then
        gives up (FATAL)."""
        if not self.crash_markers:
            raise ValueError("crash markers are off: set crash_markers = True before install()")
        marker = self.workdir / f"crash.{self._check_protocol(protocol)}.{int(process_num)}"
        if crash:
            marker.write_text("planted by a test\n")
        else:
            marker.unlink(missing_ok=True)

    def state(self, process: str) -> str:
        """supervisord's state of ``process`` (``name_0`` or ``name:name_0``): RUNNING, STARTING, BACKOFF ..."""
        full = process if ":" in process else f"{self.name}:{process}"
        out = self.supervisor.run_ctl("status", full)
        fields = (out.stdout or out.stderr).split()
        return fields[1] if len(fields) > 1 else "UNKNOWN"

    def log_path(self, process_num: int = 0) -> Path:
        """Where process ``process_num`` writes its output."""
        return self.supervisor.program_log(self.name, process_num)

    def log_tails(self, lines: int = 15) -> dict[int, list[str]]:
        """The last ``lines`` lines each process wrote (a test's diagnostics when an instance is not where
        it should be: whether it exited, and on what)."""
        tails: dict[int, list[str]] = {}
        for num in range(self.instances):
            try:
                text = self.log_path(num).read_text(errors="replace")
            except OSError as exc:
                tails[num] = [f"(no log: {exc})"]
                continue
            tails[num] = text.splitlines()[-lines:]
        return tails


class SupervisedConsumerApp(_Supervised):
    """``instances`` consumer application processes (:mod:`~kip848_harness.consumer_app`,
    real confluent-kafka consumers) of group ``group_id`` under supervisord, configured by files.

    ``classic_properties`` and ``consumer_properties`` add to (or override) the per-protocol defaults
    (``partition.assignment.strategy=range``; ``group.remote.assignor=uniform``); ``static``
    gives process ``N`` the ``group.instance.id`` ``<group_id>-N``; every process has ``client.id``
    ``app-N``; ``extra_args`` go to each process's command line (``--poll-pause-s 1`` ...).

    ``stale_launcher`` plants a deployment mistake: the launcher never reads the protocol switch and always
    runs ``classic.properties``, while the config command still shows the protocol's file (what the platform
    *says* it runs). No check before the roll can see it; only an instance restarted on it can."""

    protocols = ("classic", "consumer")

    def __init__(self, supervisor: LocalSupervisor, name: str, workdir: Path, *, bootstrap_servers: str,
                 group_id: str, topics: list[str], instances: int = 2,
                 classic_properties: dict[str, str] | None = None,
                 consumer_properties: dict[str, str] | None = None, output_topic: str | None = None,
                 static: bool = False, autorestart: bool = False, extra_args: Sequence[str] = (),
                 stale_launcher: bool = False) -> None:
        super().__init__(supervisor, name, workdir)
        if instances < 1:
            raise ValueError("instances must be at least 1")
        if not topics:
            raise ValueError("topics: at least one")
        self.bootstrap_servers, self.group_id, self.topics = bootstrap_servers, group_id, list(topics)
        self.instances = int(instances)
        self.protocol_properties = {"classic": {**CLASSIC_DEFAULTS, **(classic_properties or {})},
                                    "consumer": {**CONSUMER_DEFAULTS, **(consumer_properties or {})}}
        self.output_topic, self.static, self.autorestart = output_topic, static, autorestart
        self.extra_args = list(extra_args)
        self.stale_launcher = stale_launcher

    def member_identity(self) -> dict[str, str] | None:
        if self.instances == 1:  # supervisord names the one process after the program: no number to derive from
            return None
        name = re.escape(self.name)
        identity = {"match": rf"^{name}:{name}_(?P<n>[0-9]+)$", "client_id": "app-{n}"}
        if self.static:
            identity["group_instance_id"] = f"{_literal(self.group_id)}-{{n}}"
        return identity

    @property
    def app_properties_path(self) -> Path:
        return self.workdir / "app.properties"

    def app_properties(self) -> dict[str, str]:
        """The properties every protocol shares (``app.properties``)."""
        return {"bootstrap.servers": self.bootstrap_servers, "group.id": self.group_id,
                "enable.auto.commit": "false", "auto.offset.reset": "earliest"}

    def _write_files(self) -> None:
        self.app_properties_path.write_text(properties_text(self.app_properties()))
        for protocol, properties in self.protocol_properties.items():
            self.properties_path(protocol).write_text(properties_text(properties))

    def _exec_line(self) -> str:
        args = [sys.executable, "-m", CONSUMER_APP_MODULE, "--config-file", str(self.app_properties_path)]
        launched = "classic" if self.stale_launcher else '"$protocol"'
        line = shlex.join(args) + f" --config-file {_q(self.workdir)}/{launched}.properties"
        line += ' --client-id "app-$n"' + f" --topics {_q(','.join(self.topics))}"
        if self.static:
            line += f' --instance-id {_q(self.group_id)}-"$n"'
        if self.output_topic:
            line += f" --output-topic {_q(self.output_topic)}"
        if self.extra_args:
            line += " " + shlex.join(self.extra_args)
        return "exec " + line

    def _config_command(self) -> str:
        return (f"cat {_literal(_q(self.app_properties_path))} "
                f"{_literal(_q(self.workdir))}/{{group_protocol}}.properties")

    def _client(self) -> tuple[str, str]:
        return "librdkafka", str(libversion()[0])


class SupervisedWordCount(_Supervised):
    """The harness's word count (Kafka's ``WordCountDemo``, a Streams application) under supervisord: one instance,
    a full properties file per protocol (``classic.properties``, ``streams.properties``; ``properties`` added to
    both, ``protocol_properties[protocol]`` to one), state in ``<workdir>/state``."""

    protocols = ("classic", "streams")
    instances = 1
    stopwaitsecs = 30  # a clean Streams shutdown (commit, close the state stores) takes a few seconds
    startsecs = 3  # a JVM's start

    def __init__(self, supervisor: LocalSupervisor, name: str, workdir: Path, *, kafka: LocalKafka,
                 application_id: str, properties: dict[str, str] | None = None,
                 protocol_properties: dict[str, dict[str, str]] | None = None) -> None:
        super().__init__(supervisor, name, workdir)
        unknown = sorted(set(protocol_properties or {}) - set(self.protocols))
        if unknown:
            raise ValueError(f"protocol_properties: unknown protocol(s) {', '.join(unknown)}")
        self.kafka, self.application_id = kafka, application_id
        self.properties = dict(properties or {})
        self.protocol_properties = {p: dict((protocol_properties or {}).get(p) or {}) for p in self.protocols}

    @property
    def state_dir(self) -> Path:
        return self.workdir / "state"

    def streams_properties(self, protocol: str) -> dict[str, str]:
        """The full properties file of ``protocol``."""
        return wordcount_properties(self.kafka.bootstrap_servers, self.application_id,
                                    group_protocol=self._check_protocol(protocol), state_dir=self.state_dir,
                                    extra={**self.properties, **self.protocol_properties[protocol]})

    def _write_files(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for protocol in self.protocols:
            self.properties_path(protocol).write_text(properties_text(self.streams_properties(protocol)))

    def _exec_line(self) -> str:
        placeholder = "KIP848_PROPERTIES_FILE"
        command = wordcount_command(self.kafka.distribution, [placeholder])
        joined = shlex.join(command)
        if not joined.endswith(" " + placeholder):
            raise RuntimeError(f"unexpected java command line (the properties file is not last): {joined}")
        return "exec " + joined[: -len(placeholder)] + f'{_q(self.workdir)}/"$protocol".properties'

    def _config_command(self) -> str:
        return f"cat {_literal(_q(self.workdir))}/{{group_protocol}}.properties"

    def _client(self) -> tuple[str, str]:
        return "java", self.kafka.version


__all__ = ["CONSUMER_APP_MODULE", "SupervisedConsumerApp", "SupervisedWordCount", "properties_text", "roll_script"]

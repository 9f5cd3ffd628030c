"""``CommandController``: an application stopped, started, rolled and inspected by the platform's own commands.

Most platforms already have a command for each step: ``systemctl`` for units,
``supervisorctl`` for programs, ``nomad job``, an Ansible playbook, a team's
script. The deployment's registry gives the commands as templates, and where
they run: on the Airflow worker, or on the application's host over SSH through
an Airflow connection (Airflow's SSH provider)::

    orders:
      kind: command
      target:
        ssh_conn_id: app01                    # absent: run on the worker
        commands:
          stop: supervisorctl stop 'orders:*'
          start: >-
            printf 'group.protocol=%s\\n' {group_protocol} > /etc/orders/protocol.properties
            && supervisorctl start 'orders:*'
          status: supervisorctl status 'orders:*'
          config: cat /etc/orders/consumer.properties /etc/orders/protocol.properties
        status_format: supervisorctl          # json | supervisorctl | systemd
        timeout_seconds: 120

Templates take ``{group_protocol}`` (``start``, ``roll``, ``start_instance`` and ``config``: the
properties the application will run with on that protocol), ``{instance}`` (``stop_instance``,
``start_instance``, ``logs``: one instance's name as the status command prints it), ``{max_bytes}`` (``logs``,
e.g. ``supervisorctl tail -{max_bytes} {instance}``) and the run parameters the entry declares under
``params``; a template naming anything else is refused when the registry entry is read. No shell ever
parses a value: each placeholder runs as ``"${KIP848_ARG_<name>}"`` with the value in that environment
variable, and a placeholder where the shell would read the value again (inside quotes, ``$( )``, a
here-document, ``sh -c``, ``eval`` ...) is refused when the entry is read (:mod:`.templates`). Commands get a
clean environment (``env`` adds to it). Exit codes are checked (``supervisorctl status`` exits 3 when a
process is not running: accepted for the supervisorctl format), output is
kept (its tail) and redacted, and each failure names the controller, the
step, the command and where it ran. Without a ``status`` command the
controller cannot tell whether instances exist (the DAGs then fall back to the
broker's session timeout); without ``config`` the lint says the configuration
was not checked.

With ``stop_instance`` and ``start_instance`` (and a ``status``), the rolling upgrade restarts the
instances itself, one at a time: it stops the first, makes sure its static member left, starts it on
the new protocol and checks that it came in on it before it touches the next one (the first-instance
gate). ``member_identity`` tells it which group member an instance is, from the instance's name, when
the status output does not say (supervisorctl and systemd print names only)::

        member_identity:
          match: '^orders:orders_(?P<n>[0-9]+)$'   # the instance names the status command prints
          client_id: 'orders-{n}'                  # the client.id that instance runs with
          group_instance_id: 'orders-{n}'          # its group.instance.id (static membership)
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from airflow.sdk import BaseHook

from airflow_provider_kip848.controllers.errors import PlatformError
from airflow_provider_kip848.controllers.formats import (
    CONFIG_FORMATS,
    STATUS_FORMATS,
    FormatError,
    parse_config,
    parse_status,
)
from airflow_provider_kip848.controllers.protocol import (
    MAX_LOG_BYTES,
    ApplicationController,
    ApplicationStatus,
    ClientConfig,
    Instance,
    InstanceLog,
)
from airflow_provider_kip848.controllers.runners import CommandOutcome, LocalRunner, Runner, SSHRunner
from airflow_provider_kip848.controllers.schema import Arg
from airflow_provider_kip848.controllers.templates import ENV_PREFIX, display, render, template_problems
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.patterns import NamePattern, compile_name_pattern

STEPS = ("stop", "start", "roll", "status", "config", "stop_instance", "start_instance", "logs", "logs_from_start")
#: the steps whose commands take {group_protocol} (config: the properties the application will run with on it)
PROTOCOL_STEPS = ("start", "roll", "config", "start_instance")
#: the steps whose commands take {instance}: one instance's name, as the status command printed it
INSTANCE_STEPS = ("stop_instance", "start_instance")
#: the read-only steps that print one instance's log: take {instance} and {max_bytes} (logs_from_start: the first
#: lines of its current incarnation, where the platform keeps them)
LOG_STEPS = ("logs", "logs_from_start")
#: the member facts ``member_identity`` may derive from an instance's name
IDENTITY_FIELDS = ("client_id", "group_instance_id", "host")
#: the longest string a run may give a param (it travels in an environment variable)
MAX_VALUE_LENGTH = 4096
#: the bounds of the target's numbers (seconds): a command past a day belongs in a wait, not a task
MAX_TIMEOUT_SECONDS = 86_400
MAX_CONNECT_TIMEOUT_SECONDS = 600
#: what ``env`` names may look like (exported by name over SSH)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: the value check() passes through the runner's shell: quotes, a $( ), a backtick, a backslash, a newline
_PROBE = "kip848 probe: it's \"quoted\"; $(true) `true` \\ *\n$HOME"
#: exit codes that are not failures, per status format (supervisorctl exits 3 when a process is not running)
_STATUS_EXIT_CODES = {"supervisorctl": (0, 3)}
#: secret-looking assignments in command output (key=value, key: value, "key": "value")
_SECRET_ASSIGNMENT = re.compile(r"(?i)\b([\w.-]*(?:password|secret|token|jaas\.config|key\.pem|user\.info)[\w.-]*)"
                                r"(\"?\s*[=:]\s*\"?)([^\s\",}]+)")


def redact_output(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Command output with known secrets and secret-looking ``key=value`` assignments replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _SECRET_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)


class CommandController(ApplicationController):
    """The platform's own commands, on the worker or over SSH (see the module docstring)."""

    schema: ClassVar[Mapping[str, Arg]] = {
        "commands": Arg("object", required=True,
                        description="stop and start (required), roll, status, config: shell command templates"),
        "ssh_conn_id": Arg("string", description="run the commands on this SSH connection's host (else: the worker)"),
        "status_format": Arg("string", enum=STATUS_FORMATS, description="what the status command prints"),
        "config_format": Arg("string", enum=CONFIG_FORMATS, description="what the config command prints"),
        "client": Arg("string", enum=("java", "librdkafka"), description="the application's client library"),
        "client_version": Arg("string", pattern=r"\d+\.\d+(\.\d+)?", description="its release"),
        "timeout_seconds": Arg("number", minimum=1, maximum=MAX_TIMEOUT_SECONDS,
                               description="each command's timeout (default 120)"),
        "connect_timeout_seconds": Arg("number", minimum=1, maximum=MAX_CONNECT_TIMEOUT_SECONDS,
                                       description="SSH connect timeout (default 10)"),
        "env": Arg("object", description="environment for the commands (no secrets: they are shown)"),
        "params": Arg("object", description="run parameters the templates use: name -> {type, enum, pattern, "
                                            "default, required, description}"),
        "member_identity": Arg("object", description="{match: regex on an instance's name, client_id / "
                                                     "group_instance_id / host: templates of its named groups}"),
    }

    def __init__(self, *, commands: Mapping[str, str], ssh_conn_id: str | None = None,
                 status_format: str = "json", config_format: str = "properties", client: str | None = None,
                 client_version: str | None = None, timeout_seconds: float = 120.0,
                 connect_timeout_seconds: float = 10.0, env: Mapping[str, str] | None = None,
                 params: Mapping[str, Mapping[str, Any]] | None = None,  # Any: JSON of several shapes (XCom, reports)
                 member_identity: Mapping[str, str] | None = None, **run_args: Any) -> None:
        self.declared = self._declared(params or {})
        self._check_commands(commands, set(self.declared))
        self._check_env(env)
        for name, value in (("timeout_seconds", timeout_seconds), ("connect_timeout_seconds", connect_timeout_seconds)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name}: a finite number of seconds, not {value!r}")
        self.commands = dict(commands)
        self.identity = self._identity(member_identity)
        self.ssh_conn_id = ssh_conn_id
        self.status_format, self.config_format = status_format, config_format
        self.client, self.client_version = client, client_version
        self.timeout = float(timeout_seconds)
        self.connect_timeout = float(connect_timeout_seconds)
        self.env = dict(env or {})
        self.values = {name: run_args.get(name, arg.default) for name, arg in self.declared.items()}
        missing = sorted(n for n, v in self.values.items() if v is None)
        if missing:
            raise ValueError(f"params {', '.join(missing)}: neither given by the run nor defaulted")
        self._runner: Runner | None = None

    @staticmethod
    def _check_commands(commands: Mapping[str, str], declared: set[str]) -> None:
        """Every step known, stop and start given, each template a string whose placeholders are ones the step
        takes, bare, where no shell reads the value again (ValueError naming the step, the placeholder and why)."""
        unknown = sorted(set(commands) - set(STEPS))
        if unknown:
            raise ValueError(f"commands: unknown step(s) {', '.join(unknown)} (steps: {', '.join(STEPS)})")
        missing = [s for s in ("stop", "start") if not commands.get(s)]
        if missing:
            raise ValueError(f"commands: {', '.join(missing)} required")
        if any(not isinstance(v, str) for v in commands.values()):
            raise ValueError("commands: every command is a string (a shell command template)")
        for step, template in commands.items():
            allowed = (declared | ({"group_protocol"} if step in PROTOCOL_STEPS else set())
                       | ({"instance"} if step in INSTANCE_STEPS else set())
                       | ({"instance", "max_bytes"} if step in LOG_STEPS else set()))
            try:
                fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
            except ValueError as exc:
                raise ValueError(f"commands.{step}: {exc} (write {{{{ and }}}} for literal braces)") from exc
            for field, spec, conversion in fields:
                if field not in allowed:
                    raise ValueError(f"commands.{step}: {{{field}}} is not a parameter it can take "
                                     f"({', '.join(sorted(allowed)) or 'none'}; write {{{{ and }}}} for braces)")
                if spec or conversion:  # !r or :.3 would change the value
                    raise ValueError(f"commands.{step}: {{{field}}} takes no conversion or format spec "
                                     "(the value is passed as it is)")
            problems = template_problems(template) if fields else []
            if problems:
                raise ValueError(f"commands.{step}: " + "; ".join(map(str, problems)) + ". A value reaches the "
                                 "command as one word only where its placeholder is a bare part of a word that no "
                                 "command parses again (docs/controllers.md, 'What a template may not do')")

    @staticmethod
    def _check_env(env: Mapping[str, str] | None) -> None:
        """``env``: variable names (exported by name over SSH), string values without NUL."""
        for key, value in (env or {}).items():
            if not isinstance(key, str) or not _ENV_NAME.fullmatch(key) or key.startswith(ENV_PREFIX):
                raise ValueError(f"env: {key!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*, not starting "
                                 f"with {ENV_PREFIX}: those carry the values)")
            if not isinstance(value, str):
                raise ValueError("env: every value is a string")
            if "\x00" in value:
                raise ValueError(f"env.{key}: a value holds no NUL character")

    @classmethod
    def _declared(cls, params: Mapping[str, Mapping[str, Any]]) -> dict[str, Arg]:
        out = {}
        for name, spec in params.items():
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", str(name)) or name in ("group_protocol", "instance",
                                                                              "max_bytes"):
                raise ValueError(f"params.{name}: a parameter name is lower_snake_case (and not group_protocol, "
                                 "instance or max_bytes)")
            if name in cls.schema:  # a run must never set the target (commands, ssh_conn_id, env ...)
                raise ValueError(f"params.{name}: the name of one of the controller's own arguments "
                                 f"({', '.join(sorted(cls.schema))}); choose another")
            if not isinstance(spec, Mapping):
                raise ValueError(f"params.{name}: must be a mapping (type, enum, pattern, default ...)")
            try:
                arg = Arg.from_dict(spec)
            except ValueError as exc:
                raise ValueError(f"params.{name}: {exc}") from exc
            if arg.type == "string" and (arg.max_length is None or arg.max_length > MAX_VALUE_LENGTH):
                arg = replace(arg, max_length=MAX_VALUE_LENGTH)
            if arg.default is None and not arg.required:  # a template needs a value: without a default, the run's
                arg = replace(arg, required=True)
            out[name] = arg
            if arg.type not in ("string", "integer", "number", "boolean"):
                raise ValueError(f"params.{name}: a command parameter is a string, integer, number or boolean")
            if arg.default is not None and (problem := arg.problem(name, arg.default)) is not None:
                raise ValueError(f"params.{name}: its default is not valid: {problem}")
        return out

    @staticmethod
    def _identity(spec: Mapping[str, str] | None) -> tuple[NamePattern, dict[str, str]] | None:
        """``member_identity`` checked: a regex with named groups, and templates using only those groups."""
        if not spec:
            return None
        if not isinstance(spec, Mapping) or not isinstance(spec.get("match"), str):
            raise ValueError("member_identity: a mapping with 'match' (a regex on the instance names) and "
                             f"templates for {', '.join(IDENTITY_FIELDS)}")
        unknown = sorted(set(spec) - {"match", *IDENTITY_FIELDS})
        if unknown:
            raise ValueError(f"member_identity: unknown key(s) {', '.join(unknown)} "
                             f"(match, {', '.join(IDENTITY_FIELDS)})")
        try:  # RE2: matched against the names the platform prints, in linear time whatever the pattern
            pattern = compile_name_pattern(spec["match"], "member_identity.match")
        except InvalidArgument as exc:
            raise ValueError(exc.what) from None
        templates = {k: v for k, v in spec.items() if k in IDENTITY_FIELDS}
        if not templates:
            raise ValueError(f"member_identity: give at least one of {', '.join(IDENTITY_FIELDS)}")
        for key, template in templates.items():
            if not isinstance(template, str):
                raise ValueError(f"member_identity.{key}: a template string")
            try:
                fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
            except ValueError as exc:
                raise ValueError(f"member_identity.{key}: {exc}") from exc
            if not fields <= set(pattern.groupindex):
                raise ValueError(f"member_identity.{key}: {{{', '.join(sorted(fields - set(pattern.groupindex)))}}} "
                                 f"is not a named group of match ({', '.join(pattern.groupindex) or 'none'})")
        return pattern, templates

    def _identified(self, instance: Instance) -> Instance:
        """The instance with the member facts ``member_identity`` derives from its name (none: as it is)."""
        if self.identity is None:
            return instance
        pattern, templates = self.identity
        match = pattern.fullmatch(instance.name)
        if match is None:
            return instance
        groups = {k: v or "" for k, v in match.groupdict().items()}
        derived: dict[str, Any] = {k: t.format(**groups) for k, t in templates.items() if getattr(instance, k) is None}
        return replace(instance, **derived)

    @classmethod
    def run_arguments(  # Any: registry arguments (YAML values), checked by the schema
            cls, target: Mapping[str, Any]) -> Mapping[str, Arg]:
        """The ``params`` the registry's target declares (ValueError: they are not valid)."""
        params = target.get("params") or {}
        if not isinstance(params, Mapping):
            raise ValueError("params must be a mapping of name -> {type, enum, pattern, default ...}")
        return cls._declared(params)

    # -- running ------------------------------------------------------------------------------------

    @property
    def runner(self) -> Runner:
        if self._runner is None:
            self._runner = (SSHRunner(self.ssh_conn_id, connect_timeout=self.connect_timeout)
                            if self.ssh_conn_id else LocalRunner())
        return self._runner

    def _values(self, group_protocol: str | None, instance: str | None,
                max_bytes: int | None = None) -> dict[str, str]:
        """Every placeholder's value as text (a boolean as ``true``/``false``)."""
        values = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in self.values.items()}
        if max_bytes is not None:
            values["max_bytes"] = str(max_bytes)
        if group_protocol is not None:
            values["group_protocol"] = group_protocol
        if instance is not None:
            values["instance"] = instance
        return values

    def _render(self, step: str, group_protocol: str | None = None, instance: str | None = None,
                max_bytes: int | None = None) -> tuple[str, dict[str, str], str]:
        """The step's shell text (placeholders as ``"${KIP848_ARG_name}"``), the environment holding the values,
        and the same command with the values written in as quoted words (what approvals and reports show)."""
        values = self._values(group_protocol, instance, max_bytes)
        script, env = render(self.commands[step], values)
        return script, env, display(self.commands[step], values)

    def _secrets(self) -> tuple[str, ...]:
        if not self.ssh_conn_id:
            return ()
        try:
            conn = BaseHook.get_connection(self.ssh_conn_id)
        except Exception:  # noqa: BLE001 - nothing to redact from a connection that cannot be read
            return ()
        extra = conn.extra_dejson or {}
        return tuple(s for s in (conn.password, extra.get("private_key"), extra.get("private_key_passphrase")) if s)

    def _run(self, step: str, group_protocol: str | None = None, *, ok_codes: tuple[int, ...] = (0,),
             instance: str | None = None) -> CommandOutcome:
        script, values, command = self._render(step, group_protocol, instance)
        outcome = self.runner.run(script, timeout=self.timeout, env={**self.env, **values}, shown=command)
        if outcome.exit_code not in ok_codes:
            secrets = self._secrets()
            err = redact_output(outcome.tail(outcome.stderr).strip(), secrets)
            out = redact_output(outcome.tail(outcome.stdout).strip(), secrets)
            shown = err or out or "(no output)"
            raise PlatformError(f"`{redact_output(command, secrets)}` exited {outcome.exit_code} on {outcome.where}: "
                                f"{shown}",
                                retriable=False,
                                remedy="Fix what the command reports on that host (it ran as the registry gives "
                                       "it), then rerun the task.")
        return outcome

    def _report(self, outcome: CommandOutcome) -> dict[str, Any]:
        secrets = self._secrets()
        return {"command": redact_output(outcome.command, secrets), "where": outcome.where,
                "exit_code": outcome.exit_code,
                "seconds": round(outcome.seconds, 3),
                "output": redact_output(outcome.tail((outcome.stdout + outcome.stderr).strip()), secrets)}

    # -- the protocol -------------------------------------------------------------------------------

    def stop(self) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        return self._report(self._run("stop"))

    def start(self, group_protocol: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        return self._report(self._run("start", group_protocol))

    def can_roll(self) -> bool:
        return bool(self.commands.get("roll"))

    def roll(self, group_protocol: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        if not self.can_roll():
            raise PlatformError("no roll command is configured")
        return self._report(self._run("roll", group_protocol))

    def can_roll_instances(self) -> bool:
        return all(self.commands.get(step) for step in (*INSTANCE_STEPS, "status"))

    def _listed(self, name: str) -> str:
        """``name`` if the status lists it (a name that is not an instance's is never put in a command)."""
        if not self.can_roll_instances():
            raise PlatformError("no stop_instance / start_instance / status commands are configured")
        names = [i.name for i in self.status().instances]
        if name not in names:
            raise PlatformError(f"the platform lists no instance {name!r} (it lists: {', '.join(names) or 'none'})",
                                remedy="Give a name the status command prints.")
        return name

    def stop_instance(self, name: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        return self._report(self._run("stop_instance", instance=self._listed(name)))

    def start_instance(  # Any: the platform's answer, JSON of several shapes
            self, name: str, group_protocol: str) -> Mapping[str, Any]:
        return self._report(self._run("start_instance", group_protocol, instance=self._listed(name)))

    def can_read_logs(self) -> bool:
        return bool(self.commands.get("logs"))

    def logs(self, instance: str, *, max_bytes: int = 65536, from_start: bool = False,
             timeout_s: float = 20.0) -> InstanceLog:
        """The ``logs`` command's output for one instance (``logs_from_start`` with ``from_start``, if given), run
        like every step (the name one inert word; one starting with ``-`` would read as an option: refused),
        within ``timeout_s`` (at most the entry's timeout), its newest ``max_bytes`` kept whatever the command
        prints, redacted. A command that fails or times out: an unknown log, saying why."""
        step = "logs_from_start" if from_start and self.commands.get("logs_from_start") else "logs"
        if not self.can_read_logs():
            return InstanceLog.unknown(instance, "no logs command is configured for this controller")
        if not instance or instance.startswith("-") or any(c in instance for c in "\r\n\x00"):
            return InstanceLog.unknown(instance, f"{instance!r} is not an instance name a logs command can take")
        max_bytes = max(1, min(int(max_bytes), MAX_LOG_BYTES))
        script, values, command = self._render(step, None, instance, max_bytes)
        secrets = self._secrets()
        shown = redact_output(command, secrets)
        try:
            outcome = self.runner.run(script, timeout=min(self.timeout, max(0.1, float(timeout_s))),
                                      env={**self.env, **values}, shown=command)
        except PlatformError as exc:
            return InstanceLog.unknown(instance, redact_output(exc.what, secrets), source=shown)
        source = f"`{shown}` on {outcome.where}"
        if outcome.exit_code != 0:
            err = redact_output(outcome.tail((outcome.stderr or outcome.stdout).strip())[-500:], secrets)
            return InstanceLog.unknown(instance, f"exited {outcome.exit_code}: {err or '(no output)'}", source=source)
        text = redact_output(outcome.stdout, secrets)
        return InstanceLog.from_text(instance, text, source=source, max_bytes=max_bytes,
                                     from_start=step == "logs_from_start")

    def status(self) -> ApplicationStatus:
        if not self.commands.get("status"):
            return ApplicationStatus.unknown("no status command is configured for this controller")
        outcome = self._run("status", ok_codes=_STATUS_EXIT_CODES.get(self.status_format, (0,)))
        try:
            instances = parse_status(self.status_format, outcome.stdout)
        except FormatError as exc:  # the error quotes the output: redacted like any output
            secrets = self._secrets()
            raise PlatformError(f"`{redact_output(outcome.command, secrets)}` on {outcome.where}: "
                                f"{redact_output(str(exc), secrets)}",
                                remedy=f"Make the status command print the {self.status_format} format "
                                       "(docs/controllers.md).") from exc
        return ApplicationStatus(known=True, instances=tuple(self._identified(i) for i in instances),
                                 source=f"`{outcome.command}` on {outcome.where}")

    def config(self, group_protocol: str | None = None) -> ClientConfig | None:
        if not self.commands.get("config"):
            return None
        if group_protocol is None and "{group_protocol}" in self.commands["config"]:
            raise PlatformError("the config command takes {group_protocol}: ask for the config of a protocol")
        outcome = self._run("config", group_protocol)
        try:
            properties = parse_config(self.config_format, outcome.stdout)
        except FormatError as exc:  # the error quotes the output: redacted like any output
            secrets = self._secrets()
            raise PlatformError(f"`{redact_output(outcome.command, secrets)}` on {outcome.where}: "
                                f"{redact_output(str(exc), secrets)}",
                                remedy=f"Make the config command print {self.config_format}.") from exc
        return ClientConfig(properties=properties, source=f"`{outcome.command}` on {outcome.where}",
                            client=self.client, client_version=self.client_version)

    def actions(self, group_protocol: str | None) -> Mapping[str, str]:
        out = {}
        for step in STEPS:
            if not self.commands.get(step):
                continue
            if step in PROTOCOL_STEPS and group_protocol is None:
                out[step] = self.commands[step]
            elif step in INSTANCE_STEPS:  # once per instance: the name as the status prints it
                out[step] = display(self.commands[step], self._values(group_protocol, "<instance>"))
            elif step in LOG_STEPS:
                out[step] = display(self.commands[step], self._values(None, "<instance>", 65536))
            else:
                out[step] = display(self.commands[step], self._values(group_protocol, None))
        return out

    def check(self) -> str:
        """Reach the platform now (over SSH: open the session), so a wrong key, a host key without its type or a
        missing ``[ssh]`` extra fails the first task, before the approval, not the stop; and prove that a value
        passes through the shell there untouched, as every command's values will (over SSH: the account's shell
        reads the exported values as POSIX single-quoted words; csh or fish would not)."""
        variable = f"{ENV_PREFIX}probe"
        outcome = self.runner.run(f'printf "%s" "${{{variable}}}"', timeout=self.timeout,
                                  env={**self.env, variable: _PROBE}, shown="printf '%s' <a probe value>")
        if outcome.exit_code != 0 or outcome.stdout != _PROBE:
            raise PlatformError(
                f"the shell on {outcome.where} does not pass a value through as a POSIX shell does (exit "
                f"{outcome.exit_code}; printed {outcome.stdout[:200]!r}, not {_PROBE!r})", retriable=False,
                remedy="Give that account a POSIX login shell (sh, dash, bash, ksh, zsh): the controller exports "
                       "each value as a single-quoted word before its command.")
        return outcome.where

    def describe_target(self) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        where = "the Airflow worker"
        if self.ssh_conn_id:
            where = f"SSH connection {self.ssh_conn_id!r}"
            try:
                conn = BaseHook.get_connection(self.ssh_conn_id)
                where += f" ({conn.login}@{conn.host}:{conn.port or 22})"
            except Exception:  # noqa: BLE001 - the approval still shows the connection's name
                pass
        return {"runs_on": where, "status_format": self.status_format if self.commands.get("status") else None,
                "config_format": self.config_format if self.commands.get("config") else None,
                "timeout_seconds": self.timeout, "env": sorted(self.env)}

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()


__all__ = ["INSTANCE_STEPS", "LOG_STEPS", "PROTOCOL_STEPS", "STEPS", "CommandController", "redact_output"]

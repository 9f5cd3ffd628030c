"""What an application controller does, and the facts it reports: the platform's word about the instances.

The provider does not own deployments. A migration acts on an application at
a few points (stop every instance, start it with ``group.protocol=...``, roll
it one instance at a time) and must *know* things only the platform knows:
whether an instance still exists, whether it restarted, what client
configuration it runs with. The group coordinator cannot say: a crashed member
stays listed until its session times out, and a member forced out of the group
while its process still runs comes back. An :class:`ApplicationController`
is the platform's side of that conversation; a deployment configures one per
application in its registry (:mod:`.registry`), and a run names it.

Every method returns small, JSON-able facts (they travel through XCom into the
approval, the sensors and the report):

* :class:`Instance` / :class:`ApplicationStatus`: the instances that exist, each
  with a stable identity (a pod name, a supervisord process, a systemd unit),
  running and ready, and how often it restarted (or a token that changes when
  it does). ``known=False`` says the controller cannot tell; then nothing is
  concluded from it (the DAG falls back to the broker's session timeout).
* :class:`ClientConfig`: the client properties the application runs with, and
  where they were read from, for the lint.
* ``topology()``: a Streams application's ``TopologyDescription`` text (None:
  not reported), which the streams migration checks the cluster's topics against.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from airflow_provider_kip848.controllers.schema import Arg

#: the protocols a controller starts an application with
GROUP_PROTOCOLS = ("classic", "consumer", "streams")
#: client properties whose values never leave the controller (XCom, approval, report, log)
_SECRET_KEY = re.compile(r"(password|secret|token|credential|jaas\.config|\.key$|\.pem$|private|user\.info)",
                         re.IGNORECASE)
#: log text: a JAAS config or an Authorization header hides the rest of its line (its value holds spaces)
_SECRET_REST_OF_LINE = re.compile(r"(?i)\b((?:sasl\.jaas\.config|[\w.-]*jaas\.config|authorization|proxy-authorization)"
                                  r"\s*[=:]\s*)(\S.*)$")
#: log text: a secret-looking key's value (key=value, key: value, "key": "value", key = 'a b')
_SECRET_LOG_ASSIGNMENT = re.compile(
    r"(?i)\b([\w.-]*(?:password|passwd|secret|token|credential|private|user\.info|api[._-]?key)[\w.-]*"
    r"|[\w.-]+\.(?:key|pem))(\"?\s*[=:]\s*)(\"[^\"]*\"?|'[^']*'?|[^\s\",;}]+)")
#: log text: bearer and basic credentials wherever they appear
_SECRET_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{8,}")
#: the longest log line kept (a line longer is cut, and says so)
MAX_LOG_LINE = 4096
#: what a log read may ask for at most (a wait reads several instances at the platform watch's pace)
MAX_LOG_BYTES = 1 << 20


@dataclass(frozen=True)
class Instance:
    """One instance of the application as its platform shows it.

    ``name`` is its stable identity (a StatefulSet's pod name, ``orders:orders_1`` under supervisord, a systemd
    unit); ``running`` means it exists and may heartbeat (starting, running, backing off or stopping all count:
    such a process can still join the group); ``ready`` whether the platform considers it up (None: it does not
    say); ``restarts`` the platform's restart count (None: not counted); ``incarnation`` a token that changes
    whenever the process is replaced (a pid, a container id, a start time), so a restart is seen where no count
    exists. ``host``, ``client_id`` and ``group_instance_id`` let a group member be matched to its instance.
    """

    name: str
    running: bool
    ready: bool | None = None
    restarts: int | None = None
    incarnation: str | None = None
    state: str = ""
    host: str | None = None
    client_id: str | None = None
    group_instance_id: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Instance:  # Any: JSON read back (XCom, a file, a response)
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})  # type: ignore[arg-type]

    def describe(self) -> str:
        bits = [self.state or ("running" if self.running else "not running")]
        if self.incarnation:
            bits.append(f"incarnation {self.incarnation}")
        if self.restarts is not None:
            bits.append(f"{self.restarts} restart(s)")
        if self.host:
            bits.append(f"on {self.host}")
        return f"{self.name} ({', '.join(bits)})"


@dataclass(frozen=True)
class ApplicationStatus:
    """The application's instances, as the platform reports them now (``known=False``: it cannot tell, and
    ``reason`` says why). ``source`` says what was asked (a command and where it ran, an API)."""

    known: bool
    instances: tuple[Instance, ...] = ()
    source: str = ""
    reason: str = ""

    @classmethod
    def unknown(cls, reason: str, source: str = "") -> ApplicationStatus:
        return cls(known=False, source=source, reason=reason)

    @property
    def running(self) -> tuple[Instance, ...]:
        return tuple(i for i in self.instances if i.running)

    @property
    def gone(self) -> bool | None:
        """True: the platform confirms that no instance exists; False: some do; None: it cannot tell."""
        if not self.known:
            return None
        return not self.running

    def summary(self) -> str:
        if not self.known:
            return f"unknown ({self.reason})"
        running = self.running
        if not running:
            return "no instance running"
        return f"{len(running)} instance(s) running: " + ", ".join(i.describe() for i in running)

    def to_dict(self) -> dict[str, object]:
        return {"known": self.known, "instances": [i.to_dict() for i in self.instances], "source": self.source,
                "reason": self.reason, "summary": self.summary(), "gone": self.gone}

    @classmethod
    def from_dict(  # Any: JSON read back (XCom, a file, a response)
            cls, data: Mapping[str, Any] | None) -> ApplicationStatus | None:
        if not data:
            return None
        return cls(known=bool(data.get("known")),
                   instances=tuple(Instance.from_dict(i) for i in data.get("instances") or ()),
                   source=str(data.get("source") or ""), reason=str(data.get("reason") or ""))


def redact_properties(  # Any: registry arguments (YAML values), checked by the schema
        properties: Mapping[str, Any]) -> dict[str, str]:
    """Client properties with the value of every secret-looking key replaced by ``***``."""
    return {str(k): ("***" if _SECRET_KEY.search(str(k)) else str(v)) for k, v in properties.items()}


@dataclass(frozen=True)
class ClientConfig:
    """The client configuration the application runs with, as the platform holds it (redacted: secret-looking
    values are ``***``). ``client`` is ``java`` or ``librdkafka`` when known; ``source`` where it was read."""

    properties: Mapping[str, str]
    source: str
    client: str | None = None
    client_version: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", redact_properties(self.properties))

    def to_dict(self) -> dict[str, object]:
        return {"properties": dict(self.properties), "source": self.source, "client": self.client,
                "client_version": self.client_version}

    @classmethod
    def from_dict(  # Any: JSON read back (XCom, a file, a response)
            cls, data: Mapping[str, Any] | None) -> ClientConfig | None:
        if not data:
            return None
        return cls(properties=dict(data.get("properties") or {}), source=str(data.get("source") or ""),
                   client=data.get("client"), client_version=data.get("client_version"))


def redact_log_line(line: str) -> str:
    """One log line with its secrets replaced by ``***``: the rest of a line after ``sasl.jaas.config =`` or
    ``Authorization:`` (their values hold spaces), the value of every secret-looking key (the keys
    :class:`ClientConfig` masks, ``api_key``), and bearer or basic credentials. Idempotent."""
    line = _SECRET_REST_OF_LINE.sub(lambda m: f"{m.group(1)}***", line)
    line = _SECRET_LOG_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}***", line)
    return _SECRET_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}***", line)


@dataclass(frozen=True)
class InstanceLog:
    """An instance's recent log as its platform gives it: ``lines`` oldest first, redacted (always: the
    constructor redacts them), at most ``max_bytes`` in all; ``truncated`` when older lines (or, read from the
    start, newer ones) were left out. ``known=False``: the platform could not give it, and ``reason`` says why
    (nothing is concluded from a log that was not read). ``source`` says where it was read."""

    instance: str
    known: bool
    lines: tuple[str, ...] = ()
    source: str = ""
    reason: str = ""
    truncated: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "lines", tuple(redact_log_line(str(line)) for line in self.lines))

    @classmethod
    def unknown(cls, instance: str, reason: str, source: str = "") -> InstanceLog:
        return cls(instance=instance, known=False, source=source, reason=reason)

    @classmethod
    def from_text(cls, instance: str, text: str, *, source: str, max_bytes: int, from_start: bool = False,
                  cut: bool | None = None) -> InstanceLog:
        """The log from a platform's raw text, bounded to ``max_bytes`` (UTF-8) of whole lines: the newest ones,
        or with ``from_start`` the first ones. ``cut``: whether the platform itself left out a part (None: judged
        from the text, which a byte-bounded tail fills to its bound only when the log was longer; the partial
        line at the cut is then dropped, so a secret's key is never lost while its value stays)."""
        lines = text.splitlines()
        truncated = bool(cut) if cut is not None else len(text.encode("utf-8", "replace")) >= max_bytes > 0
        if truncated and lines:  # the line at the cut is partial: its start (or end) is missing
            lines = lines[:-1] if from_start else lines[1:]
        lines = [line if len(line) <= MAX_LOG_LINE else line[:MAX_LOG_LINE] + " ... (line cut)" for line in lines]
        kept: list[str] = []
        size = 0
        for line in (lines if from_start else reversed(lines)):
            size += len(line.encode("utf-8", "replace")) + 1
            if size > max_bytes:
                truncated = True
                break
            kept.append(line)
        if not from_start:
            kept.reverse()
        return cls(instance=instance, known=True, lines=tuple(kept), source=source, truncated=truncated)

    def to_dict(self) -> dict[str, object]:
        return {"instance": self.instance, "known": self.known, "lines": list(self.lines), "source": self.source,
                "reason": self.reason, "truncated": self.truncated}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InstanceLog:  # Any: JSON read back (XCom, a file, a response)
        return cls(instance=str(data.get("instance") or ""), known=bool(data.get("known")),
                   lines=tuple(str(line) for line in data.get("lines") or ()), source=str(data.get("source") or ""),
                   reason=str(data.get("reason") or ""), truncated=bool(data.get("truncated")))


class ApplicationController(ABC):
    """The platform side of a migration: stop, start and (optionally) roll one application, and report its
    instances and client configuration.

    A class is registered by entry point (group ``airflow_provider_kip848.controllers``, see
    :mod:`.registry`) and configured by the deployment's registry: ``schema`` declares every keyword
    argument the class takes, which are required, and which of them a *run* may set (``Arg(run=True)``);
    everything else comes from the registry only. The registry builds the class with
    ``cls(**target, **run_args)`` once both are checked against the schema.

    Implementations must be idempotent: ``start`` of a running application starts nothing twice, ``stop``
    of a stopped one is a no-op. They report facts, never guesses: a ``status`` the platform cannot
    establish is ``ApplicationStatus.unknown(...)``, and ``config`` returns None when the platform does not
    hold the configuration.
    """

    #: the keyword arguments the class takes (the registry's target, and what a run may set)
    schema: ClassVar[Mapping[str, Arg]] = {}

    @classmethod
    def run_arguments(  # Any: registry arguments (YAML values), checked by the schema
            cls, target: Mapping[str, Any]) -> Mapping[str, Arg]:
        """What a run may set, given the registry's target (by default the schema's ``run`` arguments)."""
        return {name: arg for name, arg in cls.schema.items() if arg.run}

    @abstractmethod
    def stop(self) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        """Stop every instance; return what was done (small JSON). Waiting until the instances are gone is
        the provider's job (it asks :meth:`status`), unless the platform's own stop already waits."""

    @abstractmethod
    def start(self, group_protocol: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        """Start every instance with ``group.protocol=<group_protocol>``; a running instance is not started
        twice. Return what was done."""

    def can_roll(self) -> bool:
        """Whether :meth:`roll` is available (the fleet's online path and the rolling upgrade need it)."""
        return False

    def roll(self, group_protocol: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        """Restart the instances one at a time with ``group.protocol=<group_protocol>`` while the others keep
        running (a Kubernetes rolling update, a unit-by-unit restart); return what was done."""
        raise NotImplementedError(f"{type(self).__name__} cannot roll an application")

    def can_roll_instances(self) -> bool:
        """Whether :meth:`stop_instance` and :meth:`start_instance` are available: the rolling upgrade then
        restarts the instances itself, one at a time, and checks each (the first one before any other restarts,
        a static member's leave before its replacement joins). Without them it asks the platform for one
        :meth:`roll` and can only watch."""
        return False

    def replaces_instances(self) -> bool:
        """Whether :meth:`start_instance` replaces a running instance itself, in one platform step that
        terminates it first (a StatefulSet's partition lowered to its ordinal, a Deployment's rollout let through
        by one pod): the roll by instance then calls no :meth:`stop_instance`, and the instance's successor may
        have another name (``successor`` in the answer). By default False: stop, then start."""
        return False

    def instance_order(self, names: Sequence[str], group_protocol: str) -> list[str]:
        """The order in which the roll by instance takes the instances to ``group_protocol`` (by default by
        name; a StatefulSet's: highest ordinal first, as its partitioned update moves)."""
        return sorted(names)

    def stop_instance(self, name: str) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        """Stop the one instance ``name`` (a name :meth:`status` reports); the others keep running."""
        raise NotImplementedError(f"{type(self).__name__} cannot stop one instance")

    def start_instance(  # Any: the platform's answer, JSON of several shapes
            self, name: str, group_protocol: str) -> Mapping[str, Any]:
        """Start the one instance ``name`` with ``group.protocol=<group_protocol>`` (a running one: nothing)."""
        raise NotImplementedError(f"{type(self).__name__} cannot start one instance")

    @abstractmethod
    def status(self) -> ApplicationStatus:
        """The instances that exist now (``ApplicationStatus.unknown(reason)`` when the platform cannot tell)."""

    def config(self, group_protocol: str | None = None) -> ClientConfig | None:
        """The client properties the application runs with (None: the platform does not report them); with
        ``group_protocol``, as it will run once started with that protocol (what the lint checks)."""
        return None

    def topology(self) -> str | None:
        """A Kafka Streams application's topology: its ``Topology#describe()`` text, as the application prints it
        (None: not a Streams application, or the platform does not hold it). The streams migration checks the
        cluster's topics against it before the stop (:mod:`airflow_provider_kip848.kafka.rules.topology`); the
        group's describe cannot, while the group is classic."""
        return None

    @abstractmethod
    def actions(self, group_protocol: str | None) -> Mapping[str, str]:
        """What each step will do, in the platform's terms, for the approval: ``{"stop": "...", "start": "...",
        "status": "...", ...}`` (``group_protocol`` None: the steps that do not depend on it)."""

    def describe_target(self) -> Mapping[str, Any]:  # Any: the platform's answer, JSON of several shapes
        """The target as the approval shows it (by default: nothing beyond the actions)."""
        return {}

    def can_read_logs(self) -> bool:
        """Whether :meth:`logs` can read an instance's log (by default: no)."""
        return False

    def logs(self, instance: str, *, max_bytes: int = 65536, from_start: bool = False,
             timeout_s: float = 20.0) -> InstanceLog:
        """The instance's recent log (from_start: its current incarnation's first lines instead, where the platform
        can give them; else its newest), bounded in size and time, secrets redacted. ``instance`` is a name
        :meth:`status` reports. A platform that cannot give it returns ``InstanceLog.unknown(...)``; raise
        :class:`~.errors.PlatformError` only for a failure worth naming (the provider turns either into an
        unknown log: a log that was not read never fails a wait by itself)."""
        return InstanceLog.unknown(instance, f"{type(self).__name__} does not read logs")

    def check(self) -> str:
        """Reach the platform now, without changing anything; return where it was reached. The first task of a
        DAG calls it so a platform that cannot be reached (a wrong key, a host down) fails before the approval.
        By default: nothing to reach."""
        return "nothing to reach"

    def close(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Release what the controller holds (a session to the platform); called once it is no longer needed."""


__all__ = ["GROUP_PROTOCOLS", "MAX_LOG_BYTES", "ApplicationController", "ApplicationStatus", "ClientConfig",
           "Instance", "InstanceLog", "redact_log_line", "redact_properties"]

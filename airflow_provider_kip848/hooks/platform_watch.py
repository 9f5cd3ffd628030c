"""The platform watched through a whole wait: what a look asks, what it fails on, and what travels with it.

A group wait judges the coordinator's side, and the coordinator lags the
platform: an instance stopped by hand leaves its group (the wait then counts
one member short until its deadline), a crashed one stays listed until its
session expires. So a wait that knows the application's instances also asks
the platform *while* it waits, every :data:`PLATFORM_CHECK_SECONDS`, not only
once the coordinator's side holds:

* rule ``lost`` (the Migrated and lag waits after a start or a roll, the
  fleet's arrival stages): an instance that ran at the baseline (the start's
  status) and is gone, not running, restarted or starting again since
  (:func:`~airflow_provider_kip848.hooks.instances.lost_instances_message`),
  or whose client logged an error it does not recover from (a controller that
  reads logs: :mod:`~airflow_provider_kip848.hooks.client_logs`); a lost
  instance's failure carries the errors the clients logged, in their words;
* rule ``appeared`` (the Empty wait, once the application was stopped): an
  instance running now that was not at the baseline (the status when the wait
  began), or runs as another process
  (:func:`~airflow_provider_kip848.controllers.verdicts.appeared_instances`).

A :class:`PlatformWatch` is the JSON a wait hands to its trigger: the
controller's *registry name* and the run's arguments, never a command (the
triggerer rebuilds the controller from the deployment's registry, as a worker
does), and the baseline's instances without the text of the command that
listed them. :meth:`PlatformWatch.look` is one blocking look (the poking
sensor calls it in the worker; the trigger in a thread of its own, see
:mod:`airflow_provider_kip848.triggers.platform`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_provider_kip848.controllers import ApplicationStatus, NamedController
from airflow_provider_kip848.controllers.verdicts import appeared_instances
from airflow_provider_kip848.hooks.client_logs import ClientErrors, baseline_instances, read_client_errors
from airflow_provider_kip848.hooks.instances import lost_instances_message, named_controller
from airflow_provider_kip848.kafka.arguments import parse_number
from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.rules.client_errors import describe_findings

#: how often a wait asks the platform while it waits (default of the sensors' ``platform_check_seconds``): a
#: status is a command or an API read, so not every poll; half the 10 s in which a change must end the wait
PLATFORM_CHECK_SECONDS = 5.0
#: how long one look may take before the trigger stops waiting for it (the look's command keeps its own
#: timeout; no other look starts before it ends, so a hung command never piles up threads)
PLATFORM_LOOK_TIMEOUT_SECONDS = 30.0

Rule = Literal["lost", "appeared"]
RULES: tuple[Rule, ...] = ("lost", "appeared")


@dataclass(frozen=True)
class PlatformWatch:
    """What a wait watches on the platform: ``controller`` (a registry name) with the run's ``args``, the
    ``baseline`` it compares with (:meth:`ApplicationStatus.to_dict`; kept: whether it is known and its
    instances), the ``rule`` a look fails on, every ``every_s`` seconds, each look given ``timeout_s``."""

    controller: str
    baseline: Mapping[str, Any]  # Any: an ApplicationStatus as JSON (each kind's instances)
    rule: Rule = "lost"
    args: Mapping[str, Any] = field(default_factory=dict)  # Any: registry arguments (YAML values)
    every_s: float = PLATFORM_CHECK_SECONDS
    timeout_s: float = PLATFORM_LOOK_TIMEOUT_SECONDS

    @classmethod
    def of(cls, controller: object, args: object, baseline: object, rule: Rule,
           every_s: float = PLATFORM_CHECK_SECONDS) -> PlatformWatch | None:
        """The watch of a wait, or None when there is nothing to watch: no controller named, no baseline, or a
        baseline the controller could not tell (``known`` false: nothing can be compared with it)."""
        if controller in (None, "", "None") or not isinstance(baseline, Mapping):
            return None
        status = ApplicationStatus.from_dict(baseline)
        if status is None or not status.known:
            return None
        kept: dict[str, object] = {"known": True, "instances": [i.to_dict() for i in status.instances]}  # no text
        if isinstance(baseline.get("log_marks"), Mapping):  # the instances' last log lines before the start
            kept["log_marks"] = dict(baseline["log_marks"])
        return cls(controller=str(controller), args=dict(args) if isinstance(args, Mapping) else {},
                   baseline=kept, rule=rule, every_s=float(every_s))

    def to_dict(self) -> dict[str, object]:
        return {"controller": self.controller, "args": dict(self.args), "baseline": dict(self.baseline),
                "rule": self.rule, "every_s": self.every_s, "timeout_s": self.timeout_s}

    @classmethod
    def from_dict(cls, data: object) -> PlatformWatch | None:
        """Strict: a watch that does not parse is refused (never read as "nothing to watch")."""
        if data is None:
            return None
        if not isinstance(data, Mapping) or not isinstance(data.get("controller"), str):
            raise InvalidArgument(f"a platform watch must be a mapping with a controller name, not {data!r}")
        rule = data.get("rule")
        if rule not in RULES:
            raise InvalidArgument(f"a platform watch's rule must be one of {', '.join(RULES)}, not {rule!r}")
        baseline, args = data.get("baseline"), data.get("args") or {}
        if not isinstance(baseline, Mapping) or not isinstance(args, Mapping):
            raise InvalidArgument("a platform watch's baseline and args must be mappings")
        every = parse_number(data.get("every_s", PLATFORM_CHECK_SECONDS), "platform_check_seconds")
        timeout = parse_number(data.get("timeout_s", PLATFORM_LOOK_TIMEOUT_SECONDS), "platform_look_timeout",
                               minimum=1)
        return cls(controller=data["controller"], args=dict(args), baseline=dict(baseline), rule=rule,
                   every_s=float(every or PLATFORM_CHECK_SECONDS), timeout_s=float(timeout or 1))

    def resolve(self) -> NamedController:
        """The controller from the deployment's registry (read now), with the run's arguments."""
        named = named_controller(self.controller, dict(self.args))
        if named is None:  # pragma: no cover - of() never builds a watch without a name
            raise InvalidArgument("a platform watch names no controller")
        return named

    def look(self, named: NamedController) -> str | None:
        """One look (blocking: the controller's status): what the platform shows that fails the wait, the
        instances named with their state, or None (nothing, or a status that cannot tell)."""
        if self.rule == "lost":
            lost = lost_instances_message(named, self.baseline)
            errors = self.client_errors(named)
            if lost is not None:
                return f"{lost}. {errors.describe()}" if errors.findings else lost
            if errors.fatal:  # the client gave up, whatever the platform and the coordinator show yet
                return (f"controller {named.name!r}: an instance's client logged an error it does not recover from: "
                        f"{describe_findings(errors.fatal)}")
            return None
        before = ApplicationStatus.from_dict(self.baseline)
        status = named.status()
        if before is None or not status.known:
            return None
        found = appeared_instances(status, before)
        return f"controller {named.name!r} ({status.source}): " + "; ".join(found) if found else None

    def client_errors(self, named: NamedController) -> ClientErrors:
        """The client errors the baseline's instances logged since their start (their log marks), read through
        the controller (nothing when it does not read logs)."""
        names, marks = baseline_instances(self.baseline)
        return read_client_errors(named, names, marks)

    def describe(self) -> str:
        """For a log line and the result's notes."""
        what = ("an instance of the start lost" if self.rule == "lost" else "an instance running again")
        return f"controller {self.controller!r} every {self.every_s:g} s ({what} fails the wait)"


__all__ = ["PLATFORM_CHECK_SECONDS", "PLATFORM_LOOK_TIMEOUT_SECONDS", "RULES", "PlatformWatch", "Rule"]

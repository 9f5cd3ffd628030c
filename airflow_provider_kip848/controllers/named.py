"""A controller from the deployment's registry, with the provider's rules around the platform's actions.

:class:`NamedController` is what operators, sensors and the fleet call. It adds,
whatever the platform:

* names: every failure is a :class:`ControllerError` naming the controller (its
  registry name) and the step, with ``retriable`` as the platform said;
* ``stop``: the platform's stop, then the platform's status until no instance
  exists (``instances_gone=True``, the confirmation the empty wait acts on),
  the status cannot tell (``instances_gone=None``), or the stop's deadline
  passes with instances still running (an error naming them: never reported
  as stopped);
* ``start``: nothing started twice (an application whose expected instances
  already run is left alone), and the status right after the start: the
  baseline a later restart or crash is measured against;
* ``plan``: what each step will do, for the approval.

Results are small JSON dicts (XCom).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from airflow_provider_kip848.controllers.errors import ControllerError, PlatformError
from airflow_provider_kip848.controllers.protocol import (
    GROUP_PROTOCOLS,
    MAX_LOG_BYTES,
    ApplicationController,
    ApplicationStatus,
    ClientConfig,
    InstanceLog,
)
from airflow_provider_kip848.kafka.rules.client_errors import after_mark, describe_findings, scan_lines

#: how long a stop may take to show every instance gone, by default (a JVM's shutdown hooks, a pod's grace)
STOP_CONFIRM_SECONDS = 120.0
#: a log mark: the last lines of an instance's log before a start or a roll (three: one line repeats often)
LOG_MARK_LINES = 3
LOG_MARK_BYTES = 4096
LOG_MARK_TIMEOUT_S = 10.0
#: what a failed start's or roll's log reading reads of each instance (its newest bytes)
LOG_SCAN_BYTES = 32_768
_T = TypeVar("_T")


class NamedController:
    """The controller configured as ``name`` (kind ``kind``) in the deployment's registry."""

    def __init__(self, *, name: str, kind: str, controller: ApplicationController, description: str = "",
                 # Any: registry arguments (YAML values), checked by the schema
                 args: Mapping[str, Any] | None = None, fingerprint: str = "") -> None:
        self.name, self.kind, self.description = name, kind, description
        self.controller = controller
        self.args = dict(args or {})
        #: the registry entry and the run's arguments, hashed: what an approval approved (see ``plan``)
        self.fingerprint = fingerprint

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"NamedController({self.name!r}, kind={self.kind!r})"

    def close(self) -> None:
        """Release what the controller holds (an SSH session): every user closes it, or uses ``with``."""
        close = getattr(self.controller, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> NamedController:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def label(self) -> str:
        return f"{self.name} ({self.kind})"

    def _call(self, step: str, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except ControllerError:
            raise
        except PlatformError as exc:
            raise ControllerError(exc.what, controller=self.name, step=step, retriable=exc.retriable,
                                  remedy=exc.remedy or None) from exc
        except Exception as exc:  # noqa: BLE001 - a controller's own failure, named; never retried blindly
            raise ControllerError(f"{type(exc).__name__}: {exc}", controller=self.name, step=step) from exc

    @staticmethod
    def _protocol(group_protocol: str) -> str:
        if group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be one of {', '.join(GROUP_PROTOCOLS)}, not {group_protocol!r}")
        return group_protocol

    # -- facts --------------------------------------------------------------------------------------

    def status(self) -> ApplicationStatus:
        """The platform's instances now (unknown when it cannot tell)."""
        status = self._call("status", self.controller.status)
        if not isinstance(status, ApplicationStatus):
            raise ControllerError(f"status() returned {type(status).__name__}, not an ApplicationStatus",
                                  controller=self.name, step="status")
        return status

    def config(self, group_protocol: str | None = None) -> ClientConfig | None:
        """The client configuration the application runs with, or will run with on ``group_protocol`` (None:
        not reported by the platform)."""
        protocol = None if group_protocol is None else self._protocol(group_protocol)
        config = self._call("config", lambda: self.controller.config(protocol))
        if config is not None and not isinstance(config, ClientConfig):
            raise ControllerError(f"config() returned {type(config).__name__}, not a ClientConfig",
                                  controller=self.name, step="config")
        return config

    def topology(self) -> str | None:
        """The application's ``Topology#describe()`` text (None: not reported by the platform)."""
        topology = self._call("topology", self.controller.topology)
        if topology is not None and not isinstance(topology, str):
            raise ControllerError(f"topology() returned {type(topology).__name__}, not a str",
                                  controller=self.name, step="topology")
        return topology

    def can_read_logs(self) -> bool:
        return bool(self.controller.can_read_logs())

    def logs(self, instance: str, *, max_bytes: int = 65536, from_start: bool = False,
             timeout_s: float = 20.0) -> InstanceLog:
        """The instance's recent log, bounded and redacted. Never raises: a read that fails is an unknown log
        naming the controller and why (a log that was not read concludes nothing, and fails no wait)."""
        try:
            log = self._call("logs", lambda: self.controller.logs(
                instance, max_bytes=max(1, min(int(max_bytes), MAX_LOG_BYTES)), from_start=from_start,
                timeout_s=timeout_s))
        except ControllerError as exc:
            return InstanceLog.unknown(instance, str(exc))
        if not isinstance(log, InstanceLog):
            return InstanceLog.unknown(instance, f"controller {self.name!r}: logs() returned "
                                                 f"{type(log).__name__}, not an InstanceLog")
        return log

    def log_marks(self, instances: Sequence[str], *, lines: int = LOG_MARK_LINES) -> dict[str, list[str]]:
        """Each instance's last ``lines`` log lines now (none where the log cannot be read, or the controller does
        not read logs): taken before a start or a roll, so the errors read after it are the new incarnation's,
        never an earlier one's still in a log that spans restarts (supervisord's, a journal)."""
        if not self.can_read_logs():
            return {}
        marks = {}
        for name in instances:
            log = self.logs(name, max_bytes=LOG_MARK_BYTES, timeout_s=LOG_MARK_TIMEOUT_S)
            if log.known:
                marks[name] = list(log.lines[-lines:])
        return marks

    def can_roll(self) -> bool:
        return bool(self.controller.can_roll())

    def can_roll_instances(self) -> bool:
        return bool(self.controller.can_roll_instances())

    def replaces_instances(self) -> bool:
        """The platform replaces an instance in one step at its start (no separate stop; see the protocol)."""
        return bool(self.controller.replaces_instances())

    def instance_order(self, names: list[str], group_protocol: str) -> list[str]:
        """The order the roll by instance takes the instances in (the platform's; every name exactly once)."""
        order = [str(n) for n in self._call("instance_order",
                                            lambda: self.controller.instance_order(list(names), group_protocol))]
        if sorted(order) != sorted(names):
            raise ControllerError(f"instance_order() returned {order}, not an order of {sorted(names)}",
                                  controller=self.name, step="instance_order")
        return order

    def plan(  # Any: the platform's answer, JSON of several shapes
            self, group_protocol: str | None = None) -> dict[str, Any]:
        """The controller, its target and the exact actions of each step, for the approval."""
        actions = self._call("plan", lambda: dict(self.controller.actions(group_protocol)))
        return {"name": self.name, "kind": self.kind, "description": self.description, "args": dict(self.args),
                "target": dict(self.controller.describe_target()), "actions": actions, "can_roll": self.can_roll(),
                "can_roll_instances": self.can_roll_instances(),
                "fingerprint": self.fingerprint}

    def check(self) -> str:
        """Reach the platform now (nothing changed): where it was reached."""
        return str(self._call("check", self.controller.check))

    def require_fingerprint(self, approved: object) -> None:
        """The registry entry and the run's arguments are still the ones the approval showed; otherwise refuse
        (an entry edited between the approval and the action would run commands nobody approved)."""
        if approved in (None, "", "None"):
            return
        if approved != self.fingerprint:
            raise ControllerError(
                f"the registry entry (or the run's arguments) changed since the plan was approved (approved "
                f"{str(approved)[:12]}, now {self.fingerprint[:12]}): nothing was done",
                controller=self.name, step="check",
                remedy="Trigger the DAG again: the new entry is shown in its approval.")

    # -- actions ------------------------------------------------------------------------------------

    def stop(  # Any: the platform's answer, JSON of several shapes
            self, *, confirm_seconds: float = STOP_CONFIRM_SECONDS, poll_seconds: float = 0.5) -> dict[str, Any]:
        """Stop every instance, then wait until the platform shows none (see the module docstring). The result
        also holds the status right before the stop (``before``): the instances a member left behind may be paired
        with once a platform no longer lists them (a deleted pod)."""
        started = time.monotonic()
        try:
            before = self.status().to_dict()
        except ControllerError as exc:  # what ran before the stop is a help, not a condition of it
            before = ApplicationStatus.unknown(f"not read before the stop: {exc.what}").to_dict()
        done = self._call("stop", lambda: dict(self.controller.stop()))
        try:
            status = self.status()
            while status.known and status.running and time.monotonic() - started < confirm_seconds:
                time.sleep(poll_seconds)
                status = self.status()
        except ControllerError as exc:  # the stop ran: what is unknown is whether it worked
            raise ControllerError(
                f"the stop ran ({_summary(done)}), but whether the instances are gone is unknown: {exc.what}",
                controller=self.name, step="stop", retriable=exc.retriable, remedy=exc.remedy) from exc
        if status.known and status.running:
            raise ControllerError(
                f"the stop returned, but after {confirm_seconds:g} s the platform still shows "
                f"{status.summary()}: the application is NOT stopped (nothing further was done)",
                controller=self.name, step="stop", retriable=True,
                remedy="Stop those instances (or find why they do not stop), then rerun the task.")
        return {"controller": self.name, "kind": self.kind, "action": "stop", "platform": done,
                "status": status.to_dict(), "before": before, "instances_gone": status.gone,
                "confirm_s": round(time.monotonic() - started, 3)}

    def start(  # Any: the platform's answer, JSON of several shapes
            self, group_protocol: str, *, expected: int | None = None) -> dict[str, Any]:
        """Start with ``group.protocol``; with ``expected`` instances already running, start nothing. The status
        after it carries ``log_marks`` (:meth:`log_marks`, taken before the start) for the waits' log reading."""
        protocol = self._protocol(group_protocol)
        before = self.status()
        ready = [i for i in before.running if i.ready is not False]  # a stopping or backing-off one is not up
        if expected is not None and before.known and len(ready) >= expected:
            return {"controller": self.name, "kind": self.kind, "action": "start", "group_protocol": protocol,
                    "platform": {"skipped": f"already running: {before.summary()}"}, "status": before.to_dict(),
                    "already_running": True}
        names = [i.name for i in before.instances]
        marks = self.log_marks(names)
        done = self._with_client_errors("start", names, marks, lambda: dict(self.controller.start(protocol)))
        return {"controller": self.name, "kind": self.kind, "action": "start", "group_protocol": protocol,
                "platform": done, "status": self.status_with_marks(marks), "already_running": False}

    def _with_client_errors(self, step: str, names: Sequence[str], marks: Mapping[str, Sequence[str]],
                            fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``fn`` as the step; when it fails, the errors the instances' clients logged since ``marks`` (the lines
        before it) are added to its failure, in the clients' words: a start refused by a process manager
        ("spawn error") says why the process ended."""
        try:
            return self._call(step, fn)
        except ControllerError as exc:
            findings = []
            for name in names if self.can_read_logs() else ():
                log = self.logs(name, max_bytes=LOG_SCAN_BYTES, timeout_s=LOG_MARK_TIMEOUT_S)
                if log.known:
                    findings.extend(scan_lines(name, after_mark(log.lines, marks.get(name))))
            if not findings:
                raise
            what = exc.what.removeprefix(f"controller {self.name!r}, step {step}: ")
            raise ControllerError(f"{what}. The clients logged: {describe_findings(findings)}",
                                  controller=self.name, step=step, retriable=exc.retriable,
                                  remedy=exc.remedy) from exc

    def status_with_marks(self, marks: Mapping[str, Sequence[str]]) -> dict[str, object]:
        """The status now as a baseline: :meth:`ApplicationStatus.to_dict` and the ``log_marks`` taken before
        the action (instances without one: their whole log read is new)."""
        return {**self.status().to_dict(), "log_marks": {k: list(v) for k, v in marks.items()}}

    def roll(self, group_protocol: str) -> dict[str, Any]:  # Any: the platform's answer, JSON of several shapes
        """The platform's rolling restart with ``group.protocol``."""
        protocol = self._protocol(group_protocol)
        if not self.can_roll():
            raise ControllerError("this controller cannot roll an application (no rolling restart configured)",
                                  controller=self.name, step="roll",
                                  remedy="Configure a roll for it in the registry, or migrate the application "
                                         "offline.")
        names = [i.name for i in self.status().instances] if self.can_read_logs() else []
        marks = self.log_marks(names)
        done = self._with_client_errors("roll", names, marks, lambda: dict(self.controller.roll(protocol)))
        return {"controller": self.name, "kind": self.kind, "action": "roll", "group_protocol": protocol,
                "platform": done, "status": self.status_with_marks(marks)}


    def stop_instance(self, name: str, *, confirm_seconds: float = STOP_CONFIRM_SECONDS,
                      # Any: the platform's answer, JSON of several shapes
                      poll_seconds: float = 0.5) -> dict[str, Any]:
        """Stop the one instance ``name``, then wait until the platform shows it not running (an error naming
        it when it still runs at the deadline, or when the platform cannot tell: never reported as stopped)."""
        started = time.monotonic()
        done = self._call("stop_instance", lambda: dict(self.controller.stop_instance(name)))

        def running() -> bool | None:
            status = self.status()
            if not status.known:
                return None
            return any(i.name == name and i.running for i in status.instances)

        still = running()
        while still and time.monotonic() - started < confirm_seconds:
            time.sleep(poll_seconds)
            still = running()
        if still is None:
            raise ControllerError(f"instance {name} was stopped ({_summary(done)}), but whether it is gone is "
                                  "unknown: the platform's status cannot tell", controller=self.name,
                                  step="stop_instance", retriable=True)
        if still:
            raise ControllerError(f"instance {name} still runs {confirm_seconds:g} s after its stop: NOT stopped",
                                  controller=self.name, step="stop_instance", retriable=True,
                                  remedy="Stop it (or find why it does not stop), then rerun the task.")
        return {"instance": name, "action": "stop", "platform": done,
                "confirm_s": round(time.monotonic() - started, 3)}

    def start_instance(  # Any: the platform's answer, JSON of several shapes
            self, name: str, group_protocol: str) -> dict[str, Any]:
        """Start the one instance ``name`` with ``group.protocol``; the platform's view of it right after."""
        protocol = self._protocol(group_protocol)
        done = self._call("start_instance", lambda: dict(self.controller.start_instance(name, protocol)))
        # a platform that replaced the instance may have named its successor otherwise (a Deployment's new pod)
        successor = str(done.get("successor") or name)
        now = next((i for i in self.status().instances if i.name == successor), None)
        return {"instance": name, "action": "start", "group_protocol": protocol, "platform": done,
                "successor": successor, "unchanged": bool(done.get("unchanged")),
                "now": now.to_dict() if now else None}


def _summary(done: Mapping[str, Any]) -> str:
    """A platform's report of a step, short (a command's own line when it has one)."""
    if "command" in done:
        return f"`{done['command']}` exited {done.get('exit_code')}"
    return ", ".join(f"{k}={v}" for k, v in list(done.items())[:4])


__all__ = ["STOP_CONFIRM_SECONDS", "NamedController"]

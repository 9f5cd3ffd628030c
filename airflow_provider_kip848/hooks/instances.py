"""The verdicts about an application's instances: the controller's word joined with the group's.

The group waits (the sensors, and each application of a fleet wave) share
these steps, which run in a worker (a controller's status may run a command on
a host; the triggerer only polls the broker):

* :func:`liveness_window`: how long a member must stay listed to prove it
  heartbeats, derived from the group's session timeout (consumer and streams
  groups: the group config, itself defaulted by the brokers; classic members:
  their client's ``session.timeout.ms`` as the controller reports it, else the
  clients' default 45 s), plus a heartbeat interval and a second of margin;
* :func:`gone_confirmation`: whether the platform confirms that no instance
  exists, the condition for forcing out the members left behind;
* :func:`instances_verdict`: after a start or a roll, every expected instance
  running, ready, and not restarted since the start (a crash, a crash loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.controllers import (
    ApplicationStatus,
    ClientConfig,
    ControllerError,
    NamedController,
    instance_problems,
    lost_instances,
)
from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook

#: the clients' default session timeout and heartbeat interval of the classic protocol (Java and librdkafka)
CLASSIC_SESSION_MS, CLASSIC_HEARTBEAT_MS = 45000, 3000
#: the brokers' default heartbeat interval of consumer and streams groups (group.*.heartbeat.interval.ms)
GROUP_HEARTBEAT_MS = 5000
#: margin over session + heartbeat: the coordinator's expiry timer and a poll's own latency
LIVENESS_MARGIN_S = 1.0


def liveness_window(hook: KafkaGroupAdminHook, group_id: str, group_type: str,
                    config: ClientConfig | None = None) -> tuple[float, str]:
    """Seconds a member must stay listed to prove it heartbeats, and where the figures came from."""
    if group_type in ("consumer", "streams"):
        values = hook.describe_group_config(group_id)
        session = values.value(f"{group_type}.session.timeout.ms")
        heartbeat = values.value(f"{group_type}.heartbeat.interval.ms")
        if session is None or heartbeat is None:
            broker = hook.group_coordinator_config().values
            session = session or broker.get(f"group.{group_type}.session.timeout.ms")
            heartbeat = heartbeat or broker.get(f"group.{group_type}.heartbeat.interval.ms")
        source = f"the group's {group_type}.session.timeout.ms and heartbeat interval"
    else:
        props = dict(config.properties) if config is not None else {}
        session, heartbeat = props.get("session.timeout.ms"), props.get("heartbeat.interval.ms")
        source = ("the application's session.timeout.ms" if session else
                  f"the classic clients' default session timeout ({CLASSIC_SESSION_MS} ms)")
    session_ms = float(session) if session else float(CLASSIC_SESSION_MS)
    default_heartbeat = CLASSIC_HEARTBEAT_MS if group_type == "classic" else GROUP_HEARTBEAT_MS
    heartbeat_ms = float(heartbeat) if heartbeat else float(default_heartbeat)
    window = (session_ms + heartbeat_ms) / 1000 + LIVENESS_MARGIN_S
    return window, f"{window:g} s: {source} ({session_ms:g} ms) + heartbeat ({heartbeat_ms:g} ms) + 1 s"


def task_error(exc: ControllerError) -> Exception:
    """A controller's failure as the task's: retried by Airflow when the platform may answer later, else failed
    at once (a refusal that a retry would only repeat)."""
    return exc if exc.retriable else AirflowFailException(str(exc))


def named_controller(name: object, args: object) -> NamedController | None:
    """The registry's controller, or None when the task was given none."""
    if name in (None, "", "None"):
        return None
    return resolve_controller(name, args or {})


def gone_confirmation(controller: NamedController | None) -> ApplicationStatus | None:
    """The platform's status, for a decision to force members out (None: no controller)."""
    return None if controller is None else controller.status()


@dataclass(frozen=True)
class InstancesVerdict:
    """``ok`` (every expected instance runs, ready, none restarted), ``pending`` (one is not ready yet: ask
    again), ``failed`` (one crashed, restarted or is gone: named in ``message``) or ``unknown`` (the controller
    cannot tell: the verdict rests on the broker, and ``message`` says so)."""

    outcome: str
    message: str
    status: dict[str, Any] | None = None  # Any: the controller's status as JSON, each kind with its own keys

    def to_dict(self) -> dict[str, object]:
        return {"outcome": self.outcome, "message": self.message, "status": self.status}


def instances_verdict(controller: NamedController | None, *, expected: int,
                      baseline: Mapping[str, object] | None) -> InstancesVerdict:
    """The platform's word on the instances after a start or a roll (``baseline``: the status the start task
    recorded right after starting)."""
    if controller is None:
        return InstancesVerdict("unknown", "instances not checked: no application controller was named, so the "
                                           "verdict rests on the broker alone")
    status = controller.status()
    if not status.known:
        return InstancesVerdict("unknown", f"instances not checked: controller {controller.name!r} cannot tell "
                                           f"({status.reason}); the verdict rests on the broker (each member "
                                           "proven alive)", status.to_dict())
    problems = instance_problems(status, expected=expected, baseline=ApplicationStatus.from_dict(baseline))
    if not problems:
        return InstancesVerdict("ok", f"controller {controller.name!r}: {status.summary()}", status.to_dict())
    pending = all(p.endswith("is not ready") for p in problems)
    return InstancesVerdict("pending" if pending else "failed",
                            f"controller {controller.name!r} ({status.source}): " + "; ".join(problems),
                            status.to_dict())


def lost_instances_message(controller: NamedController | None, baseline: Mapping[str, object] | None) -> str | None:
    """The platform's word, at any moment of a wait, on the instances that ran at ``baseline`` and died since
    (None: none did, or the controller cannot tell, or there is no baseline to compare with)."""
    started = ApplicationStatus.from_dict(baseline)
    if controller is None or started is None or not started.known:
        return None
    status = controller.status()
    if not status.known:
        return None
    lost = lost_instances(status, started)
    return f"controller {controller.name!r} ({status.source}): " + "; ".join(lost) if lost else None


__all__ = ["CLASSIC_HEARTBEAT_MS", "CLASSIC_SESSION_MS", "InstancesVerdict", "gone_confirmation",
           "instances_verdict", "liveness_window", "lost_instances_message", "named_controller", "task_error"]

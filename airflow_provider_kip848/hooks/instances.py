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
  running, ready, and not restarted since the start (a crash, a crash loop);
* :func:`empty_bounds`: the Empty wait's bounds, from the group's real configs:
  when a member left behind may be forced out, how long a member that stopped
  heartbeating can stay listed, how long a live member forced out takes to be
  back (the rejoin bound);
* :func:`members_pairing`: the group's members paired with the platform's
  instances (:mod:`~airflow_provider_kip848.controllers.pairing`), the one
  pairing every verdict uses.
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
from airflow_provider_kip848.controllers.pairing import Pairing, facts, pair_members
from airflow_provider_kip848.controllers.protocol import Instance
from airflow_provider_kip848.controllers.registry import resolve_controller
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.errors import GroupNotFound

#: the clients' default session timeout and heartbeat interval of the classic protocol (Java and librdkafka)
CLASSIC_SESSION_MS, CLASSIC_HEARTBEAT_MS = 45000, 3000
#: the brokers' default heartbeat interval of consumer and streams groups (group.*.heartbeat.interval.ms)
GROUP_HEARTBEAT_MS = 5000
#: margin over session + heartbeat: the coordinator's expiry timer and a poll's own latency
LIVENESS_MARGIN_S = 1.0
#: the clients' default max.poll.interval.ms (Java and librdkafka): the rebalance timeout a member joins with, the
#: longest it may go between two polls while it stays in its group
CLIENT_MAX_POLL_MS = 300000


def _session_heartbeat(hook: KafkaGroupAdminHook, group_id: str, group_type: str,
                       config: ClientConfig | None) -> tuple[float, float, str]:
    """A group's session timeout and heartbeat interval (ms) and where they came from: consumer and streams
    groups, the group config (itself defaulted by the brokers); classic members, the client's as the controller
    reports it, else the clients' defaults."""
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
    return session_ms, heartbeat_ms, source


def liveness_window(hook: KafkaGroupAdminHook, group_id: str, group_type: str,
                    config: ClientConfig | None = None) -> tuple[float, str]:
    """Seconds a member must stay listed to prove it heartbeats, and where the figures came from."""
    session_ms, heartbeat_ms, source = _session_heartbeat(hook, group_id, group_type, config)
    window = (session_ms + heartbeat_ms) / 1000 + LIVENESS_MARGIN_S
    return window, f"{window:g} s: {source} ({session_ms:g} ms) + heartbeat ({heartbeat_ms:g} ms) + 1 s"


@dataclass(frozen=True)
class EmptyBounds:
    """An Empty wait's bounds (seconds), from the group's real configs (``how`` says which):

    * ``removal_s``: a member paired with an instance the platform shows stopped is forced out no sooner than
      this after the wait began: its session (a member that stopped heartbeating is gone by then without a
      removal, and a removal costs the rejoin bound below). On the consumer and streams protocols the group's
      session timeout is the broker's own and exact: a member listed past it is alive, never forced out;
    * ``expiry_s``: the longest a member that stopped heartbeating stays listed; one listed longer (same member
      id) is alive. Consumer and streams groups: their session window; classic groups: the brokers'
      ``group.max.session.timeout.ms`` (no classic member may ask for a longer session; 0: not readable, no
      such check);
    * ``rejoin_s``: how long a live member forced out takes to be back: it learns of the removal within its
      session and rejoins at its next poll, within its rebalance timeout (``max.poll.interval.ms``).
    """

    removal_s: float
    expiry_s: float
    rejoin_s: float
    how: str
    group_type: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"removal_s": self.removal_s, "expiry_s": self.expiry_s, "rejoin_s": self.rejoin_s, "how": self.how,
                "group_type": self.group_type}


def empty_bounds(hook: KafkaGroupAdminHook, group_id: str, config: ClientConfig | None = None) -> EmptyBounds:
    """The Empty wait's bounds for ``group_id`` as it is now (a group that does not exist: the classic rules),
    from its group config, the brokers' ``group.*`` configs and the application's client configuration
    (``config``: the controller's; None: the clients' defaults, said)."""
    try:
        group_type: str | None = hook.describe_group(group_id).type.value
    except GroupNotFound:
        group_type = None
    kind = group_type if group_type in ("consumer", "streams") else "classic"
    session_ms, heartbeat_ms, source = _session_heartbeat(hook, group_id, kind, config)
    props = dict(config.properties) if config is not None else {}
    poll = props.get("max.poll.interval.ms")
    poll_ms = float(poll) if poll else float(CLIENT_MAX_POLL_MS)
    poll_source = "the application's max.poll.interval.ms" if poll else "the clients' default max.poll.interval.ms"
    window = (session_ms + heartbeat_ms) / 1000 + LIVENESS_MARGIN_S
    rejoin = (session_ms + poll_ms) / 1000 + LIVENESS_MARGIN_S
    rejoin_how = f"rejoin bound {rejoin:g} s: session ({session_ms:g} ms) + {poll_source} ({poll_ms:g} ms) + 1 s"
    if kind != "classic":
        return EmptyBounds(window, window, rejoin, f"removal and expiry {window:g} s: {source} ({session_ms:g} ms) "
                                                   f"+ heartbeat ({heartbeat_ms:g} ms) + 1 s; {rejoin_how}",
                           group_type)
    most = hook.group_coordinator_config().int_value("group.max.session.timeout.ms")
    expiry = (most + heartbeat_ms) / 1000 + LIVENESS_MARGIN_S if most else 0.0
    expiry_how = (f"expiry {expiry:g} s: the brokers' group.max.session.timeout.ms ({most} ms), the longest session "
                  "a classic member may have" if most else "expiry not checked (group.max.session.timeout.ms not read)")
    return EmptyBounds(window, expiry, rejoin, f"removal after {window:g} s: {source} ({session_ms:g} ms) + "
                                               f"heartbeat ({heartbeat_ms:g} ms) + 1 s; {expiry_how}; {rejoin_how}",
                       group_type)


def group_protocol_of(hook: KafkaGroupAdminHook, group_id: str) -> str:
    """The protocol a group's members speak by its type now (classic, consumer, streams); a group that does not
    exist: classic (what a stopped application's group was, before a migration)."""
    try:
        kind = hook.describe_group(group_id).type.value
    except GroupNotFound:
        return "classic"
    return kind if kind in ("consumer", "streams") else "classic"


def group_members(hook: KafkaGroupAdminHook, group_id: str) -> list[dict[str, object]]:
    """The group's members now, each as its naming facts (:func:`~airflow_provider_kip848.controllers.pairing.facts`;
    a group that does not exist: none)."""
    try:
        desc = hook.describe_group(group_id)
    except GroupNotFound:
        return []
    return [{**facts(m.to_dict()), "host": getattr(m, "host", "")} for m in desc.members]


def members_pairing(members: list[dict[str, object]], status: ApplicationStatus | None, *,
                    earlier: Mapping[str, object] | None = None, contested: tuple[str, ...] = ()) -> Pairing:
    """The group's ``members`` (a condition's member facts) paired with ``status``'s instances and, gone since,
    those of ``earlier`` (a status as JSON: the one before the stop). See
    :mod:`~airflow_provider_kip848.controllers.pairing`."""
    before = ApplicationStatus.from_dict(earlier)
    gone: tuple[Instance, ...] = before.instances if before is not None and before.known else ()
    return pair_members(members, status, earlier=gone, contested=contested)


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
                      baseline: Mapping[str, object] | None,
                      status: ApplicationStatus | None = None) -> InstancesVerdict:
    """The platform's word on the instances after a start or a roll (``baseline``: the status the start task
    recorded right after starting; ``status``: the controller's status when the caller already asked for it)."""
    if controller is None:
        return InstancesVerdict("unknown", "instances not checked: no application controller was named, so the "
                                           "verdict rests on the broker alone")
    status = status if status is not None else controller.status()
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


__all__ = ["CLASSIC_HEARTBEAT_MS", "CLASSIC_SESSION_MS", "CLIENT_MAX_POLL_MS", "EmptyBounds", "InstancesVerdict",
           "empty_bounds", "gone_confirmation", "instances_verdict", "liveness_window", "lost_instances_message",
           "group_members", "group_protocol_of", "members_pairing", "named_controller", "task_error"]

"""The online way back, and where it left the application: every instance back on the protocol it came from, or
named with why not, and the group said to be mixed when it is.

A rolling upgrade that fails half-way (its deadline, a crash the platform saw, a roll that stopped at an
instance) leaves some instances on the new protocol and some on the old one. The way back rolls them all back
(:func:`roll_back`: instance by instance where the controller can, every instance tried whatever its state;
else the platform's own rolling restart). Whether it worked is two facts, each from its own witness:

* the **coordinator**: each group's live members by protocol (a member still on the new protocol is an instance
  not back, or one nobody has accounted for);
* the **platform**: each instance's state (one not running is not back, whatever the group shows), and, where
  the controller's identities pair a member with its instance
  (:func:`~airflow_provider_kip848.controllers.verdicts.member_instance`), the protocol each instance's member is
  on; and, where the controller reads logs, the client errors in each instance's recent log, in the client's
  words (:mod:`~airflow_provider_kip848.hooks.client_logs`).

:func:`split_of` reads both, names the instances and members not back, and says ``mixed`` when a group holds
members on more than one protocol or an instance is not back; the rolling upgrade's report shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context

from airflow_provider_kip848.controllers import ApplicationStatus, ControllerError, NamedController
from airflow_provider_kip848.controllers.verdicts import member_instance
from airflow_provider_kip848.engine.instance_roll import InstanceRollFailed, RollLimits, roll_application
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.client_logs import ClientErrors, read_client_errors
from airflow_provider_kip848.kafka.errors import GroupNotFound, Kip848Error
from airflow_provider_kip848.kafka.rules.conditions import TaskLog, is_live


class WayBackFailed(Exception):
    """The way back did not bring every instance back: ``what`` says where it stopped and why, ``split`` where
    the members and instances are (:func:`split_of`), ``rolled`` the instances it did bring back."""

    def __init__(self, what: str, *, split: dict[str, Any],  # Any: JSON of several shapes (XCom, reports)
                 rolled: Sequence[Mapping[str, Any]] = (), retriable: bool = False) -> None:
        super().__init__(what)
        self.what, self.split, self.rolled, self.retriable = what, split, list(rolled), retriable


def _groups(hook: KafkaGroupAdminHook, group_ids: Sequence[str]) -> tuple[
        dict[str, dict[str, Any]], list[tuple[str, dict[str, Any]]]]:  # Any: JSON of several shapes
    """Each group's type, state and live members by protocol (the coordinator), and the live members."""
    groups: dict[str, dict[str, Any]] = {}
    members: list[tuple[str, dict[str, Any]]] = []
    for group_id in group_ids:
        try:
            desc = hook.describe_group(group_id)
        except GroupNotFound:
            groups[group_id] = {"exists": False}
            continue
        except Kip848Error as exc:
            groups[group_id] = {"error": str(exc)}
            continue
        by_protocol: dict[str, list[str]] = {}
        for m in desc.members:
            if is_live(m):
                by_protocol.setdefault(m.protocol.value, []).append(m.client_id or m.member_id)
                members.append((group_id, m.to_dict()))
        groups[group_id] = {"type": desc.type.value, "state": desc.state.value,
                            "members": {p: sorted(ids) for p, ids in sorted(by_protocol.items())}}
    return groups, members


def _group_line(group_id: str, facts: dict[str, Any]) -> str:  # Any: JSON of several shapes
    if "error" in facts:
        return f"{group_id}: unknown ({facts['error']})"
    if facts.get("exists") is False:
        return f"{group_id}: no such group"
    listed = "; ".join(f"{p}: {', '.join(ids)}" for p, ids in facts["members"].items()) or "no live member"
    return f"{group_id} is {facts['type']} / {facts['state']} ({listed})"


def split_of(named: NamedController, hook: KafkaGroupAdminHook, group_ids: Sequence[str],
             protocol: str) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
    """Where the application's groups and instances are against ``protocol`` (see the module): ``groups`` (type,
    state, live members by protocol, from the coordinator), ``instances`` (the platform's, each with its paired
    members and their protocols), ``not_back`` (instances not running, or whose paired member is on another
    protocol), ``members_not_back`` (live members on another protocol), ``back`` (every instance back and both
    witnesses answered), ``mixed`` (some of the application is on ``protocol`` and some is not) and ``summary``. A
    witness that cannot answer is said so, never read as "back"."""
    groups, members = _groups(hook, group_ids)
    try:
        status = named.status()
    except ControllerError as exc:
        status = ApplicationStatus.unknown(str(exc))
    paired: dict[str, list[str]] = {}
    for group_id, m in members:
        found = member_instance(m, status.instances) if status.known else None
        if found is not None:
            paired.setdefault(found.name, []).append(f"{group_id}: {m['client_id']} on {m['protocol']}")
    instances, not_back = [], []
    for instance in status.instances:
        on = paired.get(instance.name, [])
        instances.append({"name": instance.name, "state": instance.describe(), "running": instance.running,
                          "members": on})
        if not instance.running:
            not_back.append(f"{instance.describe()} is not running")
        elif any(not entry.endswith(f" on {protocol}") for entry in on):
            not_back.append(f"{instance.name} runs, but its member is not on {protocol} ({'; '.join(on)})")
    off = [f"{g}: {m['client_id'] or m['member_id']} on {m['protocol']}" for g, m in members
           if m["protocol"] != protocol]
    on_protocol = any(m["protocol"] == protocol for _, m in members)
    known = status.known and not any("error" in facts for facts in groups.values())
    back = known and not not_back and not off
    mixed = bool((off and on_protocol) or (not_back and on_protocol)
                 or any(len(facts.get("members") or {}) > 1 for facts in groups.values()))
    platform = (", ".join(i.describe() for i in status.instances) or "no instance") if status.known else \
        f"unknown ({status.reason})"
    verdict = ("the group is mixed" if mixed else f"every instance is back on {protocol}" if back else
               f"not every instance is back on {protocol}")
    summary = (f"{verdict} (the coordinator: {'; '.join(_group_line(g, f) for g, f in groups.items())}; the "
               f"platform: {platform})")
    if not_back:
        summary += f"; instances not back on {protocol}: {'; '.join(not_back)}"
    if off:
        summary += f"; members not on {protocol}: {', '.join(off)}"
    # the clients' own words, per instance: their newest log lines (a log that spans restarts may hold an earlier
    # incarnation's too, so this is said as "recent", never as the cause)
    errors = read_client_errors(named, [i.name for i in status.instances]) if status.known else ClientErrors()
    if errors.findings:
        summary += f"; in the instances' recent logs: {errors.describe()}"
    return {"protocol": protocol, "groups": groups, "instances": instances, "platform_known": status.known,
            "not_back": not_back, "members_not_back": off, "back": back, "mixed": mixed, "summary": summary,
            "client_errors": errors.to_dict()}


def roll_back(named: NamedController, hook: KafkaGroupAdminHook, group_ids: Sequence[str], protocol: str,
              limits: RollLimits, *, context: Context, task_id: str, audit_log: str | None,
              log: TaskLog) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
    """The online way back to ``protocol`` by the road the roll took (instance by instance, every instance tried:
    :class:`~.instance_roll.InstanceRoll` with ``way_back``; or the platform's rolling restart), with where it
    left the groups and instances (``split``: :func:`split_of`). Raises :class:`WayBackFailed` when it did not
    bring every instance back, naming them and what the coordinator and the platform show."""
    try:
        result = roll_application(named, hook, group_ids, protocol, limits, context=context, task_id=task_id,
                                  audit_log=audit_log, log=log, way_back=True)
    except (ControllerError, InstanceRollFailed) as exc:
        split = split_of(named, hook, group_ids, protocol)
        rolled = exc.rolled if isinstance(exc, InstanceRollFailed) else []
        raise WayBackFailed(f"{exc.what}. Now: {split['summary']}", split=split, rolled=rolled,
                            retriable=exc.retriable) from exc
    result["split"] = split_of(named, hook, group_ids, protocol)
    return result


__all__ = ["WayBackFailed", "roll_back", "split_of"]

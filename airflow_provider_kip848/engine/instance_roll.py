"""A rolling restart the provider drives itself, one instance at a time, checking each before the next.

A platform's own rolling restart (``kubectl rollout restart``, a unit-by-unit
script) runs to its end whatever the group does: a deployment that does not
bring the new protocol (a launcher that never read the switch, an image that
was not rebuilt) is noticed at the rollout's deadline, after every instance
restarted. When the application's controller can stop and start one instance
(:meth:`~airflow_provider_kip848.controllers.ApplicationController.can_roll_instances`),
the rolling upgrade and the fleet's online path roll through this module instead:

1. **Stop** instance *i*; the platform confirms it is not running. The platform is read afresh first, and
   that look is also the check of the instances rolled before (step 6): nothing is touched after one died.
2. **Its static member left.** A member on the consumer protocol that shut down
   gracefully leaves with member epoch -2 and releases its ``group.instance.id``;
   one that was killed (or crashed) stays at its epoch until its session expires,
   and its replacement would be fenced (``UNRELEASED_INSTANCE_ID``) until then.
   Once the platform confirms the instance gone, such a member is removed by its
   ``group.instance.id`` (LeaveGroup, audited). A classic static member is
   replaced by the broker when its successor joins, on either protocol (measured
   on Kafka 4.3: the group converts and the newcomer takes the id), so it is left
   alone.
3. **Start** instance *i* with the new protocol, and keep its **incarnation from its own start**: the
   platform is read right after the start command until it shows the instance with an incarnation (a pid, a
   container), and that first one is the instance's, with its restart count, for the rest of the roll. A
   later look never replaces it: a process the platform restarted at once after a crash (supervisord's
   ``autorestart``, a kubelet) reads STARTING without a pid, then RUNNING under a new one, and only the start's
   own incarnation tells it from the process the roll started.
4. **It came in.** Every group gets a new member (a member id not in the group
   before the start) on the new protocol at a live epoch. For the first
   instance this is the **gate**: bounded by its own (short) deadline, and
   failed at once when the instance's own new member joins on the old protocol
   or the platform shows the instance not running. Nothing else is restarted
   until it holds.
5. **It stays up** for ``settle_s`` after its member joined (by default one consumer heartbeat interval,
   5 s: a consumer that dies at its first heartbeats shows within it) before the next instance is touched.
6. **The rolled stay up.** Every look at the platform, from the start of an instance to the last one after
   the last instance, checks the instance against its start and the instances rolled before: one gone,
   stopped, replaced (another incarnation), restarted (its restart count grew) or seen starting again
   (STARTING / BACKOFF, not ready, after it ran) stops the roll at once, named with both incarnations (the
   new one read for a few seconds when the platform does not show it yet), before any further instance is
   restarted. Its member may stay listed until its session expires, so only the platform can say (a
   librdkafka consumer that took a fatal ``GROUP_ID_NOT_FOUND`` from a coordinator failing over, seen in a
   3-node test, exits this way).

**The way back** (``way_back=True``: the rolling upgrade's rollback to the protocol the application came
from) goes through every instance whatever state it is in (stopped, exited, fatal, crash-looping, starting):
an instance that was not up before the way back (not running, or running but not ready) and does not come
back is named and the way back goes on with the others; only one that was up and did not come back stops it
(a restart never takes down more than one instance that ran). It ends naming every instance not back and why
(:class:`InstanceRollFailed`), and :mod:`.way_back` says where the members and instances ended.

**A platform that replaces an instance in one step** (:meth:`~airflow_provider_kip848.controllers.
ApplicationController.replaces_instances`: Kubernetes, whose StatefulSet partition or held Deployment rollout
terminates a pod and creates its successor at once) gets no separate stop: steps 1-3 are its ``start_instance``,
which returns the successor (a Deployment's new pod has a name of its own, which the roll follows from then on),
and the old member's leave is recorded, not forced (its successor may already hold the ``group.instance.id``). The
platform also says the order (:meth:`~airflow_provider_kip848.controllers.ApplicationController.instance_order`: a
StatefulSet's highest ordinal first), and an instance it says already runs the protocol is left as it is.

Which member is which instance comes from the platform's identities
(:func:`~airflow_provider_kip848.controllers.verdicts.member_instance`: the
``group.instance.id``, the ``client.id``, a unique host). A group with static
members whose instances cannot be matched is refused before anything stops:
removing the wrong ``group.instance.id`` would fence a live instance.

Why over 500 lines: one roll, one state machine (the gate, the leave, the start's incarnation, the settle, the
rolled instances re-checked at every look, the way back's every-instance rule) whose steps share the roll's record
and failure wording; what stands alone (the incarnation rules, the bug windows, the way back's account) is in
engine/incarnation.py, engine/upgrade_window.py and engine/way_back.py already.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from airflow.sdk import Context

from airflow_provider_kip848.controllers import ApplicationStatus, ControllerError, Instance, NamedController
from airflow_provider_kip848.controllers.verdicts import member_instance
from airflow_provider_kip848.engine.incarnation import follow_origin, is_up, since_start
from airflow_provider_kip848.engine.upgrade_window import UpgradeWindowShut, await_upgrade_window
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.client_logs import last_log_lines, read_client_errors
from airflow_provider_kip848.hooks.members import departed_static_members, remove_static_members
from airflow_provider_kip848.kafka.errors import GroupNotFound, Kip848Error
from airflow_provider_kip848.kafka.model import ConsumerGroupMember
from airflow_provider_kip848.kafka.rules.conditions import TaskLog

#: member epoch of a static member that left on purpose (it keeps its assignment for its session, id released)
LEFT_STATIC_EPOCH = -2
#: after the platform confirms an instance gone: how long its leave may take to show on the coordinator
LEAVE_GRACE_S = 5.0
#: how long an instance must stay as its start left it once its member joined, before the next one is touched:
#: a consumer that dies at its first heartbeats shows within one heartbeat interval (the consumer protocol's
#: default group.consumer.heartbeat.interval.ms is 5 s)
SETTLE_S = 5.0
#: once an instance is seen starting again without a new incarnation yet: how long the platform is read for it,
#: to name both (nothing is restarted meanwhile)
NAME_INCARNATION_S = 10.0


class InstanceRollFailed(Exception):
    """The roll stopped: ``what`` names the instance and why; ``rolled`` lists the instances done before;
    ``not_back`` (a way back) each instance that did not come back and why; ``instances`` the instances the
    failure is about (whose last log lines the failure quotes: a Deployment's new pod is in no earlier list)."""

    def __init__(  # Any: JSON of several shapes (XCom, reports)
            self, what: str, *, rolled: Sequence[Mapping[str, Any]], retriable: bool = False,
            not_back: Sequence[Mapping[str, Any]] = (), instances: Sequence[str] = ()) -> None:
        super().__init__(what)
        self.what, self.rolled, self.retriable = what, list(rolled), retriable
        self.not_back = list(not_back)
        self.instances = list(instances)


class RolledInstanceLost(InstanceRollFailed):
    """An instance rolled earlier in this roll is no longer the process its start created: the roll (a way back
    too) stops at once."""


@dataclass(frozen=True)
class RollLimits:
    """Deadlines of the roll: ``first_instance_s`` is the gate's; ``instance_s`` each later instance's;
    ``settle_s`` how long each instance must stay as its start left it once its member joined."""

    first_instance_s: float
    instance_s: float
    poll_s: float = 1.0
    leave_grace_s: float = LEAVE_GRACE_S
    settle_s: float = SETTLE_S


def _live(member: ConsumerGroupMember) -> bool:
    return member.member_epoch is None or member.member_epoch >= 0


def _members(hook: KafkaGroupAdminHook, group_id: str, log: TaskLog) -> list[ConsumerGroupMember] | None:
    """The group's members now; None when the coordinator cannot say (failing over, loading, not answering): never
    "no members", which would take every member seen after it for a newcomer."""
    try:
        desc = hook.describe_group(group_id)
    except GroupNotFound:
        return []
    except Kip848Error as exc:
        if getattr(exc, "retriable", False):
            log.info("Members of %s unknown for now (the coordinator cannot answer: %s): waiting", group_id, exc)
            return None
        raise
    return [m for m in desc.members if isinstance(m, ConsumerGroupMember)]


def _of(member: ConsumerGroupMember, instance: Instance, instances: Sequence[Instance]) -> bool:
    """Whether ``member`` is ``instance`` (by name: a restart changes the instance's other facts)."""
    found = member_instance(member.to_dict(), instances)
    return found is not None and found.name == instance.name


def unmatched_static_members(members: Sequence[ConsumerGroupMember], instances: Sequence[Instance]) -> list[str]:
    """The static members (their ``group.instance.id``) that no instance of the platform's can be matched to."""
    return [m.instance_id for m in members if m.instance_id and member_instance(m.to_dict(), instances) is None]


class InstanceRoll:
    """One application rolled to ``protocol`` instance by instance over its ``group_ids`` (see the module);
    ``way_back``: the rollback to the protocol it came from (every instance tried, see the module)."""

    def __init__(self, controller: NamedController, hook: KafkaGroupAdminHook, group_ids: Sequence[str],
                 protocol: str, limits: RollLimits, *, remove_static: Callable[[str, list[str]], list[str]],
                 log: TaskLog, way_back: bool = False,
                 before_first_start: Callable[[], dict[str, object]] | None = None) -> None:
        self.controller, self.hook, self.group_ids = controller, hook, list(group_ids)
        self.protocol, self.limits, self.log, self.way_back = protocol, limits, log, way_back
        #: removes members by ``group.instance.id`` (group, ids) -> removed ids; audited by the caller
        self.remove_static = remove_static
        self.rolled: list[dict[str, Any]] = []
        #: a way back's instances that did not come back: {instance, before, why}
        self.not_back: list[dict[str, Any]] = []
        #: the bug windows' guard (engine/upgrade_window.py), run after the first instance stopped, before it starts
        self.before_first_start = before_first_start

    def _fail(self, what: str, *, retriable: bool = False, instance: str | None = None) -> InstanceRollFailed:
        return InstanceRollFailed(what, rolled=self.rolled, retriable=retriable, not_back=self.not_back,
                                  instances=[instance] if instance else [])

    def _status(self) -> ApplicationStatus:
        status = self.controller.status()
        if not status.known:
            raise self._fail(f"the platform cannot tell which instances exist ({status.reason}): nothing is "
                             "restarted on a guess", retriable=True)
        return status

    def _instances(self) -> list[Instance]:
        """The platform's instances now; fails when one rolled earlier in this roll is no longer the process its
        start created (:meth:`_check_rolled`): every look at the platform during the roll is also that check."""
        status = self._status()
        self._check_rolled(status)
        return sorted(status.instances, key=lambda i: i.name)

    def _named_both(self, name: str, origin: Mapping[str, Any], why: str) -> str:
        """``why`` again once the platform shows the new incarnation of an instance seen starting again (read for
        up to :data:`NAME_INCARNATION_S`; nothing else is done meanwhile), so both are named."""
        if "not shown yet" not in why:
            return why
        deadline = time.monotonic() + NAME_INCARNATION_S
        while time.monotonic() < deadline:
            time.sleep(self.limits.poll_s)
            try:
                status = self.controller.status()
            except ControllerError:
                break
            now = next((i for i in status.instances if i.name == name), None) if status.known else None
            if now is not None and now.incarnation and now.incarnation != origin.get("incarnation"):
                return why.replace("not shown yet", f"{now.incarnation}, {now.state or 'running'} now")
            if now is None or not now.running:
                return since_start(origin, now) or why
        return why

    def _check_rolled(self, status: ApplicationStatus) -> None:
        """An instance rolled earlier that is no longer the process its start created (gone, stopped, replaced,
        restarted, starting again) stops the roll at once, naming it with both incarnations: its member may stay
        listed until its session expires, so the coordinator would not say; restarting more instances on the
        new protocol while one that runs it has just died would spread what killed it. Not retriable: the
        instance's own log says why it died (a client's fatal error, say), and a person decides."""
        listed = {i.name: i for i in status.instances}
        lost = []
        for record in self.rolled:
            why = since_start(record["origin"], listed.get(record["instance"]))
            if why is not None:
                lost.append(f"{record['instance']} {self._named_both(record['instance'], record['origin'], why)}")
        if lost:
            raise RolledInstanceLost(
                "an instance rolled earlier has died since its new member joined on "
                f"group.protocol={self.protocol}, as the platform says: {'; '.join(lost)}. The roll stops here, "
                "before any further instance is restarted; read that instance's log for why it exited before "
                "restarting anything else", rolled=self.rolled, not_back=self.not_back,
                instances=[r["instance"] for r in self.rolled
                           if since_start(r["origin"], listed.get(r["instance"])) is not None])

    def _describe_all(self, what: str) -> dict[str, list[ConsumerGroupMember]]:
        deadline = time.monotonic() + max(self.limits.instance_s, self.limits.poll_s)
        while True:
            seen = {g: _members(self.hook, g, self.log) for g in self.group_ids}
            if all(v is not None for v in seen.values()):
                return {g: v or [] for g, v in seen.items()}
            if time.monotonic() >= deadline:
                raise self._fail(f"{what}: the group coordinator cannot describe "
                                 f"{', '.join(g for g, v in seen.items() if v is None)} (unknown)", retriable=True)
            time.sleep(self.limits.poll_s)

    def run(self) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
        instances = self._instances()
        if not instances:
            raise self._fail("the platform lists no instance of the application: nothing to roll")
        members = self._describe_all("before the roll")
        unmatched = {g: ids for g, ms in members.items() if (ids := unmatched_static_members(ms, instances))}
        if unmatched:
            raise self._fail(
                "static member(s) " + "; ".join(f"{g}: {', '.join(ids)}" for g, ids in unmatched.items())
                + " match no instance the platform lists, so whether an instance's static member left before its "
                "replacement joins cannot be checked (nothing was stopped). Give the controller the instances' "
                "identities (a command controller's member_identity; docs/controllers.md)")
        started = time.monotonic()
        order = self.controller.instance_order([i.name for i in instances], self.protocol)
        for index, name in enumerate(order):
            # the platform afresh (and the rolled checked) right before this instance is touched
            instance = next((i for i in self._instances() if i.name == name), None)
            if instance is None:
                raise self._fail(f"instance {name} is no longer listed by the platform: the roll stops here")
            if not self.way_back:
                self.rolled.append(self._roll_one(instance, first=index == 0))
                continue
            try:
                self.rolled.append(self._roll_one(instance, first=False))
            except RolledInstanceLost:
                raise
            except (InstanceRollFailed, ControllerError) as exc:
                why = exc.what if isinstance(exc, InstanceRollFailed) else str(exc)
                self.not_back.append({"instance": name, "before": instance.to_dict(), "why": why})
                if is_up(instance):  # it ran before the way back: taking down the next one could lose both
                    raise self._fail(self._not_back_message(instances, stopped_at=name)) from exc
                self.log.warning("The way back could not bring %s back (it was %s before): %s; going on with the "
                                 "others", name, instance.describe(), why)
        self._instances()  # the last look: every rolled instance still runs as it started (else this fails)
        if self.not_back:
            raise self._fail(self._not_back_message(instances, stopped_at=None))
        return {"mode": "by_instance", "group_protocol": self.protocol, "controller": self.controller.name,
                "instances": self.rolled, "gate": self.rolled[0]["joined"] if self.rolled and not self.way_back
                else None, "way_back": self.way_back,
                "seconds": round(time.monotonic() - started, 3),
                "removed_static": [i for r in self.rolled for i in r["removed_static"]]}

    def _not_back_message(self, instances: Sequence[Instance], *, stopped_at: str | None) -> str:
        done = ({r["instance"] for r in self.rolled} | {r["replaced"] for r in self.rolled if r.get("replaced")}
                | {n["instance"] for n in self.not_back})
        left = [i.name for i in instances if i.name not in done]
        failed = "; ".join(f"{n['instance']} (was {Instance.from_dict(n['before']).describe()}): {n['why']}"
                           for n in self.not_back)
        if stopped_at is not None:
            return (f"the way back to group.protocol={self.protocol} stopped at {stopped_at}, which ran before "
                    f"and did not come back (restarting the next one could take it down too): {failed}"
                    + (f"; not reached, still as they were: {', '.join(left)}" if left else ""))
        return (f"the way back to group.protocol={self.protocol} went through every instance; "
                f"{len(self.not_back)} did not come back on it: {failed}"
                + (f"; back: {', '.join(r['instance'] for r in self.rolled)}" if self.rolled else ""))

    def _roll_one(self, instance: Instance, *, first: bool) -> dict[str, Any]:
        name = instance.name
        record: dict[str, Any] = {"instance": name, "first": first, "removed_static": [],
                                  "before": instance.to_dict()}
        self.log.info("Rolling instance %s to group.protocol=%s%s", name, self.protocol,
                      " (the first: nothing else restarts until it is in)" if first else
                      f" (it is {instance.describe()})" if self.way_back else "")
        replaces = self.controller.replaces_instances()
        if replaces:  # the platform terminates it in the start's own step (a StatefulSet's partition, say)
            record["stopped"] = {"instance": name, "skipped": "the platform replaces it in the start's step"}
        elif instance.running:
            try:
                record["stopped"] = self.controller.stop_instance(name)
            except ControllerError as exc:
                raise self._fail(f"instance {name} could not be stopped: {exc}", retriable=exc.retriable) from exc
        else:
            record["stopped"] = {"instance": name, "skipped": f"not running ({instance.describe()})"}
        if not replaces:
            record["left"] = self._ensure_left(instance, record)
        before = self._describe_all(f"before instance {name} starts")
        known_ids = {g: {m.member_id for m in ms} for g, ms in before.items()}
        if first and self.before_first_start is not None:
            try:
                record["upgrade_window"] = self.before_first_start()
            except UpgradeWindowShut as exc:
                raise self._fail(f"instance {name} was not started: {exc.what}", retriable=exc.retriable) from exc
        try:
            record["started"] = self.controller.start_instance(name, self.protocol)
        except ControllerError as exc:
            raise self._fail(f"instance {name} could not be started on {self.protocol}: {exc}",
                             retriable=exc.retriable) from exc
        if record["started"].get("unchanged"):
            # the platform says it already runs the protocol (its pod never moved, or moved in an earlier run):
            # nothing was restarted, so no new member is awaited; it is held to this look from now on
            record["origin"] = {"incarnation": instance.incarnation, "restarts": instance.restarts,
                                "ran": is_up(instance)}
            record["joined"] = {"groups": {}, "unchanged": record["started"]["platform"].get("unchanged")}
            return record
        if replaces:
            record["left"] = self._left_in_replacement(instance, before)
        successor = str(record["started"].get("successor") or name)
        if successor != name:  # the platform's replacement has a name of its own (a Deployment's new pod)
            record["instance"], record["replaced"] = successor, name
            instance = replace(instance, name=successor)
        # the instance's own incarnation: the platform's view right after the start command, completed by the
        # first later look that shows one (follow_origin); never replaced by a later look
        now = record["started"].get("now")
        record["origin"] = origin = {"incarnation": None, "restarts": None, "ran": False}
        if now:
            follow_origin(origin, Instance.from_dict(now))
        record["joined"] = self._wait_joined(instance, record, known_ids, first=first)
        # the instance as the platform showed it when its member joined (its incarnation is the start's: checked)
        record["at_join"] = record["joined"].pop("instance")
        record["settled"] = self._settle(instance, record)
        return record

    def _left_in_replacement(self, instance: Instance,
                             before: Mapping[str, Sequence[ConsumerGroupMember]]) -> dict[str, str]:
        """Per group: how the replaced instance's member went when the platform replaced it in one step (its
        termination is the platform's: a consumer that closes on SIGTERM leaves; nothing is removed here, since
        its successor, under the same ``group.instance.id``, may already hold the id)."""
        members = self._describe_all(f"after instance {instance.name} was replaced")
        outcome: dict[str, str] = {}
        for group_id, ms in before.items():
            old = {m.member_id for m in ms if m.instance_id and m.instance_id == instance.group_instance_id}
            still = [m for m in members.get(group_id, []) if m.member_id in old]
            if not old:
                outcome[group_id] = "no static member of its own"
            elif not still:
                outcome[group_id] = "gone"
            elif all(m.member_epoch == LEFT_STATIC_EPOCH for m in still):
                outcome[group_id] = "left (member epoch -2: its group.instance.id released)"
            elif any(m.protocol.value == "classic" for m in still):
                outcome[group_id] = "classic static member: the broker hands its id to the successor"
            else:
                outcome[group_id] = ("still listed at a live epoch: its successor is fenced (UNRELEASED_INSTANCE_ID) "
                                     "until its session expires")
        return outcome

    def _ensure_left(self, instance: Instance, record: dict[str, Any]) -> dict[str, str]:
        """Per group: how the stopped instance's member went (``gone``, ``left`` at epoch -2, ``replaced by the
        broker`` for a classic static member, ``session`` for a dynamic one, ``removed``)."""
        deadline = time.monotonic() + self.limits.leave_grace_s
        while True:
            instances = self._instances()
            now = next((i for i in instances if i.name == instance.name), None)
            if now is not None and now.running:
                raise self._fail(f"instance {instance.name} runs again before the roll started it "
                                 f"({now.describe()}): something else restarts it; nothing was started")
            members = self._describe_all(f"after instance {instance.name} stopped")
            status = ApplicationStatus(known=True, instances=tuple(instances))  # _instances: known, or raised
            held = {g: [m for m in ms if m.instance_id in departed_static_members(ms, status)
                        and _of(m, instance, instances)] for g, ms in members.items()}
            if not any(held.values()) or time.monotonic() >= deadline:
                break
            time.sleep(self.limits.poll_s)
        outcome: dict[str, str] = {}
        for group_id, ms in members.items():
            own = [m for m in ms if _of(m, instance, instances)]
            if held[group_id]:  # the platform confirmed the instance gone: its id is released for its successor
                ids = sorted({m.instance_id for m in held[group_id] if m.instance_id})
                removed = self.remove_static(group_id, ids)
                missing = sorted(set(ids) - set(removed))
                if missing:
                    raise self._fail(f"instance {instance.name} is gone but its static member(s) {', '.join(missing)} "
                                     f"of {group_id} could not be removed: its successor would be fenced "
                                     "(UNRELEASED_INSTANCE_ID)", retriable=True)
                record["removed_static"] += [f"{group_id}/{i}" for i in ids]
                outcome[group_id] = f"removed {', '.join(ids)} (the platform confirmed the instance gone)"
            elif not own:
                outcome[group_id] = "gone"
            elif all(m.member_epoch == LEFT_STATIC_EPOCH for m in own):
                outcome[group_id] = "left (member epoch -2: its group.instance.id released)"
            elif any(m.instance_id for m in own):
                outcome[group_id] = "classic static member: the broker hands its id to the successor"
            else:
                outcome[group_id] = "dynamic member: expires with its session"
        return outcome

    def _look(self, instance: Instance, record: dict[str, Any], what: str, *, first: bool) -> tuple[
            Instance, list[Instance]]:
        """The platform now (the rolled checked), and this instance checked against its own start: gone, not
        running, replaced, restarted or starting again stops the roll here, named with both incarnations."""
        instances = self._instances()
        now = next((i for i in instances if i.name == instance.name), None)
        origin = record["origin"]
        why = since_start(origin, now)
        if why is not None:
            why = self._named_both(instance.name, origin, why)
            joined = "joined" in record and "at_join" in record
            raise self._fail(
                f"{what}: instance {instance.name} {why}, "
                + ("after its new member joined" if joined else "after its start")
                + f" on group.protocol={self.protocol}, as the platform says. The rollout stops here"
                + (", the other instances were not restarted" if first else ", before any further instance is "
                   "restarted") + "; read that instance's log for why it exited", instance=instance.name)
        assert now is not None  # since_start names a missing instance
        follow_origin(origin, now)
        return now, instances

    def _wait_joined(self, instance: Instance, record: dict[str, Any], known_ids: Mapping[str, set[str]], *,
                     first: bool) -> dict[str, Any]:
        """Until every group has a new member on the new protocol (see the module): its member id and the time."""
        limit = self.limits.first_instance_s if first else self.limits.instance_s
        what = "the first-instance gate" if first else f"instance {instance.name}"
        started = time.monotonic()
        joined: dict[str, str] = {}
        while True:
            now, instances = self._look(instance, record, what, first=first)
            members = {g: _members(self.hook, g, self.log) for g in self.group_ids}
            wrong: list[str] = []
            for group_id, ms in members.items():
                if ms is None or group_id in joined:
                    continue
                new = [m for m in ms if m.member_id not in known_ids[group_id] and _live(m)]
                ours = [m for m in new if m.protocol.value == self.protocol]
                if ours:
                    joined[group_id] = ours[0].member_id
                wrong += [f"{group_id}: {m.client_id} ({m.member_id}) on {m.protocol.value}" for m in new
                          if m.protocol.value != self.protocol and _of(m, instance, instances)]
            if len(joined) == len(self.group_ids):
                return {"groups": joined, "seconds": round(time.monotonic() - started, 3),
                        "instance": now.to_dict()}
            if wrong:
                raise self._fail(f"{what}: instance {instance.name} restarted with group.protocol={self.protocol} "
                                 f"but its new member joined on another protocol ({'; '.join(wrong)}, "
                                 f"{time.monotonic() - started:.1f} s after its start): the deployment does not run "
                                 "the new protocol. The rollout stops here"
                                 + (", the other instances were not restarted" if first else ""),
                                 instance=instance.name)
            if time.monotonic() - started >= limit:
                waiting = [g for g in self.group_ids if g not in joined]
                raise self._fail(f"{what}: no new member on group.protocol={self.protocol} in {', '.join(waiting)} "
                                 f"within {limit:g} s of instance {instance.name}'s start (it runs: "
                                 f"{now.describe()}). The rollout stops here"
                                 + (", the other instances were not restarted" if first else ""),
                                 instance=instance.name)
            time.sleep(self.limits.poll_s)

    def _settle(self, instance: Instance, record: dict[str, Any]) -> dict[str, Any]:
        """The instance stays the process its start created for ``settle_s`` once its member joined (looked at every
        ``poll_s``), before the next instance is touched: how long it was watched and its incarnation."""
        started = time.monotonic()
        what = f"the {self.limits.settle_s:g} s it must stay up once its member joined"
        while True:
            now, _ = self._look(instance, record, what, first=bool(record["first"]))
            if time.monotonic() - started >= self.limits.settle_s:
                return {"seconds": round(time.monotonic() - started, 3), "incarnation": now.incarnation,
                        "state": now.state}
            time.sleep(min(self.limits.poll_s, self.limits.settle_s))


def roll_application(named: NamedController, hook: KafkaGroupAdminHook | None, group_ids: Sequence[str],
                     protocol: str, limits: RollLimits, *,
                     context: Context,
                     task_id: str, audit_log: str | None, log: TaskLog,
                     way_back: bool = False) -> dict[str, Any]:  # Any: JSON record
    """Roll the application to ``protocol``: instance by instance (:class:`InstanceRoll`: the gate, the static
    members' leave, removals audited as ``task_id``'s; ``way_back``: every instance tried, whatever its state)
    when the controller can and the groups are given (a ``hook`` to their cluster), else through the platform's
    rolling restart. The result has the platform's status after the roll (a migrated wait's baseline) and
    ``mode`` (``by_instance`` or ``platform``). Raises
    :class:`~airflow_provider_kip848.controllers.ControllerError` or :class:`InstanceRollFailed`."""
    # the bug windows (engine/upgrade_window.py), before the first member switches classic -> consumer
    guard: Callable[[], dict[str, object]] | None = (
        partial(await_upgrade_window, hook, group_ids, timeout_s=limits.instance_s, poll_s=limits.poll_s, log=log)
        if hook is not None and group_ids and protocol == "consumer" else None)
    if hook is None or not group_ids or not named.can_roll_instances():
        try:
            window = guard() if guard is not None else None
        except UpgradeWindowShut as exc:
            raise InstanceRollFailed(f"the platform's roll was not begun: {exc.what}", rolled=[],
                                     retriable=exc.retriable) from exc
        result = named.roll(protocol)
        if window is not None:
            result["upgrade_window"] = window
        result["mode"] = "platform"
        return result

    def remove(group_id: str, ids: list[str]) -> list[str]:
        return remove_static_members(context, task_id, hook, group_id, ids, audit_log=audit_log, log=log,
                                     why="its instance is gone (the platform confirms it); its successor would be "
                                         "fenced")

    # each instance's log mark before the roll: the waits after it read only what is newer
    names = [i.name for i in named.status().instances] if named.can_read_logs() else []
    marks = named.log_marks(names)
    try:
        rolled = InstanceRoll(named, hook, group_ids, protocol, limits, remove_static=remove, log=log,
                              way_back=way_back, before_first_start=guard).run()
    except InstanceRollFailed as exc:  # why an instance did not come in, in its client's words, where it logged it
        # the instances the failure names too (a Deployment's new pod: no mark, its whole log is new), and their
        # last lines: a process that crashed says why there, in words no scan knows
        errors = read_client_errors(named, [*names, *(n for n in exc.instances if n not in names)], marks)
        said = ". ".join(p for p in (errors.describe(), last_log_lines(named, exc.instances)) if p)
        if not said:
            raise
        raise type(exc)(f"{exc.what}. {said}", rolled=exc.rolled, retriable=exc.retriable,
                        not_back=exc.not_back, instances=exc.instances) from exc
    return {"controller": named.name, "kind": named.kind, "action": "roll",
            "platform": {"rolled": [r["instance"] for r in rolled["instances"]]}, **rolled,
            "status": named.status_with_marks(marks)}


__all__ = ["LEAVE_GRACE_S", "LEFT_STATIC_EPOCH", "NAME_INCARNATION_S", "SETTLE_S", "InstanceRoll",
           "InstanceRollFailed", "RollLimits", "RolledInstanceLost", "roll_application", "unmatched_static_members"]

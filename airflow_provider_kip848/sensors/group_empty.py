"""The Empty wait (:class:`KafkaGroupEmptySensor`): the group has no members, as an offline migration needs before
the new application starts, with the platform's word on who may be forced out.

Who is forced out, and when the wait holds, rests on the one pairing of members with instances
(:mod:`~airflow_provider_kip848.controllers.pairing`) and on the group's real bounds
(:func:`~airflow_provider_kip848.hooks.instances.empty_bounds`); the judgement itself is
:func:`~airflow_provider_kip848.kafka.rules.conditions.follow_empty`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from airflow_provider_kip848.controllers import ApplicationStatus, ControllerError
from airflow_provider_kip848.controllers.pairing import facts, member_name, removable
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.instances import (
    empty_bounds,
    gone_confirmation,
    group_members,
    group_protocol_of,
    members_pairing,
)
from airflow_provider_kip848.hooks.members import force_out_members
from airflow_provider_kip848.hooks.platform_watch import PlatformWatch
from airflow_provider_kip848.kafka.arguments import is_template, parse_flag, parse_number
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.rules.conditions import GroupCondition, WaitState
from airflow_provider_kip848.sensors.group_condition import GroupWaitResult, KafkaGroupConditionSensor
from airflow_provider_kip848.sensors.platform import ControllerAware
from airflow_provider_kip848.triggers.group import GroupConditionEvent

__all__ = ["EMPTY_SETTLE_SECONDS", "KafkaGroupEmptySensor", "group_seen_by", "stop_result_of"]


def group_seen_by(snapshot_task_id: str) -> str:
    """The template telling a :class:`KafkaGroupEmptySensor` (``allow_absent``) that the group existed before the
    wait: the snapshot task taken before the stop described it (a snapshot of an id the cluster does not know
    fails). Gone after that, it was deleted by the coordinator (Empty, without committed offsets): empty."""
    return f"{{{{ (ti.xcom_pull(task_ids='{snapshot_task_id}') or {{}}).get('group_id') is not none }}}}"


def stop_result_of(stop_task_id: str) -> str:
    """The template handing a :class:`KafkaGroupEmptySensor` (``stop_result``) the stop task's result: its
    ``before`` (the platform's status right before the stop) names the instances a platform no longer lists once
    stopped (a deleted pod, a removed unit), so the members they left behind can still be paired with them. A stop
    task that did not run gives None: nothing is paired with an instance gone then."""
    return f"{{{{ ti.xcom_pull(task_ids='{stop_task_id}') or none }}}}"


#: Default settle window of an Empty wait: twice the longest default heartbeat interval (classic
#: clients 3 s, the consumer protocol 5 s), so a member still running has rejoined before it ends.
EMPTY_SETTLE_SECONDS = 10.0


class KafkaGroupEmptySensor(ControllerAware, KafkaGroupConditionSensor):
    """Wait until the group has no members, and keeps none for ``settle_seconds``; a member seen after the
    group was empty fails the wait, named (an instance still runs: a slow consumer's next poll, a process the
    controller did not stop).

    Members left behind are forced out (after ``remove_members_after``) only once the platform confirmed that
    no instance exists: the stop task's ``instances_gone``, and, with a controller, its status at that moment.
    Without that confirmation no member is forced out: they leave when their session times out, and the result
    says so. With a controller, an Empty group whose platform still shows an instance running fails the wait
    (that instance would rejoin), naming it. With a controller the platform is also watched through the whole
    wait (every ``platform_check_seconds``; deferred, from the triggerer): an instance that runs again (started,
    restarted by its process manager, crash-looping) fails the wait at once, named, before its member rejoins.

    :param settle_seconds: how long the group must stay empty (templated; 0: a single empty poll).
    :param instances_gone: the application's controller confirmed that no instance is left (its stop
        returned ``instances_gone``; templated, parsed strictly). The members left behind are forced out at the
        first poll then (when ``remove_members_after`` is set at all) and the group needs no settle time.
    :param controller, controller_args: the application's controller (a registry name; templated).
    :param allow_absent: a group that does not exist counts as empty (templated flag, parsed strictly). Without
        it, an id the cluster has not listed since the wait began fails the wait (``GroupNotFound`` naming the
        similar ids, with the code points where they differ invisibly): a mistyped id is never "Empty". A group
        seen during the wait and deleted later is empty either way. The offline DAGs pass
        :func:`group_seen_by` their snapshot before the stop.
    :param stop_result: the stop task's result (templated: ``stop_result_of('stop_application')``); its status
        before the stop names the instances a platform no longer lists once they are stopped (a deleted pod), so
        a member one of them left behind is still paired with it.

    Who is forced out rests on the pairing of members with instances
    (:mod:`~airflow_provider_kip848.controllers.pairing`): only a member paired with an instance the platform
    shows stopped or gone, and only once it outlived its session (the group's bounds,
    :func:`~airflow_provider_kip848.hooks.instances.empty_bounds`: until then the broker drops a member that stopped
    heartbeating by itself); the wait then holds no sooner than the rejoin bound after the removal, and a member
    back before fails it. A member no instance accounts for is never forced out: it is named and waited for until
    the broker expires it; listed past the longest session a member may have, it is alive and the wait fails,
    naming it. A controller that cannot pair members with instances forces out nobody (its note says why).
    """

    template_fields = (*KafkaGroupConditionSensor.template_fields, "settle_seconds", "instances_gone", "controller",
                       "controller_args", "allow_absent", "stop_result")

    def __init__(self, *, settle_seconds: float | str = EMPTY_SETTLE_SECONDS, instances_gone: bool | str = False,
                 controller: str | None = None, controller_args: dict[str, object] | str | None = None,
                 allow_absent: bool | str = False, stop_result: dict[str, object] | str | None = None,
                 **kwargs: Any) -> None:  # Any: passed to BaseSensorOperator
        self.stop_result = stop_result
        self.settle_seconds = settle_seconds
        for flag, name in ((instances_gone, "instances_gone"), (allow_absent, "allow_absent")):
            if not is_template(flag):
                parse_flag(flag, name)
        self.instances_gone = instances_gone
        self.allow_absent = allow_absent
        self.controller, self.controller_args = controller, controller_args
        first = EMPTY_SETTLE_SECONDS if is_template(settle_seconds) else parse_number(settle_seconds,
                                                                                        "settle_seconds")
        absent = False if is_template(allow_absent) else parse_flag(allow_absent, "allow_absent")
        super().__init__(condition=GroupCondition("empty", settle_s=first or 0.0, allow_absent=absent), **kwargs)

    def _apply_templated(self, carried: dict[str, object] | None = None) -> None:
        try:
            gone = parse_flag(self.instances_gone, "instances_gone")
            absent = parse_flag(self.allow_absent, "allow_absent")
        except Kip848Error as exc:
            raise AirflowFailException(str(exc)) from exc
        super()._apply_templated(carried)
        if gone and self.remove_members_after is not None:  # confirmed by the controller: at once, past the floor
            self.remove_members_after = 0.0
        if self.remove_members_after is not None:  # never before a member left behind outlived its session
            self.remove_members_after = max(float(self.remove_members_after), self.condition.removal_s)
        if gone and self.condition.settle_s:  # carried through the triggerer: built below with settle_s 0 already
            self.condition = replace(self.condition, settle_s=0.0, allow_absent=absent)

    def _build_condition(self) -> GroupCondition:
        """The Empty condition with the group's bounds, read from its real configs (the controller's client
        configuration for a classic group's sessions; a controller that cannot say: the clients' defaults)."""
        gone = parse_flag(self.instances_gone, "instances_gone")
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            protocol = group_protocol_of(hook, self.group_id)
            try:
                config = self._ask(lambda named: named.config(protocol) if named is not None else None)
            except (ControllerError, AirflowFailException, Kip848Error) as exc:  # the defaults then, said
                self.log.warning("Group %s: the application's client configuration was not read (%s); the clients' "
                                 "defaults bound the Empty wait", self.group_id, exc)
                config = None
            bounds = empty_bounds(hook, self.group_id, config)
        self.log.info("Group %s: %s", self.group_id, bounds.how)
        self._say_unpairable()
        return GroupCondition("empty", settle_s=0.0 if gone else parse_number(self.settle_seconds,
                                                                               "settle_seconds") or 0.0,
                              allow_absent=parse_flag(self.allow_absent, "allow_absent"), expiry_s=bounds.expiry_s,
                              rejoin_s=bounds.rejoin_s, removal_s=bounds.removal_s)

    def _say_unpairable(self) -> None:
        """Said from the start (not only once a removal is due): members that cannot be paired with instances are
        never forced out, and the wait rests on the broker's session timeout alone (only when a removal is asked
        for at all: ``remove_members_after``)."""
        if self.remove_members_after is None:
            return
        try:
            status = self._platform_status()
        except (ControllerError, AirflowFailException, Kip848Error) as exc:
            self._note(self._notes, f"members not forced out: the platform was not asked ({exc}); they leave when "
                                    "their session times out")
            return
        pairing = members_pairing([], status, earlier=self._before_stop())
        if not pairing.mappable:
            self._note(self._notes, f"members not forced out: {pairing.basis}; they leave when their session times "
                                    "out (a member forced out while its process runs comes back)")

    def _platform_status(self) -> ApplicationStatus | None:
        return self._ask(gone_confirmation)

    def _platform_watch(self) -> PlatformWatch | None:
        """The platform's status when the wait begins is the baseline: an instance running later that was not
        then (or runs as another process) fails the wait."""
        if self.controller in (None, "", "None"):
            return None
        status = self._platform_status()
        return PlatformWatch.of(self.controller, self.controller_args,
                                status.to_dict() if status is not None else None, "appeared")

    def _lost_message(self, found: str) -> str:
        return (f"Group {self.group_id} is not empty for long: an instance of the application runs again, as the "
                f"platform says: {found}. Such an instance joins the group at its next poll or heartbeat. Stop it "
                "(and whatever restarts it), then rerun.")

    def _before_stop(self) -> dict[str, object] | None:
        """The status the stop task read right before it stopped the application (None: not given)."""
        result = self.stop_result
        before = result.get("before") if isinstance(result, dict) else None
        return before if isinstance(before, dict) else None

    def _remove_members(self, context: Context, notes: list[str],
                        wait: WaitState | None = None) -> list[dict[str, object]]:
        """Force out the members left behind whose instance the platform shows stopped or gone (the pairing); the
        others are named and left to the broker. The platform still showing an instance running fails the wait."""
        status = self._platform_status()
        if status is not None and status.gone is False:
            raise AirflowFailException(
                f"Group {self.group_id}: not forcing out its members: the platform still shows {status.summary()} "
                f"({status.source}). Stop those instances, then rerun.")
        with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
            members = group_members(hook, self.group_id)
        pairing = members_pairing(members, status, earlier=self._before_stop())
        since = {mid: float(r["since"]) for mid, r in (wait.listed if wait is not None else {}).items()}
        if not pairing.mappable:
            if members:  # none of them is accounted for by the platform: named in every later summary
                self.condition = replace(self.condition, unaccounted=tuple(
                    {**facts(m), "why": f"members cannot be paired with instances: {pairing.basis}"}
                    for m in members))
                self._note(notes, f"members not forced out: {pairing.basis}; they leave when their session times "
                                  "out (a member forced out while its process runs comes back)")
            return []
        if pairing.unaccounted:
            self.condition = replace(self.condition, unaccounted=tuple(u.to_dict() for u in pairing.unaccounted))
        if members:
            self._note(notes, f"{pairing.describe(since)}; only the members of stopped or gone instances are forced "
                              "out, the others are left to the broker")
        chosen = removable(pairing)
        stopped = sorted({p.instance for p in pairing.paired if not p.running})
        return force_out_members(context, self.task_id, self.kafka_conn_id, self.group_id, self.audit_log,
                                 self.remove_members_after, notes, self.log,
                                 member_ids=[str(m["member_id"]) for m in chosen],
                                 why=f"their instance(s) {', '.join(stopped)} stopped or gone, as the platform says")

    def _note(self, notes: list[str], note: str) -> None:
        self.log.warning("Group %s: %s", self.group_id, note)
        if note not in notes:
            notes.append(note)

    def _who(self, members: list[dict[str, object]] | None) -> str:
        """The members a failure names, as the platform knows them (the instance each one is, or that no instance
        accounts for it), when it can tell."""
        if not members:
            return ""
        try:
            status = self._platform_status()
        except Exception as exc:  # noqa: BLE001 - the failure is reported anyway; this only adds names
            return f" (the controller could not be asked which instances they are: {exc})"
        if status is None or not status.known:
            return ""
        pairing = members_pairing(members, status, earlier=self._before_stop())
        named = [f"{p.member.get('client_id') or p.member.get('member_id')} is {p.instance} ({p.state})"
                 for p in pairing.paired]
        named += [f"{u.member.get('client_id') or u.member.get('member_id')} is no instance of the platform "
                  f"({u.why})" for u in pairing.unaccounted]
        running = status.summary()
        return (f" The platform ({status.source}): " + ("; ".join(named) + "; " if named else "") + running + ".")

    def execute(self, context: Context) -> GroupWaitResult:
        try:
            return super().execute(context)
        except AirflowSensorTimeout as exc:
            raise AirflowSensorTimeout(f"{exc}{self._still_listed()}") from exc

    def execute_complete(self, context: Context, event: GroupConditionEvent | None = None,
                         **kwargs: object) -> GroupWaitResult:
        try:
            return super().execute_complete(context, event, **kwargs)
        except AirflowSensorTimeout as exc:
            raise AirflowSensorTimeout(f"{exc}{self._still_listed()}") from exc

    def _still_listed(self) -> str:
        """The members the group still lists when the wait times out, each named (client id, host, member id)
        and, when the platform can tell, which instance it is or that no instance accounts for it: a timeout
        never ends with a bare count."""
        try:
            with KafkaGroupAdminHook(self.kafka_conn_id) as hook:
                members = group_members(hook, self.group_id)
        except Exception as exc:  # noqa: BLE001 - the timeout is reported anyway; this only adds names
            return f" (the members still listed could not be read: {exc})"
        if not members:
            return ""
        return f" Still listed: {'; '.join(member_name(m) for m in members)}.{self._who(members)}"

    def _on_met(self, context: Context, detail: dict[str, object], wait: WaitState, notes: list[str]) -> str | None:
        status = self._platform_status()
        if status is not None and status.gone is False:
            raise AirflowFailException(
                f"Group {self.group_id} is empty, but the platform shows {status.summary()} ({status.source}): "
                "such an instance rejoins at its next heartbeat or poll. Stop it, then rerun.")
        if status is not None and status.gone is None:
            notes.append(f"controller {self.controller!r} cannot tell whether instances exist ({status.reason}): "
                         "Empty rests on the group alone")
        return None

"""Forcing members out of a group, audited: the ones left behind, and static members whose instance is gone.

A stopped classic application may leave members behind until their sessions
expire (Kafka Streams closes without leaving its group, a crashed instance
never leaves). The Empty waits of the sensors and of the fleet's application
moves force them out after a while with LeaveGroup, as ``kafka-consumer-groups
--delete-members`` would, and record the removal in the audit trail like any
other change to the cluster. They name the members to remove (``member_ids``):
only those the pairing (:mod:`~airflow_provider_kip848.controllers.pairing`)
matched with an instance the platform shows stopped or gone; a member no
instance accounts for is never forced out on the platform's word.

A static member on the consumer protocol whose instance crashed (or was killed)
holds its ``group.instance.id`` until its session expires: its successor is
fenced with ``UNRELEASED_INSTANCE_ID`` until then. The rolling upgrade removes
such members by ``group.instance.id``, and only those whose instance the
platform (the application's controller) confirms is not running: the
coordinator alone cannot tell a dead member from a live one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.audit_trail import Change
from airflow_provider_kip848.controllers import ApplicationStatus, member_instance
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.audit import task_audit
from airflow_provider_kip848.kafka.model import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    MemberProtocol,
    StreamsGroupDescription,
)
from airflow_provider_kip848.kafka.rules.conditions import TaskLog


def removal_intent(group_id: str, targets: Sequence[ConsumerGroupMember], desc: ConsumerGroupDescription, *,
                   key: str = "members") -> Change:
    """The audit intent of a member removal: the members to remove (``key``: each by its ``group.instance.id``,
    else its member id; ``member_ids``: their member ids), the members staying as planned."""
    leaving = {m.member_id for m in targets}
    return ("members", group_id, {key: [m.instance_id or m.member_id for m in targets],
                                  "member_ids": sorted(leaving)},
            {"members": [m.member_id for m in desc.members if m.member_id not in leaving]})


def removed_before(intents: Iterable[Mapping[str, Any]],  # Any: audit records (JSON)
                   group_id: str) -> list[str]:
    """The ids (``group.instance.id`` and member ids) that earlier tries' intents removed from ``group_id``: a
    retry finds them gone, as it should."""
    out: set[str] = set()
    for r in intents:
        before = r.get("before")
        if r.get("kind") == "members" and r.get("target") == group_id and isinstance(before, Mapping):
            for key in ("members", "static_members", "member_ids"):
                out.update(str(i) for i in before.get(key) or [])
    return sorted(out)


def force_out_members(context: Context, task_id: str, kafka_conn_id: str, group_id: str, audit_log: str | None,
                      after_s: float | str | None, notes: list[str],
                      log: TaskLog, *, member_ids: Sequence[str] | None = None,
                      why: str = "") -> list[dict[str, Any]]:  # Any: each removal as audited, JSON
    """Force out the members left behind in a group that should be empty (audited); returns who was removed
    (client id, host ..., and ``at``: when, epoch s). ``member_ids``: only these (the ones whose instance the
    platform shows stopped or gone; an id no longer listed is skipped, an empty list removes nobody); None: every
    member (a caller that decided for all of them). A streams group rejects LeaveGroup: nobody is removed and
    ``notes`` says why."""
    if member_ids is not None and not member_ids:
        return []
    with KafkaGroupAdminHook(kafka_conn_id) as hook:
        desc = hook.describe_group(group_id)
        if isinstance(desc, StreamsGroupDescription):
            timeout_ms = hook.describe_group_config(group_id).value("streams.session.timeout.ms")
            note = (f"streams group: the broker rejects LeaveGroup, so its {len(desc.members)} member(s) were "
                    f"not forced out; they leave when streams.session.timeout.ms ({timeout_ms} ms) expires")
            log.warning("Group %s is a %s", group_id, note)
            notes.append(note)
            return []
        listed = {m.member_id for m in desc.members}
        chosen = None if member_ids is None else sorted(set(member_ids) & listed)
        if chosen is not None and not chosen:  # they left on their own meanwhile
            return []
        selection: dict[str, Any] = {"all_members": True} if chosen is None else {"member_ids": chosen}
        trail = task_audit(context, task_id, hook, audit_log, log=log)
        with trail.guard():  # a change to the cluster: audited like any operator's, the intent first
            removal = hook.remove_members(group_id, **selection, missing_ok=True,
                                          reason=(f"airflow task {task_id}: {why or 'remove_members_after expired'}"
                                                  )[:200],
                                          before_send=lambda targets, d: trail.intend([removal_intent(group_id,
                                                                                                      targets, d)]))
            if removal.removed:
                left = [m["member_id"] for m in hook.describe_group(group_id).to_dict()["members"]]
                trail.applied([("members", group_id, {"members": list(removal.removed)}, {"members": left})])
        if trail.open:
            trail.settle()
        trail.push()
    if removal.failed:
        raise AirflowFailException(f"Could not force {removal.failed} out of group {group_id}.")
    log.warning("Group %s still had members after %s s: removed %s", group_id, after_s,
                ", ".join(removal.removed) or "nobody")
    removed, at = set(removal.removed), time.time()
    return [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host, "instance_id": m.instance_id,
             "protocol": m.protocol.value, "at": at}
            for m in desc.members if (m.instance_id or m.member_id) in removed]


def departed_static_members(members: Sequence[object], status: ApplicationStatus) -> list[str]:
    """The ``group.instance.id`` of every static member on the consumer protocol at a live member epoch whose
    instance the platform confirms is not running: members that will fence their successor. A member that
    matches no instance is never among them (an unknown instance may be a live one). ValueError: the
    platform's status is unknown (nothing is concluded from it)."""
    if not status.known:
        raise ValueError(f"the platform cannot tell which instances run ({status.reason})")
    out = []
    for m in members:
        if not isinstance(m, ConsumerGroupMember) or not m.instance_id or m.protocol is not MemberProtocol.CONSUMER:
            continue
        if m.member_epoch is not None and m.member_epoch < 0:  # -2: left on purpose, its id released
            continue
        instance = member_instance(m.to_dict(), status.instances)
        if instance is not None and not instance.running:
            out.append(m.instance_id)
    return sorted(set(out))


def remove_static_members(context: Context, task_id: str, hook: KafkaGroupAdminHook, group_id: str,
                          instance_ids: Sequence[str], *, why: str, audit_log: str | None,
                          log: TaskLog) -> list[str]:
    """Remove the static members ``instance_ids`` of ``group_id`` (LeaveGroup by ``group.instance.id``) and
    audit the removal; returns the ids removed (one already gone is not an error). Nothing is asked for when
    ``instance_ids`` is empty: an empty selection never widens to "every member"."""
    ids = sorted(set(instance_ids))
    if not ids:
        return []
    trail = task_audit(context, task_id, hook, audit_log, log=log)
    with trail.guard():  # the intent before the LeaveGroup, the outcome read back after it
        removal = hook.remove_members(group_id, instance_ids=ids, missing_ok=True,
                                      reason=f"airflow task {task_id}: {why}"[:200],
                                      before_send=lambda targets, d: trail.intend(
                                          [removal_intent(group_id, targets, d, key="static_members")]))
        if removal.removed:
            left = [m["member_id"] for m in hook.describe_group(group_id).to_dict()["members"]]
            trail.applied([("members", group_id, {"static_members": list(removal.removed)}, {"members": left})])
            log.warning("Removed static member(s) %s of %s: %s", ", ".join(removal.removed), group_id, why)
    if trail.open:
        trail.settle()
    trail.push()
    if removal.failed:
        raise AirflowFailException(f"Could not remove static member(s) {removal.failed} of {group_id}: its "
                                   "successor would be fenced (UNRELEASED_INSTANCE_ID) until its session expires.")
    return sorted(set(removal.removed) | set(removal.not_found))

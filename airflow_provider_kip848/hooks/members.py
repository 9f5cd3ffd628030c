"""Forcing the members left behind out of a group that should be empty, audited.

A stopped classic application may leave members behind until their sessions
expire (Kafka Streams closes without leaving its group, a crashed instance
never leaves). The Empty waits of the sensors and of the fleet's application
moves force them out after a while with LeaveGroup, as ``kafka-consumer-groups
--delete-members`` would, and record the removal in the audit trail like any
other change to the cluster.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.changecontrol.artifacts import artifact_root
from airflow_provider_kip848.changecontrol.audit import audit_location, record_changes
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.model import StreamsGroupDescription


def force_out_members(context: Any, task_id: str, kafka_conn_id: str, group_id: str, audit_log: str | None,
                      after_s: Any, notes: list[str], log: Any) -> list[dict[str, Any]]:
    """Force out the members left behind in a group that should be empty (audited); returns who was removed
    (client id, host ...). A streams group rejects LeaveGroup: nobody is removed and ``notes`` says why."""
    with KafkaGroupAdminHook(kafka_conn_id) as hook:
        desc = hook.describe_group(group_id)
        if isinstance(desc, StreamsGroupDescription):
            timeout_ms = hook.describe_group_config(group_id).value("streams.session.timeout.ms")
            note = (f"streams group: the broker rejects LeaveGroup, so its {len(desc.members)} member(s) were "
                    f"not forced out; they leave when streams.session.timeout.ms ({timeout_ms} ms) expires")
            log.warning("Group %s is a %s", group_id, note)
            notes.append(note)
            return []
        removal = hook.remove_members(group_id, all_members=True, missing_ok=True,
                                      reason=f"airflow task {task_id}: remove_members_after expired")
        if removal.removed:  # a change to the cluster: audited like any operator's
            left = [m["member_id"] for m in hook.describe_group(group_id).to_dict()["members"]]
            record_changes(context, task_id,
                           [("members", group_id, {"members": list(removal.removed)}, {"members": left})],
                           admin=hook, location=audit_location(audit_log, hook.extra("audit_log"),
                                                               artifact_root(None, kafka_conn_id)),
                           log=log)
    if removal.failed:
        raise AirflowFailException(f"Could not force {removal.failed} out of group {group_id}.")
    log.warning("Group %s still had members after %s s: removed %s", group_id, after_s,
                ", ".join(removal.removed) or "nobody")
    removed = set(removal.removed)
    return [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host, "instance_id": m.instance_id}
            for m in desc.members if (m.instance_id or m.member_id) in removed]

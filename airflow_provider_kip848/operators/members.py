"""``RemoveGroupMembersOperator``: force members out of a classic or consumer group (LeaveGroup)."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_provider_kip848.changecontrol.audit import Change
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_group_id_arg


class RemoveGroupMembersOperator(KafkaAdminBaseOperator):
    """Remove all or chosen members, e.g. to empty a stopped application's classic group before an
    offline streams migration instead of waiting a whole session timeout.

    Static members are removed by ``group.instance.id``, dynamic ones by member
    id. Streams groups are refused (the broker rejects LeaveGroup for them).
    Members already gone are not an error on a rerun.

    :param member_ids: member ids to remove; ``instance_ids``: group.instance.ids to remove;
        neither: every member.
    :returns: ``{group_id, group_type, removed, failed, not_found}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "member_ids", "instance_ids")
    supported_backends = ("native",)

    def __init__(self, *, group_id: str, member_ids: list[str] | None = None, instance_ids: list[str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        self.group_id, self.member_ids, self.instance_ids = group_id, member_ids or [], instance_ids or []

    def run(self, context: Any) -> dict:
        everyone = not self.member_ids and not self.instance_ids
        result = self.native_hook.remove_members(self.group_id, member_ids=self.member_ids,
                                                 instance_ids=self.instance_ids, all_members=everyone,
                                                 missing_ok=True, reason=f"airflow task {self.task_id}")
        if result.removed:
            self.log.info("Removed from %s: %s", self.group_id, ", ".join(result.removed))
        else:
            self.log.info("Nobody to remove from %s; left unchanged.", self.group_id)
        if result.not_found:
            self.log.info("Already gone: %s", ", ".join(result.not_found))
        if result.failed:
            raise AirflowException(f"Could not remove {result.failed} from {self.group_id}; rerun to retry.")
        return result.to_dict()

    def audit_changes(self, context: Any, result: dict) -> list[Change]:
        if not result.get("removed"):
            return []
        left = [m["member_id"] for m in self.native_hook.describe_group(self.group_id).to_dict()["members"]]
        return [("members", self.group_id, {"members": result["removed"]}, {"members": left})]

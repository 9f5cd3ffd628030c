"""``KafkaDeleteGroupOperator``: delete an empty group of one type, read back gone, audited."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context

from airflow_provider_kip848.changecontrol.audit_trail import Change
from airflow_provider_kip848.kafka.arguments import parse_flag, require_choice
from airflow_provider_kip848.kafka.errors import GroupNotEmpty, GroupNotFound, KafkaToolError, WrongGroupType
from airflow_provider_kip848.kafka.model import GroupType
from airflow_provider_kip848.kafka.readback import read_back
from airflow_provider_kip848.operators.base import (
    KafkaAdminBaseOperator,
    check_choice_arg,
    check_flag_arg,
    check_group_id_arg,
)

GROUP_TYPES = tuple(t.value for t in GroupType)


class KafkaDeleteGroupOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Delete ``group_id`` if it is a group of ``group_type`` without members; a no-op when it does not exist.

    The group is listed and described first: another type (``WrongGroupType``) or any member
    (``GroupNotEmpty``) refuses the delete before anything is sent; the broker refuses a group that
    gained a member since (``NON_EMPTY_GROUP``, the same error). After the delete the group is read back
    until the cluster no longer lists it. Deleting a group deletes its committed offsets (snapshot them
    first: ``KafkaSnapshotGroupOffsetsOperator``); a streams group's internal topics are not deleted.

    :param group_type: the type the group must have (default ``streams``).
    :param dry_run: stop after the checks.
    :returns: ``{group_id, group_type, state, deleted, applied, noop, dry_run, message}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "dry_run_flag")
    supported_backends = ("native",)
    changes_cluster = True

    def __init__(self, *, group_id: str, group_type: str = "streams", dry_run: bool = False,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        check_choice_arg(group_type, "group_type", GROUP_TYPES)
        check_flag_arg(dry_run, "dry_run")
        self.group_id, self.group_type, self.dry_run_flag = group_id, group_type, dry_run

    def run(self, context: Context) -> dict[str, object]:
        require_choice(self.group_type, "group_type", GROUP_TYPES)
        dry_run = parse_flag(self.dry_run_flag, "dry_run")
        hook = self.native_hook
        result = {"group_id": self.group_id, "group_type": self.group_type, "state": None, "deleted": False,
                  "applied": False, "noop": False, "dry_run": dry_run}
        try:
            listing = hook.group_listing(self.group_id)
        except GroupNotFound:
            message = f"Group {self.group_id!r} does not exist; nothing to delete."
            self.log.info("%s", message)
            return {**result, "noop": True, "message": message}
        if listing.type.value != self.group_type:
            raise WrongGroupType(f"Group {self.group_id!r} is a {listing.type.value} group, not a {self.group_type} "
                                 "group; it was not deleted.")
        desc = hook.describe_group(self.group_id)
        if desc.members:
            raise GroupNotEmpty(f"Group {self.group_id!r} has {len(desc.members)} member(s) (state {desc.state}); "
                                "it was not deleted.")
        result["state"] = desc.state.value
        if dry_run:
            return {**result, "message": f"Group {self.group_id!r} ({desc.state}) can be deleted (dry run)."}
        self.intend(context, [("group", self.group_id, {"type": self.group_type, "state": desc.state.value,
                                                         "members": 0}, {"listed": False})])
        hook.delete_group(self.group_id)
        if read_back(lambda: self._listed(), lambda listed: not listed, hook.get_conn().request_timeout_s):
            raise KafkaToolError(f"Group {self.group_id!r} is still listed after its delete was accepted.")
        message = f"Group {self.group_id!r} deleted (was {desc.state}, no members); the cluster no longer lists it."
        self.log.info("%s", message)
        return {**result, "deleted": True, "applied": True, "message": message}

    def _listed(self) -> bool:
        try:
            self.native_hook.group_listing(self.group_id)
        except GroupNotFound:
            return False
        return True

    def audit_changes(self, context: Context, result: dict[str, object]) -> list[Change]:
        if not result.get("deleted"):
            return []
        # read back: the record states that the cluster no longer lists the group
        after = {"listed": self._listed()}
        return [("group", self.group_id, {"type": result["group_type"], "state": result["state"], "members": 0},
                 after)]

"""``KafkaRemoveGroupMembersOperator``: force members out of a classic or consumer group (LeaveGroup)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowException

from airflow_provider_kip848.changecontrol.audit_trail import Change
from airflow_provider_kip848.controllers import ControllerError
from airflow_provider_kip848.hooks.instances import named_controller, task_error
from airflow_provider_kip848.hooks.members import departed_static_members, removal_intent, removed_before
from airflow_provider_kip848.kafka.arguments import id_list, is_template, parse_flag
from airflow_provider_kip848.kafka.errors import InvalidArgument, Kip848Error
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_flag_arg, check_group_id_arg


class KafkaRemoveGroupMembersOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Remove all or chosen members, e.g. to empty a stopped application's classic group before an
    offline streams migration instead of waiting a whole session timeout.

    Static members are removed by ``group.instance.id``, dynamic ones by member
    id. Streams groups are refused (the broker rejects LeaveGroup for them).
    A named id that is not a member is refused (``MemberNotFound``, naming it and
    the members' ids that look like it; nothing is removed), unless an earlier try
    of this task removed it (its audit intent names it): a retry after the removal
    succeeds, a typo'd ``group.instance.id`` is never taken for a member already gone.

    With ``departed_of`` (a controller's name from the deployment's registry, templated), the members removed
    are the static members on the consumer protocol whose instance that controller confirms is not running
    (crashed or killed, they hold their ``group.instance.id`` until their session expires and fence their
    successor with ``UNRELEASED_INSTANCE_ID``); none such: nothing is removed, and the result says so (never
    "every member"). No controller named (an empty name): nothing is checked or removed, said in the result.

    The members are chosen one way only: ``member_ids`` / ``instance_ids``, ``departed_of``, or
    ``all_members=True``. Every member is only ever that explicit flag: naming none of the three is refused
    when the DAG is parsed, and lists that render empty remove nobody and say so (an empty selection never
    widens to "every member").

    :param member_ids: member ids to remove; ``instance_ids``: group.instance.ids to remove.
    :param all_members: True: every member of the group (templated; parsed strictly).
    :returns: ``{group_id, group_type, removed, failed, not_found, selection}`` (``selection``: whom the task was
        asked to remove, in words; nothing removed on purpose: also ``checked``, why)
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "member_ids", "instance_ids",
                       "all_members", "departed_of", "controller_args")
    supported_backends = ("native",)
    changes_cluster = True

    def __init__(self, *, group_id: str, member_ids: list[str] | None = None, instance_ids: list[str] | None = None,
                 all_members: bool | str = False, departed_of: str | None = None,
                 controller_args: dict[str, object] | str | None = None,
                 **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        check_flag_arg(all_members, "all_members")
        self.group_id, self.member_ids, self.instance_ids = group_id, member_ids, instance_ids
        self.all_members, self.departed_of, self.controller_args = all_members, departed_of, controller_args
        #: departed_of was given (a template may render it empty: no controller named, nothing to look for)
        self._by_departure = departed_of is not None
        #: member_ids / instance_ids were given (a template may render them None or empty: nobody to remove)
        self._by_ids = member_ids is not None or instance_ids is not None
        if not is_template(all_members):
            self._choice(parse_flag(all_members, "all_members"))

    def _choice(self, everyone: bool) -> str:
        """How the members are chosen: ``ids``, ``departed`` or ``all``; InvalidArgument for none or several."""
        ways = [way for way, given in (("ids", self._by_ids),
                                       ("departed", self._by_departure), ("all", everyone)) if given]
        if len(ways) > 1:
            words = {"ids": "member_ids / instance_ids", "departed": "departed_of", "all": "all_members=True"}
            given = " and ".join(words[w] for w in ways)
            raise InvalidArgument(f"{type(self).__name__} (task {self.task_id}) is given {given}: the members to "
                                  "remove are chosen one way only",
                                  remedy="Give member_ids / instance_ids, or departed_of, or all_members=True.")
        if not ways:
            raise InvalidArgument(f"{type(self).__name__} (task {self.task_id}) names no member to remove of group "
                                  f"{self.group_id!r}: an empty selection never means every member",
                                  remedy="Give member_ids / instance_ids, or departed_of (static members whose "
                                         "instance is gone), or all_members=True to remove every member.")
        return ways[0]

    def _departed(self) -> dict | list[str]:
        """The ``group.instance.id`` of the departed static members, or the result of a run with nothing to do."""
        try:
            named = named_controller(self.departed_of, self.controller_args)
        except Kip848Error as exc:
            raise AirflowException(str(exc)) from exc
        if named is None:
            return {"group_id": self.group_id, "removed": [], "failed": [], "not_found": [],
                    "checked": "no controller named: static members whose instance is gone are not looked for"}
        try:
            with named:
                status = named.status()
        except ControllerError as exc:
            raise task_error(exc) from exc
        if not status.known:
            raise AirflowException(f"Controller {named.label} cannot tell which instances run ({status.reason}): no "
                                   "static member is removed on a guess. Rerun when the platform answers.")
        ids = departed_static_members(self.native_hook.describe_group(self.group_id).members, status)
        if not ids:
            return {"group_id": self.group_id, "removed": [], "failed": [], "not_found": [],
                    "checked": f"no static member holds the id of an instance {named.label} shows gone "
                               f"({status.summary()})"}
        self.log.warning("Static member(s) %s of %s belong to instances %s shows gone", ", ".join(ids),
                         self.group_id, named.label)
        return ids

    def run(self, context: Context) -> dict[str, object]:
        way = self._choice(parse_flag(self.all_members, "all_members"))
        member_ids, instance_ids = id_list("member_ids", self.member_ids), id_list("instance_ids", self.instance_ids)
        selection = "every member"
        if way == "departed":
            departed = self._departed()
            if isinstance(departed, dict):
                self.log.info("Nobody removed from %s: %s", self.group_id, departed["checked"])
                return {**departed, "selection": "static members whose instance is gone"}
            member_ids, instance_ids = (), tuple(departed)
        if way != "all":
            if not member_ids and not instance_ids:
                checked = ("member_ids and instance_ids name nobody: nobody was removed (every member is "
                           "all_members=True, never an empty list)")
                self.log.warning("Nobody removed from %s: %s", self.group_id, checked)
                return {"group_id": self.group_id, "removed": [], "failed": {}, "not_found": [],
                        "selection": "nobody", "checked": checked}
            selection = "named: " + ", ".join([*member_ids, *instance_ids])
        self.log.info("Removing from %s: %s", self.group_id, selection)
        # named ids: one missing is a typo unless an earlier try of this task removed it (a retry)
        gone = removed_before(self.audit_trail(context).earlier, self.group_id) if way == "ids" else ()
        result = self.native_hook.remove_members(
            self.group_id, member_ids=member_ids, instance_ids=instance_ids, all_members=way == "all",
            missing_ok=way != "ids", expected_gone=gone, reason=f"airflow task {self.task_id}",
            before_send=lambda targets, desc: self.intend(context, [removal_intent(self.group_id, targets, desc)]))
        if result.removed:
            self.log.info("Removed from %s: %s", self.group_id, ", ".join(result.removed))
        else:
            self.log.info("Nobody to remove from %s; left unchanged.", self.group_id)
        if result.not_found:
            self.log.info("Already gone: %s", ", ".join(result.not_found)
                          + (" (removed by an earlier try of this task)" if way == "ids" else ""))
        if result.failed:
            raise AirflowException(f"Could not remove {result.failed} from {self.group_id}; rerun to retry.")
        return {**result.to_dict(), "selection": selection}

    def audit_changes(self, context: Context, result: dict[str, object]) -> list[Change]:
        if not result.get("removed"):
            return []
        left = [m["member_id"] for m in self.native_hook.describe_group(self.group_id).to_dict()["members"]]
        return [("members", self.group_id, {"members": result["removed"]}, {"members": left})]

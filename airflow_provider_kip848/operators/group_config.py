"""``KafkaGroupConfigOperator``: set or delete group-level configs (``kafka-configs --entity-type groups``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Context

from airflow_provider_kip848.changecontrol.audit_trail import Change
from airflow_provider_kip848.kafka.arguments import is_template, parse_flag
from airflow_provider_kip848.kafka.rules.group_configs import ConfigChangePlan, parse_group_type
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_flag_arg, check_group_id_arg


def planned_changes(plan: ConfigChangePlan) -> list[Change]:
    """The audit intent of a planned config change: one per key set or deleted, before as the cluster showed it."""
    return ([("group_config", f"{plan.group_id}:{key}", plan.before.dynamic.get(key), value)
             for key, value in sorted(plan.to_set.items())]
            + [("group_config", f"{plan.group_id}:{key}", plan.before.dynamic.get(key), None)
               for key in sorted(plan.to_delete)])


class KafkaGroupConfigOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Set and/or delete configs of one group, validated against the broker's bounds before sending.

    Examples: ``streams.num.standby.replicas`` (bounded by
    ``group.streams.max.standby.replicas``), ``consumer.session.timeout.ms``,
    ``streams.session.timeout.ms``. Values already in place send nothing.

    A group the cluster does not list is refused (Kafka would accept configs
    for a mistyped id and leave the real group untouched), naming similar ids;
    ``allow_absent_group=True`` configures a group before its first start.

    A config of another group type than the group's (``streams.*`` on a
    consumer group, anything on a classic group) is refused: Kafka would store
    it and it would never apply. ``for_group_type`` names the type the group is
    becoming (a migration setting a classic group's ``consumer.*`` timeouts
    before its roll) or, for a group that does not exist yet, will have; the
    result carries it (``for_group_type``, ``group_type``) for the approval.

    :returns: ``{group_id, before, after, changed, applied, dry_run, ...}`` with the dynamic
        values read back from the cluster.
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "group_id", "set_configs", "delete_configs",
                       "dry_run_flag", "allow_absent_group", "for_group_type")
    changes_cluster = True

    def __init__(self, *, group_id: str, set_configs: Mapping[str, object] | None = None,
                 delete_configs: list[str] | None = None, dry_run: bool = False, allow_absent_group: bool = False,
                 for_group_type: str | None = None, **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_group_id_arg(group_id)
        check_flag_arg(dry_run, "dry_run")
        check_flag_arg(allow_absent_group, "allow_absent_group")
        if not is_template(for_group_type):
            parse_group_type(for_group_type)
        self.allow_absent_group = allow_absent_group
        self.for_group_type = for_group_type
        self.group_id = group_id
        self.set_configs = set_configs or {}
        self.delete_configs = delete_configs or []
        self.dry_run_flag = dry_run

    def run(self, context: Context) -> dict[str, object]:
        change = self.hook.alter_group_config(self.group_id, self.set_configs, self.delete_configs,
                                              dry_run=parse_flag(self.dry_run_flag, "dry_run"),
                                              allow_absent_group=parse_flag(self.allow_absent_group,
                                                                            "allow_absent_group"),
                                              for_group_type=self.for_group_type,
                                              before_send=lambda plan: self.intend(context, planned_changes(plan)))
        if change.for_group_type and change.for_group_type != change.group_type:
            self.log.info("Group %s (%s now): configs set for the %s group it is becoming (for_group_type).",
                          self.group_id, change.group_type or "not existing yet", change.for_group_type)
        if change.changed:
            for key, (old, new) in change.changed.items():
                self.log.info("Group %s: %s %s -> %s", self.group_id, key, old, new)
        elif change.dry_run:
            self.log.info("dry_run: the change to group %s was validated and not applied.", self.group_id)
        else:
            self.log.info("Group %s: already %s; nothing changed.", self.group_id, change.after or "{}")
        return change.to_dict()

    def audit_changes(self, context: Context, result: dict[str, object]) -> list[Change]:
        # ``after`` is what the cluster reported after the alter: one record per key that changed
        changed = result.get("changed")
        if not result.get("applied") or result.get("dry_run") or not isinstance(changed, dict):
            return []
        return [("group_config", f"{self.group_id}:{key}", old, new) for key, (old, new) in sorted(changed.items())]

"""``KafkaFeatureOperator``: finalize a feature level (``kafka-features upgrade|downgrade|disable``)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context

from airflow_provider_kip848.changecontrol.audit_trail import Change
from airflow_provider_kip848.kafka.arguments import is_template, parse_flag, require_choice
from airflow_provider_kip848.kafka.rules.features import (
    ACTIONS,
    dependent_group_type,
    describe_dependents,
    plan_feature_update,
    refuse_dependents,
    refuse_ignored_arguments,
)
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator, check_choice_arg, check_flag_arg


class KafkaFeatureOperator(KafkaAdminBaseOperator[dict[str, object]]):
    """Upgrade, downgrade or disable one feature, e.g. ``streams.version=1``; a no-op when already there.

    The controller validates the change first (dry run) and only then applies
    it; with ``dry_run=True`` the task stops after the validation. The level is
    read back after the change.

    :param feature: e.g. ``streams.version``, ``group.version``, ``metadata.version``.
    :param level: target level (``metadata.version`` also takes names such as ``4.3-IV0``).
    :param action: ``upgrade`` (default), ``downgrade`` or ``disable``.
    :param unsafe: allow an unsafe downgrade (metadata loss possible; Kafka's ``--unsafe``).
    :param override_dependent_groups: lower ``group.version``/``streams.version``/``share.version``
        although groups of that type exist (their members fail): an intended outage, which belongs
        behind an approval; the groups are named in the audit record.
    :param allow_empty_dependent_groups: lower it although *empty* groups of that type exist (they stay,
        unusable until the feature is raised again; named in the audit record); a group with members, or
        whose members cannot be counted, still refuses the change. What the kafka_disable_group_feature
        DAG applies after its approval.
    :returns: ``{feature, action, from_level, to_level, noop, applied, dry_run, message, validation}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "feature", "level", "action", "dry_run_flag")
    changes_cluster = True

    def __init__(self, *, feature: str, level: int | str | None = None, action: str = "upgrade",
                 dry_run: bool = False, unsafe: bool = False, override_dependent_groups: bool = False,
                 allow_empty_dependent_groups: bool = False, **kwargs: Any) -> None:  # Any: passed to BaseOperator
        super().__init__(**kwargs)
        check_choice_arg(action, "action", ACTIONS)
        check_flag_arg(dry_run, "dry_run")
        self.feature, self.level, self.action, self.dry_run_flag = feature, level, action, dry_run
        self.unsafe = parse_flag(unsafe, "unsafe")
        self.override_dependent_groups = parse_flag(override_dependent_groups, "override_dependent_groups")
        self.allow_empty_dependent_groups = parse_flag(allow_empty_dependent_groups, "allow_empty_dependent_groups")
        if not any(is_template(v) for v in (feature, level, action)):  # else checked once rendered
            self._refuse_ignored()

    def _refuse_ignored(self) -> None:
        refuse_ignored_arguments(self.feature, self.action, self.level, unsafe=self.unsafe,
                                 override_dependent_groups=self.override_dependent_groups,
                                 allow_empty_dependent_groups=self.allow_empty_dependent_groups)

    def run(self, context: Context) -> dict[str, object]:
        require_choice(self.action, "action", ACTIONS)
        self._refuse_ignored()
        dry_run = parse_flag(self.dry_run_flag, "dry_run")
        override = self.override_dependent_groups
        features = self.hook.describe_features()
        planned = plan_feature_update(features, self.feature, self.level, self.action)
        gtype = dependent_group_type(planned)
        dependents = self.hook.get_conn().dependent_groups(gtype) if gtype is not None else {}
        if dependents and not override and self.allow_empty_dependent_groups:
            refusal = refuse_dependents(planned, dependents, allow_empty=True)
            if refusal is not None:
                raise refusal
            self.log.warning("Lowering %s leaves these empty groups in place, unusable until it is raised again: %s",
                             self.feature, describe_dependents(dependents))
            override = True  # every one of them is empty (read just now)
        elif dependents and override:
            self.log.warning("override_dependent_groups=True: lowering %s although these groups depend on it: %s",
                             self.feature, describe_dependents(dependents))
        validation = self.hook.update_feature(self.feature, self.level, action=self.action, dry_run=True,
                                              unsafe=self.unsafe, override_dependent_groups=override)
        if validation.noop:
            self.log.info("%s Left unchanged.", validation.message)
            return {**validation.to_dict(), "validation": validation.message}
        self.log.info("Validated by the controller: %s", validation.message)
        if dry_run:
            self.log.info("dry_run: stopping before the change.")
            return {**validation.to_dict(), "validation": validation.message, "dependent_groups": dependents}
        # the override, and whom it affects, is part of the intent
        notes: list[Change] = [("feature_override_dependent_groups", self.feature, None, dependents)] if dependents \
            else []
        result = self.hook.update_feature(
            self.feature, self.level, action=self.action, unsafe=self.unsafe, override_dependent_groups=override,
            before_send=lambda plan: self.intend(context, [("feature", self.feature, plan.from_level, plan.to_level),
                                                           *notes]))
        self.log.info("Changed: %s (was %s).", result.message, result.from_level)
        return {**result.to_dict(), "validation": validation.message, "dependent_groups": dependents}

    def audit_changes(self, context: Context, result: dict[str, object]) -> list[Change]:
        if not result.get("applied"):
            return []
        # read back, not the requested level: the audit states what the controller finalized
        now = self.native_hook.describe_features().level(self.feature)
        changes: list[Change] = [("feature", self.feature, result["from_level"], now)]
        if result.get("dependent_groups"):  # the override, and whom it affected, is part of the record
            changes.append(("feature_override_dependent_groups", self.feature, None, result["dependent_groups"]))
        return changes

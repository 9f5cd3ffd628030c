"""``KafkaFeatureOperator``: finalize a feature level (``kafka-features upgrade|downgrade|disable``)."""

from __future__ import annotations

from typing import Any

from airflow_provider_kip848.changecontrol.audit import Change
from airflow_provider_kip848.kafka.arguments import parse_flag
from airflow_provider_kip848.operators.base import KafkaAdminBaseOperator


class KafkaFeatureOperator(KafkaAdminBaseOperator):
    """Upgrade, downgrade or disable one feature, e.g. ``streams.version=1``; a no-op when already there.

    The controller validates the change first (dry run) and only then applies
    it; with ``dry_run=True`` the task stops after the validation. The level is
    read back after the change.

    :param feature: e.g. ``streams.version``, ``group.version``, ``metadata.version``.
    :param level: target level (``metadata.version`` also takes names such as ``4.3-IV0``).
    :param action: ``upgrade`` (default), ``downgrade`` or ``disable``.
    :param unsafe: allow an unsafe downgrade (metadata loss possible; Kafka's ``--unsafe``).
    :returns: ``{feature, action, from_level, to_level, noop, applied, dry_run, message, validation}``
    """

    template_fields = (*KafkaAdminBaseOperator.template_fields, "feature", "level", "action", "dry_run_flag")

    def __init__(self, *, feature: str, level: int | str | None = None, action: str = "upgrade",
                 dry_run: bool = False, unsafe: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.feature, self.level, self.action, self.dry_run_flag, self.unsafe = feature, level, action, dry_run, unsafe

    def run(self, context: Any) -> dict:
        validation = self.hook.update_feature(self.feature, self.level, action=self.action, dry_run=True,
                                              unsafe=self.unsafe)
        if validation.noop:
            self.log.info("%s Left unchanged.", validation.message)
            return {**validation.to_dict(), "validation": validation.message}
        self.log.info("Validated by the controller: %s", validation.message)
        if parse_flag(self.dry_run_flag, "dry_run"):
            self.log.info("dry_run: stopping before the change.")
            return {**validation.to_dict(), "validation": validation.message}
        result = self.hook.update_feature(self.feature, self.level, action=self.action, unsafe=self.unsafe)
        self.log.info("Changed: %s (was %s).", result.message, result.from_level)
        return {**result.to_dict(), "validation": validation.message}

    def audit_changes(self, context: Any, result: dict) -> list[Change]:
        if not result.get("applied"):
            return []
        # read back, not the requested level: the audit states what the controller finalized
        now = self.native_hook.describe_features().level(self.feature)
        return [("feature", self.feature, result["from_level"], now)]

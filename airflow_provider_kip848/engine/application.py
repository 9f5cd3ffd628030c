"""The application's side of a step: the last look before a start.

Shared by the single-group start task
(:class:`~airflow_provider_kip848.operators.application.KafkaApplicationStartOperator`) and the fleet's
application moves (:mod:`airflow_provider_kip848.engine.move`).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.controllers import GROUP_PROTOCOLS
from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.kafka.arguments import topic_list
from airflow_provider_kip848.kafka.errors import GroupNotEmpty, GroupNotFound
from airflow_provider_kip848.kafka.rules.offsets import require_empty


def last_look(hook: KafkaGroupAdminHook, group_ids: Sequence[str], protocol: str,
              source_topics: str | Sequence[str] | None = None) -> None:
    """Before an application starts on ``protocol``: each of its groups is still Empty (or gone) and every
    declared source topic exists; otherwise :class:`AirflowFailException` says what is in the way."""
    if protocol not in GROUP_PROTOCOLS:
        raise AirflowFailException(f"group_protocol must be classic, consumer or streams, not {protocol!r}")
    topics = topic_list(source_topics, "source_topics") or []
    for group_id in group_ids:
        try:
            require_empty(hook.describe_group(group_id))
        except GroupNotFound:
            pass
        except GroupNotEmpty as exc:
            raise AirflowFailException(f"Not starting the application on {protocol}: {exc}") from exc
    counts = hook.get_conn().topic_partition_counts(topics) if topics else {}
    missing = sorted(t for t, n in counts.items() if n is None)
    if missing:
        raise AirflowFailException(
            f"Not starting the application on {protocol}: source topic(s) {', '.join(missing)} do not exist. "
            "Create them (or correct source_topics), then rerun.")


__all__ = ["last_look"]

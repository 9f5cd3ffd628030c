"""``KafkaGroupAdminHook``: the native backend (confluent-kafka + kafka-python) behind a ``kafka_admin`` connection."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from airflow_provider_kip848.hooks.base import KafkaAdminBaseHook
from airflow_provider_kip848.kafka import native
from airflow_provider_kip848.kafka.api import BeforeRemoval
from airflow_provider_kip848.kafka.errors import AuthorizationFailed, GroupNotFound
from airflow_provider_kip848.kafka.group_records import GroupDowntime, commit_rate, commit_stalls, group_history
from airflow_provider_kip848.kafka.inventory import GroupInventory
from airflow_provider_kip848.kafka.model import BrokerVersion, ClusterInfo, MemberRemoval, TopicPartition
from airflow_provider_kip848.kafka.model.groups import GroupDescription
from airflow_provider_kip848.kafka.native.group_log import (
    group_records,
    logged_records,
    record_time,
    upgrade_window_facts,
)
from airflow_provider_kip848.kafka.rules.group_load import LoadVerdict, judge_group_load
from airflow_provider_kip848.kafka.rules.upgrade_window import UpgradeWindowFacts

if TYPE_CHECKING:  # the backend loads at the first action (kafka/native/__init__.py)
    from airflow_provider_kip848.kafka.native.admin import KafkaAdmin


class KafkaGroupAdminHook(KafkaAdminBaseHook):
    """Consumer-group, streams-group, feature and config administration of one Kafka cluster, natively.

    Every action of :class:`~airflow_provider_kip848.kafka.native.KafkaAdmin`
    is a method here, with the same arguments and typed results (all have
    ``to_dict()`` for XCom). The connection form (bootstrap servers, security,
    CLI settings) is declared as ``conn-fields`` in ``get_provider_info``.

    :param kafka_conn_id: id of a ``kafka_admin`` connection.
    """

    hook_name = "Kafka group admin (KIP-848 / KIP-1071)"

    def _make_backend(self) -> KafkaAdmin:
        return native.KafkaAdmin(self.settings)

    def get_conn(self) -> KafkaAdmin:
        """The native backend (kept for the hook's lifetime; :meth:`close` releases it)."""
        backend = super().get_conn()
        if not isinstance(backend, native.KafkaAdmin):  # only a subclass overriding _make_backend could do this
            raise TypeError(f"{type(self).__name__} needs the native backend, got {type(backend).__name__}")
        return backend

    # -- actions only the native backend has (kafka.api.ClusterAdmin) -------------------------

    def describe_cluster(self) -> ClusterInfo:
        """Cluster id, controller and brokers."""
        return self.get_conn().describe_cluster()

    def broker_versions(self) -> list[BrokerVersion]:
        """Each broker's release line, from the ``metadata.version`` range it supports."""
        return self.get_conn().broker_versions()

    def remove_members(self, group_id: str, *, member_ids: Iterable[str] = (), instance_ids: Iterable[str] = (),
                       all_members: bool = False, missing_ok: bool = False, expected_gone: Iterable[str] = (),
                       reason: str = "removed by airflow-provider-kip848",
                       before_send: BeforeRemoval | None = None) -> MemberRemoval:
        """Force members out of a classic or consumer group with LeaveGroup (refused for streams groups); an id
        that is not a member is refused unless ``missing_ok`` or in ``expected_gone`` (``before_send``: the audit
        trail's intent, right before LeaveGroup is sent)."""
        return self.get_conn().remove_members(group_id, member_ids=member_ids, instance_ids=instance_ids,
                                              all_members=all_members, missing_ok=missing_ok,
                                              expected_gone=expected_gone, reason=reason, before_send=before_send)

    def inventory(self, group_ids: Iterable[str] | None = None, *, timeout_s: float | None = None,
                  declared_broker_version: str | None = None) -> GroupInventory:
        """Every group of the cluster (or only ``group_ids``) with type, state, members, assignor, committed
        offsets, lag and the readiness of each migration, from batched requests (``to_dict()`` for XCom)."""
        return self.get_conn().inventory(group_ids, timeout_s=timeout_s,
                                         declared_broker_version=declared_broker_version)

    def classic_assignment_user_data(self, group_id: str) -> dict[str, bytes]:
        """Member id -> the ``userData`` of its classic assignment (non-empty: a custom client assignor)."""
        return self.get_conn().classic_assignment_user_data(group_id)

    def log_offsets(self, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Log start and end offsets of the given partitions."""
        return self.get_conn().log_offsets(tps)

    def topic_offsets(self, topics: Iterable[str]) -> dict[TopicPartition, tuple[int, int]]:
        """Log start and end offsets of every partition of ``topics``."""
        return self.get_conn().topic_offsets(topics)

    def output_range(self, topic: str | None) -> dict[str, dict[str, int]]:
        """``{"topic:partition": {log_start, log_end}}`` of an application's output topic, the fixed range a
        validation's continuity check reads between two captures ({} without a topic)."""
        if not topic:
            return {}
        return {str(tp): {"log_start": a, "log_end": b} for tp, (a, b) in self.topic_offsets([topic]).items()}

    def upgrade_window_facts(self, group_id: str) -> UpgradeWindowFacts:
        """What :func:`~airflow_provider_kip848.kafka.rules.upgrade_window.upgrade_window` judges before the first
        member of ``group_id`` switches protocol: its state and members, and for a Stable classic group its
        generation from the coordinator's own records (READ on ``__consumer_offsets``)."""
        def describe(g: str) -> GroupDescription | None:
            try:
                return self.describe_group(g)
            except GroupNotFound:
                return None

        return upgrade_window_facts(self.settings, describe, group_id)

    def group_load(self, group_id: str) -> LoadVerdict:
        """Whether ``group_id`` still loads when a coordinator replays its ``__consumer_offsets`` partition
        (:func:`~airflow_provider_kip848.kafka.rules.group_load.judge_group_load`: loads, exposed to a load
        racing the log cleaner, or unloadable), from every record of the group left in that partition (READ on
        ``__consumer_offsets``)."""
        partition, records = logged_records(self.settings, group_id)
        return judge_group_load(group_id, partition, records)

    def group_downtime(self, group_id: str, since: float, *, members_before: int | None = None,
                       state_before: str | None = None, target: str | None = None) -> GroupDowntime:
        """The group's rebalances, states, first member leaving, commit stalls and commit rate since ``since``
        (epoch s), read from its records in ``__consumer_offsets``; a stall's start is the held-back record's
        own time where this connection may read the input topic (else the previous commit's: an upper bound,
        noted). ``members_before``/``state_before``: the group when the run began; ``target``: the group type
        it moves to (see ``group_history``)."""
        records = group_records(self.settings, group_id, since=since)
        unreadable: set[str] = set()
        notes: list[str] = []

        def arrival(topic: str, partition: int, offset: int) -> float | None:
            if topic in unreadable:
                return None
            try:
                return record_time(self.settings, topic, partition, offset)
            except AuthorizationFailed:
                unreadable.add(topic)
                notes.append(f"no READ on topic {topic}: its stalls start at the previous commit (upper bounds)")
                return None

        committed = sorted({TopicPartition(r.topic, r.partition) for r in records
                            if r.topic is not None and r.partition is not None})
        ends = self.get_conn().log_offsets(committed)[1] if committed else {}
        stalls = commit_stalls(records, arrival, log_end={(tp.topic, tp.partition): e for tp, e in ends.items()},
                               until=time.time())
        history = group_history(records, members_before=members_before, state_before=state_before, target=target)
        return GroupDowntime(since, history, stalls, tuple(notes), tuple(commit_rate(records)))

"""What both admin hooks share: the ``kafka_admin`` connection and the typed actions of :class:`GroupAdmin`.

Each action method below is the backend's action of the same name
(:class:`~airflow_provider_kip848.kafka.api.GroupAdmin`), with the same
arguments and typed results; the hook only turns the Airflow connection into
:class:`ClientSettings` and keeps one backend object for its lifetime.
:meth:`KafkaAdminBaseHook.group_metrics` is the one read that goes around the
backends: the brokers' own metrics, from the exporters the connection's
``metrics_url`` names (:mod:`~airflow_provider_kip848.kafka.metrics`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from typing import Any, Self

from airflow.sdk import BaseHook, Connection
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_kip848.hooks.connection import (
    CONN_TYPE,
    DEFAULT_CONN_ID,
    extra_field,
    metrics_urls_from_connection,
    settings_from_connection,
)
from airflow_provider_kip848.kafka.api import GroupAdmin
from airflow_provider_kip848.kafka.errors import ConnectionNotFound, Kip848Error
from airflow_provider_kip848.kafka.metrics import DEFAULT_TIMEOUT, GroupMetricsSample, read_group_metrics
from airflow_provider_kip848.kafka.model import (
    ClusterFeatures,
    ConsumerGroupDescription,
    FeatureUpdate,
    GroupConfig,
    GroupConfigChange,
    GroupCoordinatorConfig,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    StreamsGroupDescription,
    TopicPartition,
)
from airflow_provider_kip848.kafka.rules.group_configs import ConfigChangePlan
from airflow_provider_kip848.kafka.settings import ClientSettings


class KafkaAdminBaseHook(BaseHook):
    """Base of the provider's hooks: a ``kafka_admin`` connection and one backend object per hook."""

    conn_name_attr = "kafka_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE

    def __init__(self, kafka_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:  # Any: passed to BaseHook
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self._backend: GroupAdmin | None = None

    @cached_property
    def connection(self) -> Connection:
        """The Airflow connection; a missing one is :class:`ConnectionNotFound` (not retried: a typo stays one).

        A run names the connection (``kafka_conn_id``): only a ``kafka_admin`` one is taken. Another type (an SSH
        host, a database, ``aws_default``) is refused before anything connects to its host or takes its extras as
        the cluster's settings, and its host is not shown."""
        try:
            conn = self.get_connection(self.kafka_conn_id)
        except AirflowNotFoundException as exc:
            raise ConnectionNotFound(f"There is no Airflow connection {self.kafka_conn_id!r}.") from exc
        if conn.conn_type != CONN_TYPE:
            raise ConnectionNotFound(f"The Airflow connection {self.kafka_conn_id!r} is of type {conn.conn_type!r}, "
                                     f"not {CONN_TYPE}: it is not a Kafka cluster's connection.")
        return conn

    @cached_property
    def settings(self) -> ClientSettings:
        return settings_from_connection(self.connection)

    def extra(self, name: str, default: Any = None) -> Any:  # Any: a connection extra is any JSON value
        """A field of the connection's extra (plain or with the legacy ``extra__kafka_admin__`` prefix)."""
        return extra_field(self.connection.extra_dejson or {}, name, default)

    @cached_property
    def metrics_urls(self) -> tuple[str, ...]:
        """The brokers' metrics endpoints the connection names (its ``metrics_url`` extra); empty: none."""
        return metrics_urls_from_connection(self.connection)

    def _make_backend(self) -> GroupAdmin:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_conn(self) -> GroupAdmin:
        """The backend object (kept for the hook's lifetime; :meth:`close` releases it)."""
        if self._backend is None:
            self._backend = self._make_backend()
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def test_connection(self) -> tuple[bool, str]:
        try:
            features = self.describe_features()
        except Kip848Error as exc:
            return False, str(exc)
        except Exception as exc:  # noqa: BLE001 - the UI's Test button must show any failure, not raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, (
            f"Connected to {self.settings.bootstrap_servers}: group.version={features.level('group.version')}, "
            f"streams.version={features.level('streams.version')}."
        )

    # -- the brokers' own metrics (read over HTTP from their exporters, not through a backend) -----------

    def group_metrics(self, *, timeout: float = DEFAULT_TIMEOUT) -> GroupMetricsSample | None:
        """The group coordinator's figures of the whole cluster, from the exporters in ``metrics_url``.

        Group counts by protocol (``groups_by_protocol``), consumer, streams and
        classic groups by state, and the rebalance rate and count of each
        protocol, summed over the brokers, with each broker's own figures in
        ``nodes`` (see :class:`~airflow_provider_kip848.kafka.metrics.GroupMetricsSample`).
        A value the brokers do not expose is None, never 0.

        Returns None when the connection names no metrics URL. Raises
        :class:`~airflow_provider_kip848.kafka.errors.MetricsUnavailable`
        (retriable) when an endpoint does not answer within ``timeout`` seconds,
        :class:`~airflow_provider_kip848.kafka.errors.MetricsUnreadable` when it
        answers with something else than Prometheus text, and
        :class:`~airflow_provider_kip848.kafka.errors.InvalidClientSettings` for a
        ``metrics_url`` that is not a list of http(s) URLs.
        """
        if not self.metrics_urls:
            return None
        return read_group_metrics(self.metrics_urls, timeout=timeout)

    # -- the actions both backends implement (kafka.api.GroupAdmin) -------------------------

    def describe_features(self) -> ClusterFeatures:
        """Supported ranges and finalized levels of every feature (``kafka-features describe``)."""
        return self.get_conn().describe_features()

    def update_feature(self, feature: str, level: int | str | None = None, *, action: str = "upgrade",
                       dry_run: bool = False, unsafe: bool = False,
                       override_dependent_groups: bool = False,
                       before_send: Callable[[FeatureUpdate], None] | None = None) -> FeatureUpdate:
        """Upgrade, downgrade or disable one feature; a no-op when already at the level (see GroupAdmin;
        ``before_send``: the audit trail's intent, right before the change is sent)."""
        return self.get_conn().update_feature(feature, level, action=action, dry_run=dry_run, unsafe=unsafe,
                                              override_dependent_groups=override_dependent_groups,
                                              before_send=before_send)

    def group_coordinator_config(self, broker_id: int | None = None) -> GroupCoordinatorConfig:
        """The broker's ``group.*`` configs (protocols, migration policy, bounds)."""
        return self.get_conn().group_coordinator_config(broker_id)

    def describe_group_config(self, group_id: str) -> GroupConfig:
        """Every group config of ``group_id`` with its effective value and source."""
        return self.get_conn().describe_group_config(group_id)

    def alter_group_config(self, group_id: str, set_configs: Mapping[str, object] | None = None,
                           delete_configs: Iterable[str] = (), *, dry_run: bool = False,
                           allow_absent_group: bool = False,
                           for_group_type: str | None = None,
                           before_send: Callable[[ConfigChangePlan], None] | None = None) -> GroupConfigChange:
        """Set and/or delete group-level configs, validated against the broker's bounds and the group's type
        (``for_group_type``: the type it is becoming, or will have when it does not exist yet) first
        (``before_send``: the audit trail's intent, right before the change is sent)."""
        return self.get_conn().alter_group_config(group_id, set_configs, delete_configs, dry_run=dry_run,
                                                  allow_absent_group=allow_absent_group,
                                                  for_group_type=for_group_type, before_send=before_send)

    def list_groups(self) -> list[GroupListing]:
        """Every group with its type and state, streams and share groups included."""
        return self.get_conn().list_groups()

    def group_listing(self, group_id: str) -> GroupListing:
        """The listing of one group, or ``GroupNotFound``."""
        return self.get_conn().group_listing(group_id)

    def describe_group(self, group_id: str) -> GroupDescription:
        """Describe a group of any type (classic, consumer, streams)."""
        return self.get_conn().describe_group(group_id)

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """A classic or consumer group with members, assignments and (for consumer groups) epochs."""
        return self.get_conn().describe_consumer_group(group_id)

    def describe_streams_group(self, group_id: str) -> StreamsGroupDescription:
        """A streams group with members, task assignments and epochs."""
        return self.get_conn().describe_streams_group(group_id)

    def delete_group(self, group_id: str) -> None:
        """Delete an empty group (its committed offsets go with it)."""
        self.get_conn().delete_group(group_id)

    def group_offsets(self, group_id: str) -> GroupOffsets:
        """Committed offsets of a group with each partition's log start and end."""
        return self.get_conn().group_offsets(group_id)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], *, dry_run: bool = False,
                            before_send: Callable[[Mapping[TopicPartition, int]], None] | None = None,
                            ) -> GroupOffsets:
        """Set committed offsets; only on an empty group, only inside the log (``before_send``: the audit
        trail's intent, right before they are committed)."""
        return self.get_conn().alter_group_offsets(group_id, offsets, dry_run=dry_run, before_send=before_send)

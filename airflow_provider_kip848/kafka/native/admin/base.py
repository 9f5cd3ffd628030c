"""What every family of :class:`~.KafkaAdmin` stands on: the settings, the transport and the reads several families
share (the cluster's metadata, one resource's configs).

The families (:mod:`.groups`, :mod:`.offsets`, :mod:`.configs`, :mod:`.features`, :mod:`.topics`,
:mod:`.inventory`) are mixins of :class:`NativeBase`; a call from one family into another goes through a method
:class:`~...api.ClusterAdmin` declares (or one declared here), so each module reads alone.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from confluent_kafka.admin import ConfigResource

from airflow_provider_kip848.kafka.api import ClusterAdmin
from airflow_provider_kip848.kafka.model import TopicPartition
from airflow_provider_kip848.kafka.native.transport import Transport
from airflow_provider_kip848.kafka.settings import ClientSettings


class NativeBase(ClusterAdmin):
    """The native backend's state: one :class:`.Transport` (clients created lazily, closed by :meth:`close`)."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._transport = Transport(settings)

    def close(self) -> None:
        self._transport.close()

    def __del__(self) -> None:  # a forgotten close() must not leave kafka-python's network thread behind
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def _t(self) -> Transport:
        return self._transport

    def _metadata(self) -> Any:
        return self._t.retrying(lambda: self._t.confluent.list_topics(timeout=self._t.timeout_s))

    def _describe_configs(self, resource: ConfigResource) -> Any:
        timeout = self._t.timeout_s
        return self._t.retrying(
            lambda: self._t.confluent.describe_configs([resource], request_timeout=timeout)[resource]
            .result(timeout + 5))

    @abstractmethod
    def streams_group_source_partitions(self, group_id: str) -> tuple[TopicPartition, ...]:
        """Input partitions of a streams group's active tasks (:mod:`.groups`; the offsets read them)."""

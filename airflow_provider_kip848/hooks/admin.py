"""``KafkaGroupAdminHook``: the native admin backend behind an Airflow connection."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_kip848.hooks.connection import CONN_TYPE, DEFAULT_CONN_ID, settings_from_connection
from airflow_provider_kip848.kafka.admin import KafkaAdmin
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.model import ClusterFeatures, ClusterInfo, GroupListing
from airflow_provider_kip848.kafka.settings import ClientSettings


class KafkaGroupAdminHook(BaseHook):
    """Consumer-group, streams-group, feature and config administration of one Kafka cluster.

    The connection form (bootstrap servers, security, CLI settings) is declared
    as ``conn-fields`` in ``get_provider_info`` (Airflow >= 3.2), not by the
    deprecated ``get_ui_field_behaviour`` hook methods.

    :param kafka_conn_id: id of a ``kafka_admin`` connection.
    """

    conn_name_attr = "kafka_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "Kafka group admin (KIP-848 / KIP-1071)"

    def __init__(self, kafka_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id

    @cached_property
    def settings(self) -> ClientSettings:
        return settings_from_connection(self.get_connection(self.kafka_conn_id))

    def get_conn(self) -> KafkaAdmin:
        """A new :class:`KafkaAdmin`; close it (or use it as a context manager) when done."""
        return KafkaAdmin(self.settings)

    def describe_cluster(self) -> ClusterInfo:
        with self.get_conn() as admin:
            return admin.describe_cluster()

    def describe_features(self) -> ClusterFeatures:
        with self.get_conn() as admin:
            return admin.describe_features()

    def list_groups(self) -> list[GroupListing]:
        with self.get_conn() as admin:
            return admin.list_groups()

    def test_connection(self) -> tuple[bool, str]:
        try:
            info = self.describe_cluster()
        except Kip848Error as exc:
            return False, str(exc)
        except Exception as exc:  # the UI's Test button must show any failure, not raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"Connected to cluster {info.cluster_id} ({len(info.brokers)} broker(s))."

"""``KafkaGroupAdminHook``: the native backend (confluent-kafka + kafka-python) behind a ``kafka_admin`` connection."""

from __future__ import annotations

from airflow_provider_kip848.hooks.base import SHARED_ACTIONS, KafkaAdminBaseHook, delegate
from airflow_provider_kip848.kafka.admin import KafkaAdmin


class KafkaGroupAdminHook(KafkaAdminBaseHook):
    """Consumer-group, streams-group, feature and config administration of one Kafka cluster, natively.

    Every action of :class:`~airflow_provider_kip848.kafka.admin.KafkaAdmin`
    is a method here, with the same arguments and typed results (all have
    ``to_dict()`` for XCom). The connection form (bootstrap servers, security,
    CLI settings) is declared as ``conn-fields`` in ``get_provider_info``.

    :param kafka_conn_id: id of a ``kafka_admin`` connection.
    """

    hook_name = "Kafka group admin (KIP-848 / KIP-1071)"

    def _make_backend(self) -> KafkaAdmin:
        return KafkaAdmin(self.settings)


for _name in (*SHARED_ACTIONS, "describe_cluster", "broker_versions", "remove_members",
              "classic_assignment_user_data", "log_offsets", "topic_offsets"):
    setattr(KafkaGroupAdminHook, _name, delegate(_name, KafkaAdmin))
del _name

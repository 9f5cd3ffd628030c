"""``KafkaCliHook``: the same actions through Kafka's own CLI tools, for teams whose runbooks prescribe them."""

from __future__ import annotations

from airflow_provider_kip848.hooks.base import SHARED_ACTIONS, KafkaAdminBaseHook, delegate
from airflow_provider_kip848.hooks.connection import extra_field
from airflow_provider_kip848.kafka.cli import KafkaCli, KafkaTools


class KafkaCliHook(KafkaAdminBaseHook):
    """Group, feature and config administration through ``kafka-features``, ``kafka-configs``,
    ``kafka-consumer-groups`` and ``kafka-streams-groups``.

    The tools come from the connection's ``kafka_home`` (an unpacked Kafka
    release) or, when empty, from the provider's Maven-resolved jars of
    ``kafka_version``. Security settings reach the tools only through a
    private ``--command-config`` file that is deleted after each call.

    :param kafka_conn_id: id of a ``kafka_admin`` connection.
    :param timeout: seconds before a tool run is killed (default: the
        connection's ``cli_timeout``, else 120).
    """

    hook_name = "Kafka admin via the Kafka CLI tools"

    def __init__(self, kafka_conn_id: str = KafkaAdminBaseHook.default_conn_name, timeout: float | None = None, **kwargs):
        super().__init__(kafka_conn_id, **kwargs)
        self._timeout = timeout

    def _make_backend(self) -> KafkaCli:
        extra = self.connection.extra_dejson or {}
        tools = KafkaTools(kafka_home=extra_field(extra, "kafka_home"), version=extra_field(extra, "kafka_version"))
        timeout = self._timeout or float(extra_field(extra, "cli_timeout", 120))
        return KafkaCli(self.settings, tools, timeout)


for _name in SHARED_ACTIONS:
    setattr(KafkaCliHook, _name, delegate(_name, KafkaCli))
del _name

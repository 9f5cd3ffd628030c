"""``KafkaCliHook``: the same actions through Kafka's own CLI tools, for teams whose runbooks prescribe them."""

from __future__ import annotations

from typing import Any

from airflow_provider_kip848.hooks.base import KafkaAdminBaseHook
from airflow_provider_kip848.hooks.connection import cli_timeout_from_extra
from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.tools import KafkaTools
from airflow_provider_kip848.kafka.errors import InvalidClientSettings
from airflow_provider_kip848.kafka.settings import local_path


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

    def __init__(self, kafka_conn_id: str = KafkaAdminBaseHook.default_conn_name, timeout: float | None = None,
                 **kwargs: Any) -> None:  # Any: passed to BaseHook
        super().__init__(kafka_conn_id, **kwargs)
        self._timeout = timeout

    def _make_backend(self) -> KafkaCli:
        home = self.extra("kafka_home")
        try:
            home = local_path(home, "kafka_home") if home is not None else None
        except InvalidClientSettings as exc:
            raise InvalidClientSettings(f"Connection {self.kafka_conn_id!r}: {exc.what}", remedy=exc.remedy) from exc
        tools = KafkaTools(kafka_home=home, version=self.extra("kafka_version"))
        timeout = self._timeout or cli_timeout_from_extra({"cli_timeout": self.extra("cli_timeout")},
                                                          self.kafka_conn_id)
        return KafkaCli(self.settings, tools, timeout)

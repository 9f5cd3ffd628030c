"""What every operator of this provider shares: a connection, a backend choice, and error handling.

Bad input and refusals (a group that does not exist, a config out of the
broker's bounds, a non-empty group ...) fail the task at once with
``AirflowFailException``: retrying would only repeat them. An unreachable or
slow cluster raises the provider's retriable error, so the task's ``retries``
apply, which is safe because every operator reads the cluster state before it
changes anything.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kip848.hooks.admin import KafkaGroupAdminHook
from airflow_provider_kip848.hooks.cli import KafkaCliHook
from airflow_provider_kip848.hooks.connection import DEFAULT_CONN_ID
from airflow_provider_kip848.kafka.errors import Kip848Error

BACKENDS = ("native", "cli")


class KafkaAdminBaseOperator(BaseOperator):
    """Base of the provider's operators.

    :param kafka_conn_id: a ``kafka_admin`` connection.
    :param backend: ``native`` (default) or ``cli`` (Kafka's own tools) for the actions both implement.
    """

    template_fields: tuple[str, ...] = ("kafka_conn_id",)
    ui_color = "#e8f0fe"

    def __init__(self, *, kafka_conn_id: str = DEFAULT_CONN_ID, backend: str = "native", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        self.kafka_conn_id = kafka_conn_id
        self.backend = backend

    @cached_property
    def hook(self) -> KafkaGroupAdminHook | KafkaCliHook:
        return KafkaCliHook(self.kafka_conn_id) if self.backend == "cli" else KafkaGroupAdminHook(self.kafka_conn_id)

    @cached_property
    def native_hook(self) -> KafkaGroupAdminHook:
        """Actions only the native backend has (member removal, snapshots, preflight facts)."""
        return self.hook if isinstance(self.hook, KafkaGroupAdminHook) else KafkaGroupAdminHook(self.kafka_conn_id)

    def execute(self, context: Any) -> Any:
        try:
            return self.run(context)
        except Kip848Error as exc:
            if exc.retriable:
                raise
            raise AirflowFailException(str(exc)) from exc
        finally:
            for name in ("hook", "native_hook"):
                if name in self.__dict__:
                    self.__dict__.pop(name).close()

    def run(self, context: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


def as_bool(value: Any) -> bool:
    """Templated booleans arrive as strings ("True", "false")."""
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "1", "yes")

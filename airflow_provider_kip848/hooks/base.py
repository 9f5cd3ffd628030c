"""What both admin hooks share: the ``kafka_admin`` connection and thin delegation to a core backend."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_kip848.hooks.connection import CONN_TYPE, DEFAULT_CONN_ID, settings_from_connection
from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.settings import ClientSettings

#: The administrative actions both backends implement, with the same signatures and results.
SHARED_ACTIONS = (
    "describe_features",
    "update_feature",
    "group_coordinator_config",
    "list_groups",
    "group_listing",
    "describe_group",
    "describe_consumer_group",
    "describe_streams_group",
    "delete_group",
    "group_offsets",
    "alter_group_offsets",
    "describe_group_config",
    "alter_group_config",
)


class KafkaAdminBaseHook(BaseHook):
    """Base of the provider's hooks: a ``kafka_admin`` connection and one backend object per hook."""

    conn_name_attr = "kafka_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE

    def __init__(self, kafka_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kafka_conn_id = kafka_conn_id
        self._backend: Any = None

    @cached_property
    def connection(self):
        return self.get_connection(self.kafka_conn_id)

    @cached_property
    def settings(self) -> ClientSettings:
        return settings_from_connection(self.connection)

    def _make_backend(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_conn(self) -> Any:
        """The backend object (kept for the hook's lifetime; :meth:`close` releases it)."""
        if self._backend is None:
            self._backend = self._make_backend()
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def test_connection(self) -> tuple[bool, str]:
        try:
            features = self.describe_features()
        except Kip848Error as exc:
            return False, str(exc)
        except Exception as exc:  # the UI's Test button must show any failure, not raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, (
            f"Connected to {self.settings.bootstrap_servers}: group.version={features.level('group.version')}, "
            f"streams.version={features.level('streams.version')}."
        )


def delegate(name: str, backend_cls: type) -> Any:
    """A hook method that calls the backend's method of the same name (and shares its docstring)."""
    target = getattr(backend_cls, name)

    def method(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.get_conn(), name)(*args, **kwargs)

    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = target.__doc__
    return method

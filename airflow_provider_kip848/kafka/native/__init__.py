"""The native backend: confluent-kafka and kafka-python, no JVM (see :mod:`.admin`).

``KafkaAdmin`` is loaded at its first use (``native.KafkaAdmin``, ``from ...native import KafkaAdmin``), not
with the package. Why: the backend's clients take 0.3 s and more to import (kafka-python's protocol tables), the
hooks and triggers every operator module imports reach this package, and the dag-processor parses each DAG file
again and again (issue 49: files timing out at 50 s on a busy processor). An action loads it; a parse does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_provider_kip848.kafka.native.admin import KafkaAdmin


def __getattr__(name: str) -> object:
    if name == "KafkaAdmin":
        # deferred load: the clients load at the first action, never when a DAG file is parsed (see the module)
        from airflow_provider_kip848.kafka.native.admin import KafkaAdmin as admin_class  # noqa: PLC0415

        return admin_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["KafkaAdmin"]

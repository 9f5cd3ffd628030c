"""The native backend: confluent-kafka and kafka-python, no JVM (see :mod:`.admin`)."""

from airflow_provider_kip848.kafka.native.admin import KafkaAdmin

__all__ = ["KafkaAdmin"]

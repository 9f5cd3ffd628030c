"""The CLI backend: Kafka's own tools, run safely, their output parsed into :mod:`..model` results."""

from airflow_provider_kip848.kafka.cli.backend import KafkaCli
from airflow_provider_kip848.kafka.cli.runner import KafkaToolRunner, ToolResult
from airflow_provider_kip848.kafka.cli.tools import KafkaTools

__all__ = ["KafkaCli", "KafkaToolRunner", "KafkaTools", "ToolResult"]

"""The embedded local Kafka: a real Apache Kafka 4.x broker built from Maven Central jars.

Used by ``make demo`` and the test suite, and handy for trying the provider's
DAGs on a laptop::

    python -m airflow_provider_kip848.local kafka start      # prints bootstrap servers
    python -m airflow_provider_kip848.local kafka cli kafka-features describe
    python -m airflow_provider_kip848.local kafka stop

See docs/local-kafka.md.
"""

from airflow_provider_kip848.local.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC, StreamsApp
from airflow_provider_kip848.local.broker import BrokerStatus, LocalKafka, StartReport
from airflow_provider_kip848.local.distribution import DEFAULT_KAFKA_VERSION, KAFKA_TOOLS, KafkaDistribution
from airflow_provider_kip848.local.errors import (
    ArtifactResolutionError,
    BrokerNotRunning,
    BrokerStartError,
    JavaNotFoundError,
    LocalKafkaError,
    MavenNotFoundError,
    PortInUseError,
    ToolError,
    UnsupportedKafkaVersion,
)

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_TOOLS",
    "WORDCOUNT_INPUT_TOPIC",
    "WORDCOUNT_OUTPUT_TOPIC",
    "ArtifactResolutionError",
    "BrokerNotRunning",
    "BrokerStartError",
    "BrokerStatus",
    "JavaNotFoundError",
    "KafkaDistribution",
    "LocalKafka",
    "LocalKafkaError",
    "MavenNotFoundError",
    "PortInUseError",
    "StartReport",
    "StreamsApp",
    "ToolError",
    "UnsupportedKafkaVersion",
]

"""The test harness: a real Apache Kafka built from Maven Central jars, a Spark standalone cluster from the installed
pyspark, real clients and apps, DAG-run helpers.

Used by ``make demo``, the test suite and the benchmarks, and handy for trying
the provider's DAGs on a laptop::

    python -m airflow_provider_kip848.testing kafka start      # prints bootstrap servers
    python -m airflow_provider_kip848.testing kafka cli kafka-features describe
    python -m airflow_provider_kip848.testing kafka stop

Nothing in the product imports this package (an import-rule test enforces
it): it may import anything of the provider, nothing may import it but the
tests, the benchmarks and the demo. See docs/local-kafka.md.
"""

from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION, KAFKA_TOOLS, KafkaDistribution
from airflow_provider_kip848.testing.apps import WORDCOUNT_INPUT_TOPIC, WORDCOUNT_OUTPUT_TOPIC, StreamsApp
from airflow_provider_kip848.testing.broker import BrokerStatus, LocalKafka, StartReport
from airflow_provider_kip848.testing.errors import (
    BrokerNotRunning,
    BrokerStartError,
    LocalKafkaError,
    PortInUseError,
    ToolError,
)
from airflow_provider_kip848.testing.spark_cluster import LocalSparkCluster, SparkClusterError, SparkClusterReport

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_TOOLS",
    "WORDCOUNT_INPUT_TOPIC",
    "WORDCOUNT_OUTPUT_TOPIC",
    "BrokerNotRunning",
    "BrokerStartError",
    "BrokerStatus",
    "KafkaDistribution",
    "LocalKafka",
    "LocalKafkaError",
    "LocalSparkCluster",
    "PortInUseError",
    "SparkClusterError",
    "SparkClusterReport",
    "StartReport",
    "StreamsApp",
    "ToolError",
]

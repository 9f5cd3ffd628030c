"""Apache Airflow provider for Kafka consumer-group and Streams-group administration.

KIP-848 (``group.protocol=consumer``) and KIP-1071 (``group.protocol=streams``)
migrations as reviewed, scheduled, approval-gated DAGs. The Kafka-facing core
lives in :mod:`airflow_provider_kip848.kafka` and imports no Airflow; the
Airflow layers (hooks, operators, sensors, triggers) are thin wrappers over it.
"""

__version__ = "0.1.0"

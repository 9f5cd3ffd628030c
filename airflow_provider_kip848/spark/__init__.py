"""PySpark validation: prove on real Kafka data that a migration lost nothing.

Readers return Spark's Kafka schema for fixed per-partition offset ranges
(never "latest" at run time, so a rerun gives the same answer), with two
backends behind one function: Spark's own Kafka source and a pure-Python
Spark data source over confluent-kafka. The checks are pure DataFrame
functions returning a :class:`~airflow_provider_kip848.spark.checks.Verdict`.

Importing this package does not import pyspark (``pip install
airflow-provider-kip848[spark]`` adds it); the modules that need it do.
"""

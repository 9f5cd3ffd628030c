"""The test harness: a real Apache Kafka built from Maven Central jars, a Spark standalone cluster from the installed
pyspark, real clients and apps, DAG-run helpers.

Used by ``make demo``, the test suite and the benchmarks, and handy for trying
the provider's DAGs on a laptop::

    python -m kip848_harness kafka start      # prints bootstrap servers
    python -m kip848_harness kafka cli kafka-features describe
    python -m kip848_harness kafka stop

or, with the harness installed (``make venv`` installs it editable), ``kip848-local kafka start``.

It is a distribution of its own (``kip848-harness``, ``harness/pyproject.toml``), not part of the provider's
wheel: a production install of ``airflow-provider-kip848`` carries no embedded broker, demo apps, Spark-cluster
launcher or local process controllers (``tests/deploy/test_package.py`` reads the wheel's file list). The
demo's and the tests' controller kinds (``local-consumer-app``, ``local-consumer-fleet-app``, ``local-wordcount``)
are this distribution's entry points, so only a machine with the harness installed can name them.

Nothing in the product imports this package (``tests/unit/test_architecture.py`` enforces it): it may import
anything of the provider; nothing may import it but the tests, the benchmarks and the demo. See
docs/development.md ("The test harness") and docs/local-kafka.md.

It exports nothing: import from the module that defines a name (``kip848_harness.kafka_cluster.LocalKafka``).
The package is imported before every ``python -m kip848_harness.<app>`` the tests start (hundreds of consumer
application processes a run), and an import here would load the Kafka CLI backend and kafka-python into each
(0.84 CPU-seconds a process, measured, against 0.17 with only what the application itself imports).
"""

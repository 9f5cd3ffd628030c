"""The test harness: a real Apache Kafka built from Maven Central jars, a Spark standalone cluster from the installed
pyspark, real clients and apps, DAG-run helpers.

Used by ``make demo``, the test suite and the benchmarks, and handy for trying
the provider's DAGs on a laptop::

    python -m kip848_harness kafka start      # prints bootstrap servers
    python -m kip848_harness kafka cli kafka-features describe
    python -m kip848_harness kafka stop

Nothing in the product imports this package (an import-rule test enforces
it): it may import anything of the provider, nothing may import it but the
tests, the benchmarks and the demo. See docs/local-kafka.md.

It exports nothing: import from the module that defines a name (``testing.broker.LocalKafka``). The package is
imported before every ``python -m kip848_harness.<app>`` the tests start (hundreds of consumer
application processes a run), and an import here would load the Kafka CLI backend and kafka-python into each
(0.84 CPU-seconds a process, measured, against 0.17 with only what the application itself imports).
"""

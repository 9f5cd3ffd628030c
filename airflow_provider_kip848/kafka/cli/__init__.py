"""The CLI backend: Kafka's own tools, run safely, their output parsed into :mod:`..model` results.

Its modules are imported by name (``kafka.cli.backend.KafkaCli``, ``kafka.cli.tools.KafkaTools``,
``kafka.cli.runner``, ``kafka.cli.distribution``): the package imports none of them, so what needs only the
distribution's figures (the connection form's default Kafka version, read by Airflow at every start-up) does not
load the backend and its parsers (issue 49: DAG files and Airflow processes paid for them at import).
"""

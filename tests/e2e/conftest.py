"""End-to-end tests: DAG runs in this process validate on the session's SparkSession (see ``spark_session``)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _validation_spark(request: pytest.FixtureRequest) -> None:
    """A DAG run's ``validate`` task runs in this process (``dag.test()``) and finds the running session; the demo
    test runs ``make demo`` as a process of its own and starts its own."""
    if request.node.path.name != "test_demo.py":
        request.getfixturevalue("spark_session")

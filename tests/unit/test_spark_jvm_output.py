"""Spark's JVM output reaches the task log at its own level, not as ERROR (Airflow logs stderr at ERROR)."""

from __future__ import annotations

import logging
import subprocess

from airflow_provider_kip848.spark.jvm_output import forward_jvm_output, line_level
from tests.conftest import wait_until


def test_levels_of_log4j_ivy_and_stack_trace_lines():
    assert line_level("25/11/24 12:00:00 WARN NativeCodeLoader: Unable to load", logging.INFO) == logging.WARNING
    assert line_level("25/11/24 12:00:00 INFO SparkContext: Running Spark", logging.INFO) == logging.INFO
    assert line_level("2026-11-24 12:00:00,123 ERROR Executor: boom", logging.INFO) == logging.ERROR
    assert line_level(":: resolving dependencies :: org.apache.spark#spark-submit-parent", logging.INFO) == logging.INFO
    assert line_level("\tat org.apache.spark.Foo(Foo.java:1)", logging.ERROR) == logging.ERROR
    assert line_level("Exception in thread \"main\" java.lang.X", logging.INFO) == logging.ERROR


def test_a_child_process_started_inside_writes_to_the_log_not_to_stderr(caplog, capfd):
    """A real child process (as pyspark's JVM is) inherits the pipe: its lines are logged at their level."""
    caplog.set_level(logging.DEBUG, logger="kip848-test-jvm")
    script = ("echo '25/11/24 12:00:00 WARN NativeCodeLoader: no native' >&2; "
              "echo ':: resolving dependencies ::' >&2; echo '25/11/24 12:00:01 INFO Done' >&2")
    code = forward_jvm_output(lambda: subprocess.run(["sh", "-c", script]).returncode,
                              logging.getLogger("kip848-test-jvm"))
    assert code == 0
    # the pump thread logs asynchronously
    wait_until(lambda: len([r for r in caplog.records if r.name == "kip848-test-jvm"]) >= 3, timeout=10,
               what="the three lines logged", interval=0.05)
    got = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "kip848-test-jvm"]
    assert got == [(logging.WARNING, "25/11/24 12:00:00 WARN NativeCodeLoader: no native"),
                   (logging.INFO, ":: resolving dependencies ::"), (logging.INFO, "25/11/24 12:00:01 INFO Done")]
    assert "NativeCodeLoader" not in capfd.readouterr().err

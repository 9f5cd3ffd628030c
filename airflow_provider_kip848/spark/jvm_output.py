"""Spark's JVM output to Python logging at the level each line carries.

pyspark starts the driver JVM with the worker's stderr, where Ivy's dependency
resolution and log4j print everything, INFO and WARN included. An Airflow
task logs its process's stderr at ERROR, so a successful validation showed
dozens of ERROR lines. :func:`forward_jvm_output` gives the JVM a pipe as its
stderr instead and logs each line at the level log4j printed (WARN -> WARNING,
Ivy's progress -> INFO); lines without a level (a stack trace) keep the level
of the line they continue.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
LOG = logging.getLogger("airflow_provider_kip848.spark.jvm")

_LEVEL = re.compile(r"^(?:\d\d/\d\d/\d\d \d\d:\d\d:\d\d |\d{4}-\d\d-\d\d[T ][\d:.,]+ )?(?:\[[^\]]*\] )?"
                    r"(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b")
_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}


def line_level(line: str, previous: int) -> int:
    """The logging level of one JVM output line (``previous`` for a continuation such as ``\\tat ...``)."""
    match = _LEVEL.match(line)
    if match:
        return _LEVELS[match.group(1)]
    if line.startswith(("\tat ", "\t... ", "Caused by:", "\t")):
        return previous
    if line.startswith("Exception in thread"):
        return logging.ERROR
    return logging.INFO  # Ivy's resolution report and other plain progress lines


def _pump(read_fd: int, logger: logging.Logger) -> None:
    level = logging.INFO
    with os.fdopen(read_fd, "r", errors="replace") as stream:
        for raw in stream:
            line = raw.rstrip("\n")
            if not line.strip():
                continue
            level = line_level(line, level)
            logger.log(level, "%s", line)


@contextmanager
def _stderr_pipe(logger: logging.Logger) -> Iterator[None]:
    read_fd, write_fd = os.pipe()
    saved = os.dup(2)
    threading.Thread(target=_pump, args=(read_fd, logger), daemon=True, name="spark-jvm-output").start()
    os.dup2(write_fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # this process writes to its own stderr again; the JVM keeps the pipe
        os.close(saved)
        os.close(write_fd)


def forward_jvm_output(start: Callable[[], T], logger: logging.Logger = LOG) -> T:
    """Run ``start`` (which launches the JVM) with a pipe as stderr; the JVM's lines go to ``logger``."""
    with _stderr_pipe(logger):
        return start()

"""Errors of the embedded local Kafka launcher.

Each says, on one line, what is wrong with this machine or this request and
what to do about it: the launcher is the first thing a new user runs, so a
Java stack trace or a silent hang would be the worst possible first contact.
(No Java, no Maven or a bad version are the core's :class:`ToolchainError`\\ s:
the CLI backend needs the same tools.)
"""

from __future__ import annotations

from airflow_provider_kip848.kafka.errors import Kip848Error


class LocalKafkaError(Kip848Error):
    """Base class of the launcher's errors."""


class PortInUseError(LocalKafkaError):
    remedy = "Stop whatever listens there, choose another port, or pass port 0 to let the launcher pick free ports."


class BrokerStartError(LocalKafkaError):
    remedy = "Read the broker log named above; fix the cause and start again."


class BrokerNotRunning(LocalKafkaError):
    remedy = "Start it first: python -m kip848_harness kafka start"


class ToolError(LocalKafkaError):
    """A Kafka CLI tool exited non-zero; ``returncode``/``stderr`` keep its own words."""

    remedy = "Read the tool's message above."

    def __init__(self, what: str, *, returncode: int, stdout: str, stderr: str, remedy: str | None = None):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(what, remedy=remedy)

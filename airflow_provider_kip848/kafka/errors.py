"""One exception tree for everything the provider can refuse or fail at.

Every error carries two parts: ``what`` went wrong, in the cluster's own
vocabulary, and a ``remedy`` that tells the operator what to do next. ``str()``
of an error is both, on one line, because that is what ends up in an Airflow
task log or a terminal and it must be actionable without reading code.

This module imports nothing from Airflow so the core can be used from a
notebook or a plain script.
"""

from __future__ import annotations


class Kip848Error(Exception):
    """Base class of every error raised by this provider."""

    #: Default remedy for the class; instances may give a more precise one.
    remedy: str = ""

    def __init__(self, what: str, *, remedy: str | None = None) -> None:
        self.what = what.rstrip()
        if remedy is not None:
            self.remedy = remedy
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if not self.remedy:
            return self.what
        sep = " " if self.what.endswith((".", ":", "!", "?")) else ". "
        return f"{self.what}{sep}{self.remedy}"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


class KafkaConnectionError(Kip848Error):
    """The cluster could not be reached at all (bootstrap servers wrong, broker down)."""

    remedy = "Check the bootstrap servers and that the brokers are up and reachable from this worker."


class OperationTimedOut(Kip848Error):
    """A request or a tool did not answer in time; the change may or may not have been applied."""

    remedy = (
        "Re-run the task: every operation of this provider is idempotent and reads the "
        "cluster state before changing it."
    )


class AuthorizationFailed(Kip848Error):
    """The principal lacks a Kafka ACL for the operation."""

    remedy = "Grant the missing ACL to the principal of this connection, or use a connection with more rights."


class UnsupportedBrokerVersion(Kip848Error):
    """The broker is too old (or a known-bad release) for the requested action."""

    remedy = "Upgrade the brokers first: KIP-848 consumer groups need Kafka 4.0+, streams groups 4.2.1+."

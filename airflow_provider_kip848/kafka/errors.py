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
    #: True when retrying the same call later can succeed (the cluster was unreachable or slow);
    #: False for bad input and refusals, which a retry would only repeat.
    retriable: bool = False

    def __init__(self, what: str, *, remedy: str | None = None) -> None:
        what = what.rstrip()
        while what.endswith(".."):  # a client message that ends in "." inside our own sentence
            what = what[:-1]
        self.what = what
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

    retriable = True
    remedy = "Check the bootstrap servers and that the brokers are up and reachable from this worker."


class OperationTimedOut(Kip848Error):
    """A request or a tool did not answer in time; the change may or may not have been applied."""

    retriable = True
    remedy = (
        "Re-run the task: every operation of this provider is idempotent and reads the "
        "cluster state before changing it."
    )


class AuthorizationFailed(Kip848Error):
    """The principal lacks a Kafka ACL for the operation."""

    remedy = "Grant the missing ACL to the principal of this connection, or use a connection with more rights."


class AuthenticationFailed(Kip848Error):
    """The brokers refused the connection's credentials (SASL or TLS)."""

    remedy = (
        "Check the connection's username, password and SASL mechanism (and the CA file for TLS); "
        "the secret itself is never logged."
    )


class GroupNotFound(Kip848Error):
    """The group does not exist (or is not of the type the request needs)."""

    remedy = "Check the group id (kafka-groups --list shows every group with its type)."


class WrongGroupType(Kip848Error):
    """The group exists but is of another type than the action needs (e.g. a streams group for LeaveGroup)."""

    remedy = "Use the action for the group's actual type."


class GroupNotEmpty(Kip848Error):
    """The action needs an empty group (no active members) and the group has members."""

    remedy = (
        "Stop every instance of the application (or remove its members) and wait until the group "
        "is Empty, then retry."
    )


class InvalidFeatureLevel(Kip848Error):
    """A feature name or level the cluster does not support, or a change in the wrong direction."""

    remedy = "Run kafka-features describe (or describe_features()) for the supported range."


class InvalidGroupConfig(Kip848Error):
    """A group-level config change the broker would refuse."""

    remedy = "Fix the config name or value; the broker's bounds are in the message."


class ConfigUnknown(InvalidGroupConfig):
    """The config name is not a group-level config of this broker version."""


class ConfigOutOfBounds(InvalidGroupConfig):
    """The value is outside the bounds the broker's group.* configs allow, or of the wrong type."""


class UnknownTopicOrPartition(Kip848Error):
    """A topic or partition named in the request does not exist."""

    remedy = "Check the topic name and partition number (kafka-topics --describe)."


class InvalidOffset(Kip848Error):
    """An offset to commit lies outside the partition's log."""

    remedy = "Use an offset between the partition's log start and log end (describe the group's offsets)."


class KafkaToolError(Kip848Error):
    """A Kafka CLI tool failed in a way no more specific error describes; carries the tool's own words."""

    remedy = "Read the tool's message above; rerun with the same arguments to reproduce it."


class UnsupportedBrokerVersion(Kip848Error):
    """The broker is too old (or a known-bad release) for the requested action."""

    remedy = "Upgrade the brokers first: KIP-848 consumer groups need Kafka 4.0+, streams groups 4.2.1+."

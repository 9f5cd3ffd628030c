"""The client errors a migration can cause, found in an instance's own log lines, in the client's own words.

The coordinator shows a member gone or never joined; only the client says why: a static member whose
``group.instance.id`` is still held (UNRELEASED_INSTANCE_ID), a member fenced at its epoch, a topic the
application's principal may not read, a broker that does not speak the consumer protocol. A wait that fails
on a count ("2 of 3 live") leaves the operator to find that line in the platform's logs; this module finds it
for them, per instance, from lines a controller read (:meth:`~airflow_provider_kip848.controllers.protocol.
ApplicationController.logs`), redacted before they get here. Pure: no I/O, no Airflow.

The shapes come from the clients' sources (librdkafka ``src/rdkafka.c`` error strings and ``rdkafka_cgrp.c``
heartbeat handling, the Java client's ``AbstractHeartbeatRequestManager`` / ``ConsumerHeartbeatRequestManager``
and ``org.apache.kafka.common.errors``) and from runs of the harness's applications:

* the error code as the client names it (``KafkaError{code=UNRELEASED_INSTANCE_ID,...}`` from confluent-kafka,
  ``... failed due to UNSUPPORTED_VERSION: ...`` from the Java client's heartbeat manager);
* the Java exception class (``org.apache.kafka.common.errors.TopicAuthorizationException``);
* librdkafka's ``rd_kafka_err2str`` text (``Broker: The instance ID is still used by another member in the
  consumer group``), which its own log lines (``%0|...|FATAL|rdkafka#consumer-1| Fatal error: ...``) carry.

Fatal: what the client itself does not recover from. The table says it per error as both clients handle it in
the consumer protocol's heartbeat (librdkafka ``RD_KAFKA_ERR_ACTION_FATAL``, the Java client's
``handleFatalFailure``); a line the client marks fatal (``Fatal error:``, librdkafka's FATAL facility, the Java
client's "failed due to fatal error", an uncaught exception that ended the process, Streams shutting its
client down) makes any error on it fatal. A fenced member epoch or a stale one is not fatal: the client
rejoins; a topic authorization failure is handed to the application, which decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: the longest client line a finding keeps (a stack trace's first line is what names the error)
MAX_FINDING_LINE = 400


@dataclass(frozen=True)
class ClientErrorRule:
    """One error: its name (the protocol's error code), whether the clients treat it as fatal, what it means for a
    migration, and the patterns that find it in a line (code, exception class, librdkafka's text, Java's text)."""

    error: str
    fatal: bool
    meaning: str
    patterns: tuple[str, ...]


RULES: tuple[ClientErrorRule, ...] = (
    ClientErrorRule("UNRELEASED_INSTANCE_ID", True,
                    "its group.instance.id is still held by another member (a predecessor not yet gone, or a "
                    "duplicate instance id)",
                    (r"\bUNRELEASED_INSTANCE_ID\b", r"UnreleasedInstanceIdException",
                     r"The instance ID is still used by another member", r"failed due to unreleased instance id")),
    ClientErrorRule("FENCED_INSTANCE_ID", True,
                    "another member took its group.instance.id",
                    (r"\bFENCED_INSTANCE_ID\b", r"FencedInstanceIdException",
                     r"Static consumer fenced by other consumer with same group\.instance\.id",
                     r"failed due to fenced instance id")),
    ClientErrorRule("FENCED_MEMBER_EPOCH", False,
                    "the coordinator fenced the member at its epoch; the client rejoins",
                    (r"\bFENCED_MEMBER_EPOCH\b", r"FencedMemberEpochException",
                     r"The member epoch is fenced by the group coordinator", r"because epoch -?\d+ is fenced")),
    ClientErrorRule("STALE_MEMBER_EPOCH", False,
                    "a commit or heartbeat carried an old member epoch; the client retries",
                    (r"\bSTALE_MEMBER_EPOCH\b", r"StaleMemberEpochException", r"The member epoch is stale")),
    ClientErrorRule("INCONSISTENT_GROUP_PROTOCOL", False,
                    "the member's protocol does not match the group's (a classic member joining a group of "
                    "another protocol type, or the other way)",
                    (r"\bINCONSISTENT_GROUP_PROTOCOL\b", r"InconsistentGroupProtocolException",
                     r"Inconsistent group protocol")),
    ClientErrorRule("UNSUPPORTED_VERSION", True,
                    "the broker does not speak what the client asked (the consumer or streams protocol not enabled "
                    "there, or a client too new or too old)",
                    (r"\bUNSUPPORTED_VERSION\b", r"UnsupportedVersionException", r"Broker: API version not supported",
                     r"doesn't yet support the new consumer group protocol")),
    ClientErrorRule("TOPIC_AUTHORIZATION_FAILED", False,
                    "the application's principal may not read (or describe) a topic it subscribes to",
                    (r"\bTOPIC_AUTHORIZATION_FAILED\b", r"TopicAuthorizationException", r"Topic authorization failed",
                     r"Not authorized to access topics")),
    ClientErrorRule("GROUP_AUTHORIZATION_FAILED", True,
                    "the application's principal may not use the group",
                    (r"\bGROUP_AUTHORIZATION_FAILED\b", r"GroupAuthorizationException", r"Group authorization failed",
                     r"Not authorized to access group")),
    ClientErrorRule("GROUP_ID_NOT_FOUND", True,
                    "the coordinator no longer knows the group (deleted while the member ran)",
                    (r"\bGROUP_ID_NOT_FOUND\b", r"GroupIdNotFoundException", r"The group id does not exist")),
    ClientErrorRule("GROUP_MAX_SIZE_REACHED", True,
                    "the group is full (group.consumer.max.size or group.streams.max.size)",
                    (r"\bGROUP_MAX_SIZE_REACHED\b", r"GroupMaxSizeReachedException",
                     r"Consumer group has reached maximum size")),
    ClientErrorRule("UNSUPPORTED_ASSIGNOR", True,
                    "the member asked for a server-side assignor the broker does not have",
                    (r"\bUNSUPPORTED_ASSIGNOR\b", r"UnsupportedAssignorException",
                     r"assignor or its version range is not supported")),
    ClientErrorRule("STREAMS_INVALID_TOPOLOGY", True,
                    "the streams group's coordinator refused the application's topology",
                    (r"\bSTREAMS_INVALID_TOPOLOGY\b", r"StreamsInvalidTopologyException")),
    ClientErrorRule("STREAMS_TOPOLOGY_FENCED", True,
                    "another topology epoch runs in the streams group",
                    (r"\bSTREAMS_TOPOLOGY_FENCED\b", r"StreamsTopologyFencedException")),
    ClientErrorRule("MISSING_SOURCE_TOPICS", True,
                    "a Kafka Streams source topic does not exist (Streams shuts its client down)",
                    (r"MissingSourceTopicException",)),
)

_COMPILED = tuple((rule, re.compile("|".join(f"(?:{p})" for p in rule.patterns))) for rule in RULES)
#: a line the client marks fatal, whatever the error on it
_FATAL_LINE = re.compile(
    r"\|FATAL\||Fatal error:|Fatal consumer error|failed due to fatal error|fatal=True|"
    r"^\s*(?:[\w.]+\.)?KafkaException: KafkaError\{|^Exception in thread |SHUTDOWN_(?:CLIENT|APPLICATION)|"
    r"\b_FATAL\b")
_LIBRDKAFKA = re.compile(r"^%\d\|\d+\.\d+\|\w+\||#(?:consumer|producer)-\d+\||KafkaError\{|Broker: |confluent_kafka|"
                         r"cimpl\.")
_STREAMS = re.compile(r"org\.apache\.kafka\.streams|stream-thread|StreamThread|KafkaStreams")
_JAVA = re.compile(r"org\.apache\.kafka|\[(?:Consumer|Producer|AdminClient) clientId=|Exception\b")


@dataclass(frozen=True)
class ClientErrorFinding:
    """An error the client of ``instance`` logged: the protocol's ``error`` name, whether it is ``fatal``, the
    ``client`` whose shape matched (librdkafka, java, streams; "" when the line does not tell), the client's own
    ``line`` (the last one that named it, redacted, cut at :data:`MAX_FINDING_LINE`) and ``count``, how many
    lines named it."""

    instance: str
    error: str
    fatal: bool
    client: str
    line: str
    count: int = 1

    def describe(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.error}{' (fatal)' if self.fatal else ''}{times}: {self.line}"

    def to_dict(self) -> dict[str, object]:
        return {"instance": self.instance, "error": self.error, "fatal": self.fatal, "client": self.client,
                "line": self.line, "count": self.count}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ClientErrorFinding:
        count = data.get("count")
        return cls(instance=str(data.get("instance") or ""), error=str(data.get("error") or ""),
                   fatal=bool(data.get("fatal")), client=str(data.get("client") or ""),
                   line=str(data.get("line") or ""), count=count if isinstance(count, int) else 1)


def _client(line: str) -> str:
    if _STREAMS.search(line):
        return "streams"
    if _LIBRDKAFKA.search(line):
        return "librdkafka"
    return "java" if _JAVA.search(line) else ""


def after_mark(lines: tuple[str, ...] | list[str], mark: Iterable[str] | None) -> list[str]:
    """The lines written after ``mark`` (the last lines of the log before an action), found at its last
    occurrence; all of them when the mark is empty or no longer in view (the log moved past it)."""
    lines, mark = list(lines), [m for m in (mark or ()) if m]
    if not mark:
        return lines
    size = len(mark)
    for end in range(len(lines), size - 1, -1):
        if lines[end - size:end] == mark:
            return lines[end:]
    return lines


def scan_lines(instance: str, lines: Iterable[str]) -> list[ClientErrorFinding]:
    """The errors named in ``lines`` (oldest first), one finding per error: its last line, how many lines named
    it, fatal when the error is or any of its lines says so. In the order each error was first seen."""
    found: dict[str, ClientErrorFinding] = {}
    for raw in lines:
        line = raw.rstrip()
        for rule, pattern in _COMPILED:
            if not pattern.search(line):
                continue
            before = found.get(rule.error)
            fatal = rule.fatal or bool(_FATAL_LINE.search(line)) or (before is not None and before.fatal)
            shown = line if len(line) <= MAX_FINDING_LINE else line[:MAX_FINDING_LINE] + " ..."
            found[rule.error] = ClientErrorFinding(
                instance=instance, error=rule.error, fatal=fatal, client=_client(line) or (before.client if before
                                                                                          else ""),
                line=shown, count=(before.count + 1) if before is not None else 1)
    return list(found.values())


def describe_findings(findings: Iterable[ClientErrorFinding]) -> str:
    """Per instance, each error in the client's words: ``orders:orders_1: UNRELEASED_INSTANCE_ID (fatal): <line>``."""
    by_instance: dict[str, list[str]] = {}
    for finding in findings:
        by_instance.setdefault(finding.instance, []).append(finding.describe())
    return "; ".join(f"{instance}: " + " | ".join(errors) for instance, errors in by_instance.items())


def meaning(error: str) -> str:
    """What an error means for a migration ("" for a name the table does not hold)."""
    return next((rule.meaning for rule in RULES if rule.error == error), "")


__all__ = ["MAX_FINDING_LINE", "RULES", "ClientErrorFinding", "ClientErrorRule", "after_mark", "describe_findings",
           "meaning", "scan_lines"]

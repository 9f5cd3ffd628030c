"""The client-error scanner (kafka/rules/client_errors.py) on the lines the clients really write: librdkafka's
(its log format ``%level|ts|FAC|name| ...`` and confluent-kafka's ``KafkaError{...}``, as the harness's consumer
application logged them in tests/integration/test_client_errors.py), the Java client's heartbeat manager and
exception classes (apache/kafka ``AbstractHeartbeatRequestManager``, ``ConsumerHeartbeatRequestManager``) and
Kafka Streams."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.rules.client_errors import (
    ClientErrorFinding,
    after_mark,
    describe_findings,
    meaning,
    scan_lines,
)

# -- lines from real runs (librdkafka 2.x through confluent-kafka, the harness's consumer application) ---------
RDKAFKA_FENCED = ("%0|1795964302.977|FATAL|app-1#consumer-1| [thrd:main]: Fatal error: Broker: Static consumer "
                  "fenced by other consumer with same group.instance.id: Fatal consumer error: Broker: Static "
                  "consumer fenced by other consumer with same group.instance.id")
PY_FENCED = ('cimpl.KafkaException: KafkaError{code=_FATAL,val=-150,str="Fatal error: Broker: Static consumer fenced '
             'by other consumer with same group.instance.id: Fatal consumer error: Broker: Static consumer fenced by '
             'other consumer with same group.instance.id"}')
PY_TOPIC_DENIED = ('cimpl.KafkaException: KafkaError{code=TOPIC_AUTHORIZATION_FAILED,val=29,str="Fetch from broker 1 '
                   'failed: Broker: Topic authorization failed"}')
# -- the shapes of the clients' sources ------------------------------------------------------------------------
RDKAFKA_UNRELEASED = ("%0|1795964302.977|FATAL|orders-1#consumer-1| [thrd:main]: Fatal error: Broker: The instance "
                      "ID is still used by another member in the consumer group: ConsumerGroupHeartbeat fatal error: "
                      "Broker: The instance ID is still used by another member in the consumer group")
JAVA_UNRELEASED = ("[2026-11-29 15:00:00,000] ERROR [Consumer clientId=orders-1, groupId=orders] "
                   "ConsumerGroupHeartbeatRequest failed due to unreleased instance id orders-1: Instance id orders-1 "
                   "is in use by another member. (org.apache.kafka.clients.consumer.internals."
                   "ConsumerHeartbeatRequestManager)")
JAVA_FENCED_EPOCH = ("[2026-11-29 15:00:00,000] INFO [Consumer clientId=orders-0, groupId=orders] "
                     "ConsumerGroupHeartbeatRequest failed for member Xy1 because epoch 7 is fenced. "
                     "(org.apache.kafka.clients.consumer.internals.ConsumerHeartbeatRequestManager)")
JAVA_UNSUPPORTED = ("[2026-11-29 15:00:00,000] ERROR [Consumer clientId=c, groupId=g] ConsumerGroupHeartbeatRequest "
                    "failed due to UNSUPPORTED_VERSION: The cluster doesn't yet support the new consumer group "
                    "protocol. (org.apache.kafka.clients.consumer.internals.ConsumerHeartbeatRequestManager)")
JAVA_TOPIC = ("org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: "
              "[orders]")
STREAMS_MISSING = ("[2026-11-29 15:00:00,000] ERROR stream-thread [wordcount-1-StreamThread-1] ... "
                   "org.apache.kafka.streams.errors.MissingSourceTopicException: One or more source topics were "
                   "missing during rebalance")


@pytest.mark.parametrize(("line", "error", "fatal", "client"), [
    (RDKAFKA_FENCED, "FENCED_INSTANCE_ID", True, "librdkafka"),
    (PY_FENCED, "FENCED_INSTANCE_ID", True, "librdkafka"),
    (PY_TOPIC_DENIED, "TOPIC_AUTHORIZATION_FAILED", True, "librdkafka"),  # the application ended on it
    ("%5|1795964302.977|TOPICERR|app-0#consumer-1| [thrd:main]: Subscribed topic not available: t: Broker: Topic "
     "authorization failed", "TOPIC_AUTHORIZATION_FAILED", False, "librdkafka"),
    (RDKAFKA_UNRELEASED, "UNRELEASED_INSTANCE_ID", True, "librdkafka"),
    ("KafkaError{code=STALE_MEMBER_EPOCH,val=113,str=\"Commit failed: Broker: The member epoch is stale\"}",
     "STALE_MEMBER_EPOCH", False, "librdkafka"),
    ("KafkaError{code=FENCED_MEMBER_EPOCH,val=110,str=\"Broker: The member epoch is fenced by the group "
     "coordinator\"}", "FENCED_MEMBER_EPOCH", False, "librdkafka"),
    (JAVA_UNRELEASED, "UNRELEASED_INSTANCE_ID", True, "java"),
    (JAVA_FENCED_EPOCH, "FENCED_MEMBER_EPOCH", False, "java"),
    (JAVA_UNSUPPORTED, "UNSUPPORTED_VERSION", True, "java"),
    (JAVA_TOPIC, "TOPIC_AUTHORIZATION_FAILED", False, "java"),
    ("org.apache.kafka.common.errors.InconsistentGroupProtocolException: The group member's supported protocols "
     "are incompatible with those of existing members", "INCONSISTENT_GROUP_PROTOCOL", False, "java"),
    ("org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.", "GROUP_ID_NOT_FOUND",
     True, "java"),
    (STREAMS_MISSING, "MISSING_SOURCE_TOPICS", True, "streams"),
])
def test_each_error_is_found_in_its_clients_words_fatal_as_the_client_treats_it(line, error, fatal, client):
    [finding] = scan_lines("orders-0", [line])
    assert (finding.error, finding.fatal, finding.client) == (error, fatal, client)
    assert finding.line == line and finding.instance == "orders-0" and meaning(error)


@pytest.mark.parametrize("line", [
    "started group=orders protocol=consumer client.id=app-0",
    "transient: Local: Broker transport failure",
    "\tgroup.instance.id = orders-0",
    "[2026-11-29 15:00:00,000] INFO [Consumer clientId=c, groupId=g] Request joining group due to: need to "
    "re-join with the given member-id (org.apache.kafka.clients.consumer.internals.ConsumerCoordinator)",
])
def test_ordinary_lines_are_no_finding(line):
    assert scan_lines("i", [line]) == []


def test_one_finding_per_error_its_last_line_counted_and_fatal_if_any_line_says_so():
    findings = scan_lines("orders:orders_1", ["noise", RDKAFKA_FENCED, "closed", "Traceback (most recent call last):",
                                              PY_FENCED, JAVA_FENCED_EPOCH])
    assert [(f.error, f.count, f.fatal) for f in findings] == [("FENCED_INSTANCE_ID", 2, True),
                                                               ("FENCED_MEMBER_EPOCH", 1, False)]
    assert findings[0].line == PY_FENCED
    text = describe_findings(findings)
    assert text.startswith("orders:orders_1: FENCED_INSTANCE_ID (fatal) (x2): cimpl.KafkaException"), text
    assert ClientErrorFinding.from_dict(findings[0].to_dict()) == findings[0]
    long = scan_lines("i", ["x" * 1000 + " UNRELEASED_INSTANCE_ID"])[0].line
    assert len(long) < 500 and long.endswith(" ...")


def test_only_the_lines_after_the_mark_are_new():
    lines = ["a", "b", "c", "a", "b", "d", "e"]
    assert after_mark(lines, ["a", "b"]) == ["d", "e"]  # its last occurrence
    assert after_mark(lines, ["e"]) == []
    assert after_mark(lines, ["gone from view"]) == lines  # the log moved past it: every line is newer
    assert after_mark(lines, []) == lines and after_mark(lines, None) == lines

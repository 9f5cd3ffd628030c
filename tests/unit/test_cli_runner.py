"""CLI runner: failures recognised from the tools' real output (recorded from Kafka 4.3.1), secrets kept off argv."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka import errors as kafka_errors
from airflow_provider_kip848.kafka.cli.runner import KafkaTools, ToolResult, raise_for_tool_errors, tool_message
from airflow_provider_kip848.kafka.settings import ClientSettings

SETTINGS = ClientSettings("b:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                          sasl_username="u", sasl_password="hunter2")

CONFIG_TRACE = """Error while executing config command with args '--bootstrap-server 127.0.0.1:53263 --alter ...'
java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidConfigurationException: {msg}
\tat kafka.admin.ConfigCommand.main(ConfigCommand.scala)
Caused by: org.apache.kafka.common.errors.InvalidConfigurationException: {msg}
"""


@pytest.mark.parametrize("tool, rc, stdout, stderr, error, fragment", [
    ("kafka-consumer-groups", 0,
     "\nError: Executing consumer group command failed due to org.apache.kafka.common.errors.GroupIdNotFoundException: "
     "Group nonexist not found.\n", "", kafka_errors.GroupNotFound, "GroupIdNotFoundException: Group nonexist not found."),
    ("kafka-consumer-groups", 0,
     "\nError: Executing consumer group command failed due to org.apache.kafka.common.errors.GroupIdNotFoundException: "
     "Group wc-explore is not a consumer group.\n", "", kafka_errors.WrongGroupType, "is not a consumer group"),
    ("kafka-streams-groups", 1,
     "\nError: Executing streams group command failed due to org.apache.kafka.common.errors.GroupIdNotFoundException: "
     "Group g-classic is not a streams group.\n", "", kafka_errors.WrongGroupType, "is not a streams group"),
    ("kafka-consumer-groups", 0,
     "\nError: Deletion of some consumer groups failed:\n* Group 'g-classic' could not be deleted due to: "
     "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n", "", kafka_errors.GroupNotEmpty,
     "GroupNotEmptyException: The group is not empty."),
    ("kafka-configs", 1, "", CONFIG_TRACE.format(msg="Unknown group config name: no.such.config"), kafka_errors.ConfigUnknown,
     "Unknown group config name: no.such.config"),
    ("kafka-configs", 1, "", CONFIG_TRACE.format(
        msg="streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
     kafka_errors.ConfigOutOfBounds, "must be less than or equal to group.streams.max.standby.replicas"),
    ("kafka-features", 1,
     "Could not upgrade streams.version to 5. The update failed for all features since the following feature had an "
     "error: Invalid update version 5 for feature streams.version. Local controller 1 only supports versions 0-1\n",
     "1 out of 1 operation(s) failed.\n", kafka_errors.InvalidFeatureLevel, "only supports versions 0-1"),
    ("kafka-features", 1,
     "Could not downgrade streams.version to 0. Request Request(processor=2, connectionId=x, envelope=Some(Request("
     "processor=2, envelope=None))) needs ALTER permission.\n", "1 out of 1 operation(s) failed.\n",
     kafka_errors.AuthorizationFailed, "The request needs ALTER permission"),
    ("kafka-features", 1, "", "Exception in thread main\nCaused by: org.apache.kafka.common.errors."
     "SaslAuthenticationException: Authentication failed during authentication due to invalid credentials with SASL "
     "mechanism SCRAM-SHA-256\n", kafka_errors.AuthenticationFailed, "invalid credentials"),
    ("kafka-get-offsets", 1, "Error occurred: Could not match any topic-partitions with the specified filters\n", "",
     kafka_errors.UnknownTopicOrPartition, "Could not match any topic-partitions"),
    # kafka-features prints "Can not/Could not <action> ..." before any cause: a timed-out call stays retriable
    ("kafka-features", 1, "Can not upgrade streams.version to 1. Timed out waiting for a node assignment. Call: "
     "updateFeatures\n", "1 out of 1 operation(s) failed.\n", kafka_errors.KafkaConnectionError, "Timed out waiting for a node"),
    ("kafka-features", 1, "Could not upgrade streams.version to 1. Call(callName=updateFeatures, deadlineMs=1) timed "
     "out at 2 after 1 attempt(s)\n", "1 out of 1 operation(s) failed.\n", kafka_errors.OperationTimedOut, "timed out at"),
    ("kafka-features", 1, "Can not downgrade metadata.version to 29. The update failed for all features since the "
     "following feature had an error: Unsupported metadata.version downgrade from 30 to 29. Refusing to perform the "
     "requested downgrade because it might delete metadata information.\n", "1 out of 1 operation(s) failed.\n",
     kafka_errors.InvalidFeatureLevel, "Refusing to perform the requested downgrade"),
    ("kafka-features", 1, "", "Caused by: org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a "
     "node assignment. Call: describeFeatures\n", kafka_errors.KafkaConnectionError, "no broker at"),
    ("kafka-consumer-groups", 3, "something odd\n", "", kafka_errors.KafkaToolError, "something odd"),
])
def test_failures_map_to_specific_errors(tool, rc, stdout, stderr, error, fragment):
    with pytest.raises(error) as err:
        raise_for_tool_errors(ToolResult(tool, (), rc, stdout, stderr), SETTINGS)
    assert fragment in str(err.value)
    assert str(err.value).startswith(tool)


def test_success_output_is_not_an_error():
    raise_for_tool_errors(ToolResult("kafka-configs", (), 0, "Completed updating config for group g1.\n", ""), SETTINGS)
    raise_for_tool_errors(ToolResult("kafka-features", (), 0, "streams.version was upgraded to 1.\n", ""), SETTINGS)


def test_secrets_are_redacted_from_tool_messages():
    with pytest.raises(kafka_errors.KafkaToolError) as err:
        raise_for_tool_errors(ToolResult("kafka-configs", (), 1, "Error: bad value hunter2\n", ""), SETTINGS)
    assert "hunter2" not in str(err.value) and "***" in str(err.value)


def test_tool_message_prefers_the_root_cause():
    result = ToolResult("kafka-configs", (), 1, "", CONFIG_TRACE.format(msg="X must be less than Y"))
    assert tool_message(result) == "InvalidConfigurationException: X must be less than Y"


def test_command_never_carries_the_password(tmp_path):
    (tmp_path / "libs").mkdir()
    cmd = KafkaTools(kafka_home=tmp_path).command("kafka-features", ["--command-config", "/tmp/x", "describe"])
    assert cmd[-1] == "describe" and "org.apache.kafka.tools.FeatureCommand" in cmd
    assert f"{tmp_path}/libs/*" in cmd
    assert not any("hunter2" in a for a in cmd)


def test_kafka_home_without_libs_is_a_clear_error(tmp_path):
    with pytest.raises(kafka_errors.KafkaToolError, match="has no libs/ directory.*unpacked Kafka release"):
        KafkaTools(kafka_home=tmp_path).command("kafka-features", ["describe"])

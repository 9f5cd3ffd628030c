"""KafkaAdmin's handling of kafka-python errors (faked at the client boundary; the real-broker
counterparts are tests/integration/test_local_kafka.py::test_restart_keeps_cluster_data_and_ports
and tests/integration/test_admin_hook.py::test_unreachable_cluster_is_a_clear_error)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka import errors as kerr

from airflow_provider_kip848.kafka.errors import (
    AuthorizationFailed,
    CoordinatorUnavailable,
    KafkaConnectionError,
    OperationTimedOut,
)
from airflow_provider_kip848.kafka.native import KafkaAdmin
from airflow_provider_kip848.kafka.settings import ClientSettings
from airflow_provider_kip848.kafka.translate import confluent_retriable, translate_confluent


class FlakyClient:
    def __init__(self, failures: list[Exception], result):
        self.failures = list(failures)
        self.result = result
        self.calls = 0

    def list_groups(self):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.result

    def close(self):
        pass


def admin_with(client, timeout_ms=5000) -> KafkaAdmin:
    admin = KafkaAdmin(ClientSettings("127.0.0.1:1", request_timeout_ms=timeout_ms))
    admin._transport._kp_admin = client  # faked at the client boundary
    return admin


def test_retriable_errors_are_retried_until_the_call_succeeds():
    client = FlakyClient([kerr.CoordinatorLoadInProgressError(), kerr.CoordinatorLoadInProgressError()],
                         [{"group_id": "g", "group_type": "consumer", "group_state": "Stable", "protocol_type": "consumer"}])
    groups = admin_with(client).list_groups()
    assert client.calls == 3
    assert [(g.group_id, g.type.value, g.state) for g in groups] == [("g", "consumer", "Stable")]


def test_a_coordinator_loading_past_the_timeout_is_a_retriable_coordinator_unavailable():
    client = FlakyClient([kerr.CoordinatorLoadInProgressError()] * 1000, [])
    with pytest.raises(CoordinatorUnavailable, match="kept answering CoordinatorLoadInProgressError for 1000 ms") as err:
        admin_with(client, timeout_ms=1000).list_groups()
    assert err.value.retriable
    assert 2 <= client.calls < 1000


def test_other_retriable_errors_past_the_timeout_become_operation_timed_out():
    client = FlakyClient([kerr.LeaderNotAvailableError()] * 1000, [])
    with pytest.raises(OperationTimedOut, match="kept answering LeaderNotAvailableError for 1000 ms"):
        admin_with(client, timeout_ms=1000).list_groups()
    assert 2 <= client.calls < 1000


def test_authorization_errors_are_not_retried_and_name_the_resource():
    client = FlakyClient([kerr.GroupAuthorizationFailedError()], [])
    with pytest.raises(AuthorizationFailed, match="not authorized on GROUP.*Grant the missing ACL"):
        admin_with(client).list_groups()
    assert client.calls == 1


def test_connection_timeout_is_a_connection_error():
    client = FlakyClient([kerr.KafkaTimeoutError("bootstrap")] * 1000, [])
    with pytest.raises(KafkaConnectionError, match="No broker answered at 127.0.0.1:1 in time"):
        admin_with(client, timeout_ms=1000).list_groups()


def test_a_partition_error_the_protocol_marks_retriable_is_retriable():
    """librdkafka leaves its retriable flag unset on a per-partition answer (NOT_LEADER_OR_FOLLOWER in a
    ListOffsets future while a leader moves); the protocol marks it retriable, and so does the provider."""
    settings = ClientSettings("127.0.0.1:1")
    not_leader = KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)
    assert not not_leader.retriable()  # the client's own flag: why the provider asks the protocol
    assert confluent_retriable(not_leader)
    assert translate_confluent(KafkaException(not_leader), settings).retriable
    invalid = KafkaError(KafkaError.POLICY_VIOLATION)
    assert not confluent_retriable(invalid)
    assert not translate_confluent(KafkaException(invalid), settings).retriable

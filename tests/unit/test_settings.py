"""Connection -> ClientSettings -> each client's config, and keeping secrets out of repr/logs."""

from __future__ import annotations

import json

import pytest
from airflow.sdk import Connection

from airflow_provider_kip848.hooks.connection import settings_from_connection
from airflow_provider_kip848.kafka.settings import ClientSettings, InvalidClientSettings


def test_plaintext_defaults_and_both_client_configs():
    s = ClientSettings(" b1:9092 , b2:9093 ")
    assert s.bootstrap_servers == "b1:9092,b2:9093"
    assert s.confluent_config() == {
        "bootstrap.servers": "b1:9092,b2:9093",
        "security.protocol": "PLAINTEXT",
        "client.id": "airflow-provider-kip848",
    }
    kp = s.kafka_python_config()
    assert kp["bootstrap_servers"] == ["b1:9092", "b2:9093"] and kp["security_protocol"] == "PLAINTEXT"


def test_sasl_scram_ssl_settings_reach_both_clients_and_are_redacted():
    s = ClientSettings(
        "b1:9094",
        security_protocol="sasl_ssl",
        sasl_mechanism="scram-sha-512",
        sasl_username="admin",
        sasl_password="s3cr3t-pw",
        ssl_cafile="/etc/ca.pem",
    )
    c = s.confluent_config()
    assert (c["security.protocol"], c["sasl.mechanism"], c["sasl.password"]) == ("SASL_SSL", "SCRAM-SHA-512", "s3cr3t-pw")
    assert c["ssl.ca.location"] == "/etc/ca.pem"
    k = s.kafka_python_config()
    assert (k["sasl_mechanism"], k["sasl_plain_password"], k["ssl_cafile"]) == ("SCRAM-SHA-512", "s3cr3t-pw", "/etc/ca.pem")
    assert "s3cr3t-pw" not in repr(s)
    assert "s3cr3t-pw" not in json.dumps(s.redacted())
    assert s.redacted()["sasl_password"] == "***"


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"bootstrap_servers": ""}, "not a comma-separated list of host:port"),
        ({"bootstrap_servers": "broker-without-port"}, "not a comma-separated list of host:port"),
        ({"bootstrap_servers": "b:9092", "security_protocol": "TLS"}, "is not one of PLAINTEXT, SSL"),
        ({"bootstrap_servers": "b:9092", "security_protocol": "SASL_SSL"}, "needs a SASL username and password"),
        (
            {"bootstrap_servers": "b:9092", "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
             "sasl_username": "u", "sasl_password": "p"},
            "SASL mechanism 'GSSAPI' is not one of",
        ),
    ],
)
def test_bad_settings_raise_a_clear_error(kwargs, fragment):
    with pytest.raises(InvalidClientSettings) as err:
        ClientSettings(**kwargs)
    assert fragment in str(err.value)
    assert "Fix the Kafka connection" in str(err.value)


def test_settings_from_airflow_connection_fields():
    conn = Connection(
        conn_id="k",
        conn_type="kafka_admin",
        host="b1:9092,b2:9092",
        login="alice",
        password="pw",
        extra=json.dumps({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                          "request_timeout_ms": "15000"}),
    )
    s = settings_from_connection(conn)
    assert s.bootstrap_servers == "b1:9092,b2:9092"
    assert (s.security_protocol, s.sasl_mechanism, s.sasl_username, s.sasl_password) == (
        "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "pw")
    assert s.request_timeout_ms == 15000


def test_settings_from_connection_single_host_uses_port_and_legacy_prefixed_extras():
    conn = Connection(conn_id="k", conn_type="kafka_admin", host="kafka.internal", port=19092,
                      extra=json.dumps({"extra__kafka_admin__security_protocol": "SSL",
                                        "extra__kafka_admin__ssl_check_hostname": "false"}))
    s = settings_from_connection(conn)
    assert s.bootstrap_servers == "kafka.internal:19092"
    assert s.security_protocol == "SSL" and s.ssl_check_hostname is False
    assert s.confluent_config()["ssl.endpoint.identification.algorithm"] == "none"


def test_connection_without_host_says_what_to_set():
    with pytest.raises(InvalidClientSettings, match="has no bootstrap servers. Set its Host"):
        settings_from_connection(Connection(conn_id="empty", conn_type="kafka_admin"))

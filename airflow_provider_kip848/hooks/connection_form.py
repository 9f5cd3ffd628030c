"""The ``kafka_admin`` connection type's form: its fields and their labels, with nothing heavy imported.

Why its own module: Airflow reads a provider's connection form at every start-up of every process (the
scheduler, each worker's task, the api-server) through ``get_provider_info``; importing the connection's
translation with it (:mod:`.connection`: the client settings, the CLI backend) cost each of them seconds
(issue 49). This module imports the light core only.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION
from airflow_provider_kip848.kafka.settings import MAX_REQUEST_TIMEOUT_MS

#: The longest ``cli_timeout`` (s): a day. A tool run that long is a hung tool; and past threading's TIMEOUT_MAX a
#: subprocess's timeout is an OverflowError inside the call.
MAX_CLI_TIMEOUT_S = 86_400
CONN_TYPE = "kafka_admin"
DEFAULT_CONN_ID = "kafka_admin_default"

#: JSON-schema form fields of the connection (stored in the connection's extra).
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "security_protocol": {
        "label": "Security protocol",
        "schema": {
            "type": ["string", "null"],
            "enum": ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
            "default": "PLAINTEXT",
        },
        "description": "How clients talk to the brokers (Kafka's security.protocol).",
    },
    "sasl_mechanism": {
        "label": "SASL mechanism",
        "schema": {"type": ["string", "null"], "enum": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", None]},
        "description": "For SASL_PLAINTEXT / SASL_SSL; username and password go in Login / Password.",
    },
    "ssl_cafile": {
        "label": "CA certificate file (PEM)",
        "schema": {"type": ["string", "null"]},
        "description": "Path on the worker to the CA bundle that signed the brokers' certificates.",
    },
    "ssl_certfile": {
        "label": "Client certificate file (PEM)",
        "schema": {"type": ["string", "null"]},
        "description": "For mutual TLS only.",
    },
    "ssl_keyfile": {
        "label": "Client key file (PEM)",
        "schema": {"type": ["string", "null"]},
        "description": "For mutual TLS only.",
    },
    "ssl_key_password": {
        "label": "Client key password",
        "schema": {"type": ["string", "null"], "format": "password"},
    },
    "ssl_check_hostname": {
        "label": "Verify broker host names",
        "schema": {"type": ["boolean", "null"], "default": True},
    },
    "request_timeout_ms": {
        "label": "Request timeout (ms)",
        "schema": {"type": ["integer", "null"], "minimum": 1000, "maximum": MAX_REQUEST_TIMEOUT_MS, "default": 30000},
        "description": "Every request's and admin call's timeout; at most 3,600,000 (an hour, librdkafka's limit).",
    },
    "client_bootstrap_servers": {
        "label": "Bootstrap servers the applications use",
        "schema": {"type": ["string", "null"]},
        "description": (
            "host:port[,host:port...] where the applications' clients connect, when not the Bootstrap servers "
            "above (a proxy or gateway in front of the brokers). The preflight reads the APIs advertised there "
            "and refuses a move whose protocol is not. Empty: the same as Bootstrap servers."
        ),
    },
    "kafka_home": {
        "label": "Kafka installation for the CLI tools",
        "schema": {"type": ["string", "null"]},
        "description": (
            "A Kafka directory with libs/ (as unpacked from the release tarball). Empty: the provider's "
            "own Maven-resolved jars of 'Kafka version for the CLI tools' are used."
        ),
    },
    "kafka_version": {
        "label": "Kafka version for the CLI tools",
        "schema": {"type": ["string", "null"], "default": DEFAULT_KAFKA_VERSION},
    },
    "cli_timeout": {
        "label": "CLI tool timeout (s)",
        "schema": {"type": ["integer", "null"], "minimum": 5, "maximum": MAX_CLI_TIMEOUT_S, "default": 120},
        "description": "Seconds before a Kafka CLI tool run is killed; at most 86,400 (a day).",
    },
    # the brokers' metrics (see docs/admin.md#broker-metrics)
    "metrics_url": {
        "label": "Broker metrics URLs (Prometheus)",
        "schema": {"type": ["string", "null"]},
        "description": (
            "Comma-separated, one per broker: each broker's Prometheus JMX exporter endpoint "
            "(http://broker1:7071/metrics,http://broker2:7071/metrics). Group counts by protocol and state and "
            "rebalance rates are read there. Empty: no broker metrics."
        ),
    },
    # change control of this cluster (see docs/change-control.md) and where its artifacts go
    "approvers": {
        "label": "Approvers of changes to this cluster",
        "schema": {"type": ["string", "null"]},
        "description": "Comma-separated Airflow user ids; a DAG run's own approvers Param takes precedence.",
    },
    "four_eyes": {
        "label": "Four-eyes rule",
        "schema": {"type": ["string", "null"], "enum": ["required", "default", None]},
        "description": "required: a run's Params cannot relax it (the triggering user never approves).",
    },
    "audit_log": {
        "label": "Audit log (path or URL)",
        "schema": {"type": ["string", "null"]},
        "description": "Where every change of this cluster is recorded; an ObjectStorage URL every worker reaches.",
    },
    "artifacts_url": {
        "label": "Artifacts location (snapshots, reports)",
        "schema": {"type": ["string", "null"]},
        "description": "An ObjectStorage URL (s3://conn@bucket/prefix ...) or a path every worker mounts; "
                       "each run writes its own folder. Default: $KIP848_ARTIFACTS_URL.",
    },
}

UI_FIELD_BEHAVIOUR: dict[str, Any] = {
    "hidden-fields": ["schema", "extra", "description"],
    "relabeling": {"host": "Bootstrap servers", "login": "SASL username", "password": "SASL password"},
    "placeholders": {
        "host": "broker1:9092,broker2:9092",
        "port": "9092 (used only if Bootstrap servers has no port; Airflow 3.3's Test button needs one)",
        "login": "only for SASL_PLAINTEXT / SASL_SSL",
    },
}


__all__ = ["CONN_FIELDS", "CONN_TYPE", "DEFAULT_CONN_ID", "MAX_CLI_TIMEOUT_S", "UI_FIELD_BEHAVIOUR"]

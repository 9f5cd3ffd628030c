"""The ``kafka_admin`` Airflow connection type and its translation to :class:`ClientSettings`.

Field layout (the Airflow UI form is declared in ``get_provider_info``):

* Host: the bootstrap servers, ``host:port[,host:port...]`` (Port is used only
  when Host names a single server without a port).
* Login / Password: the SASL username and password (SASL_* protocols).
* Extra fields: ``security_protocol``, ``sasl_mechanism``, ``ssl_cafile``,
  ``ssl_certfile``, ``ssl_keyfile``, ``ssl_key_password``,
  ``ssl_check_hostname``, ``request_timeout_ms``, ``client_bootstrap_servers`` (where the
  applications' clients connect, when a proxy stands in front of the brokers), the CLI settings
  ``kafka_home`` / ``kafka_version`` / ``cli_timeout``, the brokers' metrics
  endpoints ``metrics_url`` (comma-separated, one per broker), and the cluster's
  change control: ``approvers``, ``four_eyes``, ``audit_log``, ``artifacts_url``.

Extra keys are read plain (``security_protocol``) or with the legacy
``extra__kafka_admin__`` prefix older UIs wrote.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Connection

from airflow_provider_kip848.kafka.arguments import parse_flag, parse_number
from airflow_provider_kip848.kafka.cli.distribution import DEFAULT_KAFKA_VERSION
from airflow_provider_kip848.kafka.errors import InvalidClientSettings, Kip848Error
from airflow_provider_kip848.kafka.metrics import parse_metrics_urls
from airflow_provider_kip848.kafka.settings import MAX_REQUEST_TIMEOUT_MS, MIN_REQUEST_TIMEOUT_MS, ClientSettings

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


def extra_field(extra: dict[str, Any], name: str, default: Any = None) -> Any:  # Any: extras are any JSON
    for key in (name, f"extra__{CONN_TYPE}__{name}"):
        value = extra.get(key)
        if value not in (None, ""):
            return value
    return default


def settings_from_connection(conn: Connection) -> ClientSettings:
    """Build :class:`ClientSettings` from an Airflow ``Connection`` of type ``kafka_admin``."""
    extra = conn.extra_dejson or {}
    host = (conn.host or "").strip()
    if not host:
        raise InvalidClientSettings(
            f"Connection {conn.conn_id!r} has no bootstrap servers.",
            remedy="Set its Host to host:port[,host:port...].",
        )
    if ":" not in host and "," not in host:
        host = f"{host}:{conn.port or 9092}"
    try:
        return _settings(conn, extra, host)
    except InvalidClientSettings as exc:  # which connection: a worker has many
        if f"Connection {conn.conn_id!r}" in exc.what:
            raise
        raise InvalidClientSettings(f"Connection {conn.conn_id!r}: {exc.what}", remedy=exc.remedy) from exc


def _settings(conn: Any, extra: dict[str, Any], host: str) -> ClientSettings:
    return ClientSettings(
        bootstrap_servers=host,
        security_protocol=extra_field(extra, "security_protocol", "PLAINTEXT"),
        sasl_mechanism=extra_field(extra, "sasl_mechanism"),
        sasl_username=conn.login or None,
        sasl_password=conn.password if conn.password not in ("", None) else None,
        ssl_cafile=extra_field(extra, "ssl_cafile"),
        ssl_certfile=extra_field(extra, "ssl_certfile"),
        ssl_keyfile=extra_field(extra, "ssl_keyfile"),
        ssl_key_password=extra_field(extra, "ssl_key_password"),
        ssl_check_hostname=_flag(extra, "ssl_check_hostname", True, conn.conn_id),
        request_timeout_ms=_whole_ms(extra, "request_timeout_ms", 30000, conn.conn_id),
        client_bootstrap_servers=_text(extra, "client_bootstrap_servers"),
    )


def _text(extra: dict[str, Any], name: str) -> str | None:  # Any: extras are any JSON
    """A text extra; anything but text (a number, a list) is refused naming the extra."""
    value = extra_field(extra, name)
    if value is not None and not isinstance(value, str):
        raise InvalidClientSettings(f"extra {name} must be text (host:port[,host:port...]), not {value!r}.")
    return value


def metrics_urls_from_connection(conn: Connection) -> tuple[str, ...]:
    """The ``metrics_url`` extra of a ``kafka_admin`` connection as URLs (empty: the connection names none)."""
    value = extra_field(conn.extra_dejson or {}, "metrics_url")
    if isinstance(value, (list, tuple)):  # a JSON list in the extra reads the same as the comma-separated text
        value = ",".join(str(v) for v in value)
    try:
        return parse_metrics_urls(value if value is None else str(value))
    except Kip848Error as exc:
        raise InvalidClientSettings(f"Connection {conn.conn_id!r}, metrics_url: {exc.what}", remedy=exc.remedy) from exc


def _whole_ms(extra: dict[str, Any], name: str, default: int, conn_id: str) -> int:
    """A milliseconds extra as a whole number within :class:`ClientSettings`' bounds (``"30s"``, ``"2.5"``, ``NaN``
    or ``1e18`` is refused naming the connection and the extra, never read as something else)."""
    value = extra_field(extra, name, default)
    try:
        return int(parse_number(value, name, minimum=MIN_REQUEST_TIMEOUT_MS, maximum=MAX_REQUEST_TIMEOUT_MS,
                                integer=True) or 0)
    except Kip848Error as exc:
        raise InvalidClientSettings(f"Connection {conn_id!r}, extra {name}: {exc.what}",
                                    remedy=f"Set {name} to a whole number of milliseconds (e.g. 30000), without a "
                                           "unit, or leave it out.") from exc


def cli_timeout_from_extra(extra: dict[str, Any], conn_id: str, default: float = 120) -> float:  # Any: JSON extras
    """The ``cli_timeout`` extra in seconds (a number > 0, at most :data:`MAX_CLI_TIMEOUT_S`; ``"2m"``, ``0``,
    ``NaN`` or ``1e18`` is refused)."""
    value = extra_field(extra, "cli_timeout", default)
    try:
        seconds = float(parse_number(value, "cli_timeout", maximum=MAX_CLI_TIMEOUT_S) or 0.0)
    except Kip848Error as exc:
        raise InvalidClientSettings(f"Connection {conn_id!r}, extra cli_timeout: {exc.what}",
                                    remedy="Set cli_timeout to a number of seconds (e.g. 120), without a unit, or "
                                           "leave it out.") from exc
    if seconds <= 0:
        raise InvalidClientSettings(f"Connection {conn_id!r}, extra cli_timeout: must be more than 0 s, not {value!r}",
                                    remedy="Set cli_timeout to a number of seconds (e.g. 120), or leave it out.")
    return seconds


def _flag(extra: dict[str, Any], name: str, default: bool, conn_id: str) -> bool:
    try:
        return parse_flag(extra_field(extra, name, default), name)
    except Kip848Error as exc:
        raise InvalidClientSettings(f"Connection {conn_id!r}: {exc.what}", remedy="Set it to true or false.") from exc

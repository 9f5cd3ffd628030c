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

from airflow_provider_kip848.hooks.connection_form import (  # the form, re-exported with the type
    CONN_FIELDS as CONN_FIELDS,
)
from airflow_provider_kip848.hooks.connection_form import (
    CONN_TYPE,
    MAX_CLI_TIMEOUT_S,
)
from airflow_provider_kip848.hooks.connection_form import (
    DEFAULT_CONN_ID as DEFAULT_CONN_ID,
)
from airflow_provider_kip848.hooks.connection_form import (
    UI_FIELD_BEHAVIOUR as UI_FIELD_BEHAVIOUR,
)
from airflow_provider_kip848.kafka.arguments import parse_flag, parse_number
from airflow_provider_kip848.kafka.errors import InvalidClientSettings, Kip848Error
from airflow_provider_kip848.kafka.metrics import parse_metrics_urls
from airflow_provider_kip848.kafka.settings import MAX_REQUEST_TIMEOUT_MS, MIN_REQUEST_TIMEOUT_MS, ClientSettings


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

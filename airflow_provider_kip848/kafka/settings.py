"""One description of how to reach a cluster, turned into each client's config.

confluent-kafka (librdkafka) and kafka-python spell the same settings
differently; keeping one :class:`ClientSettings` and deriving both configs
from it means a connection edited in the Airflow UI reaches every backend the
same way. Secrets are held here and nowhere else: ``repr()`` and
:meth:`ClientSettings.redacted` never show them, and the CLI backend receives
them only through a private properties file, never argv.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidClientSettings

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The shortest request timeout a client is given: below it every request times out, and a timeout is
#: retriable, so a task would retry a setting that can never work.
MIN_REQUEST_TIMEOUT_MS = 100
#: The longest request timeout: librdkafka's admin calls take a request timeout of 0 to 3,600,000 ms (an hour;
#: ``rd_kafka_AdminOptions_set_request_timeout``), and the provider gives every admin call the connection's. Past
#: it confluent-kafka raises a bare ValueError inside the call, which Airflow would retry for ever.
MAX_REQUEST_TIMEOUT_MS = 3_600_000
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
REDACTED = "***"


@dataclass(frozen=True)
class ClientSettings:
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    client_id: str = "airflow-provider-kip848"
    request_timeout_ms: int = 30000
    #: where the applications' clients bootstrap, when not where the provider does (a proxy or gateway in front of
    #: the brokers): the preflight reads the APIs advertised there. None: the same as ``bootstrap_servers``.
    client_bootstrap_servers: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "bootstrap_servers", server_list(self.bootstrap_servers, "bootstrap servers"))
        if self.client_bootstrap_servers is not None:
            object.__setattr__(self, "client_bootstrap_servers",
                               server_list(self.client_bootstrap_servers, "client bootstrap servers"))
        proto = self.security_protocol.upper()
        if proto not in SECURITY_PROTOCOLS:
            raise InvalidClientSettings(
                f"security protocol {self.security_protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}."
            )
        object.__setattr__(self, "security_protocol", proto)
        timeout = self.request_timeout_ms
        if (isinstance(timeout, bool) or not isinstance(timeout, int)
                or not MIN_REQUEST_TIMEOUT_MS <= timeout <= MAX_REQUEST_TIMEOUT_MS):
            raise InvalidClientSettings(
                f"request_timeout_ms must be a whole number of milliseconds from {MIN_REQUEST_TIMEOUT_MS:,} to "
                f"{MAX_REQUEST_TIMEOUT_MS:,}, not {timeout!r}.",
                remedy="Set it to e.g. 30000 (30 s, the default), or leave it out.")
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, local_path(value, name))
        if self.uses_sasl:
            mech = (self.sasl_mechanism or "PLAIN").upper()
            if mech not in SASL_MECHANISMS:
                raise InvalidClientSettings(
                    f"SASL mechanism {self.sasl_mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}."
                )
            object.__setattr__(self, "sasl_mechanism", mech)
            if not self.sasl_username or self.sasl_password is None:
                raise InvalidClientSettings(f"{proto} needs a SASL username and password.")

    @property
    def clients_bootstrap(self) -> str:
        """Where the applications' clients bootstrap: ``client_bootstrap_servers``, else ``bootstrap_servers``."""
        return self.client_bootstrap_servers or self.bootstrap_servers

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def redacted(self) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
        """The settings for logs and reports: every secret replaced by ``***``."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for secret in ("sasl_password", "ssl_key_password"):
            if out[secret] is not None:
                out[secret] = REDACTED
        return out

    def confluent_config(self) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
        """librdkafka properties for confluent-kafka's AdminClient, Producer and Consumer."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "client.id": self.client_id,
        }
        if self.uses_sasl:
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_username
            conf["sasl.password"] = self.sasl_password
        if self.uses_ssl:
            if self.ssl_cafile:
                conf["ssl.ca.location"] = self.ssl_cafile
            if self.ssl_certfile:
                conf["ssl.certificate.location"] = self.ssl_certfile
            if self.ssl_keyfile:
                conf["ssl.key.location"] = self.ssl_keyfile
            if self.ssl_key_password is not None:
                conf["ssl.key.password"] = self.ssl_key_password
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.ssl_check_hostname else "none"
        return conf

    def java_client_properties(self) -> dict[str, str]:
        """Properties for the Kafka CLI tools' ``--command-config`` file (Java client names).

        The SASL password goes into ``sasl.jaas.config`` here, which the CLI
        backend writes to a private temporary file: never to argv or a log.
        PEM files are used directly (``ssl.truststore.type=PEM``); a client
        certificate and key are inlined as Kafka's PEM keystore expects.
        """
        props = {
            "security.protocol": self.security_protocol,
            "client.id": self.client_id,
            "request.timeout.ms": str(self.request_timeout_ms),
            # the whole call's budget, as the native backend's: an unreachable cluster fails in the same time
            "default.api.timeout.ms": str(self.request_timeout_ms),
        }
        if self.uses_sasl:
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if self.sasl_mechanism == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            props["sasl.mechanism"] = str(self.sasl_mechanism)
            props["sasl.jaas.config"] = (
                f'{module} required username="{jaas_escape(self.sasl_username or "")}" '
                f'password="{jaas_escape(self.sasl_password or "")}";'
            )
        if self.uses_ssl:
            if self.ssl_cafile:
                props["ssl.truststore.type"] = "PEM"
                props["ssl.truststore.location"] = self.ssl_cafile
            if self.ssl_certfile and self.ssl_keyfile:
                props["ssl.keystore.type"] = "PEM"
                props["ssl.keystore.certificate.chain"] = _read_text(self.ssl_certfile)
                props["ssl.keystore.key"] = _read_text(self.ssl_keyfile)
                if self.ssl_key_password is not None:
                    props["ssl.key.password"] = self.ssl_key_password
            props["ssl.endpoint.identification.algorithm"] = "https" if self.ssl_check_hostname else ""
        return props

    def kafka_python_config(self) -> dict[str, Any]:  # Any: JSON of several shapes (XCom, reports)
        """Keyword arguments for kafka-python's ``KafkaAdminClient``."""
        conf: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol,
            "client_id": self.client_id,
            "request_timeout_ms": self.request_timeout_ms,
            # without this an unreachable cluster blocks for kafka-python's own 30 s default
            "bootstrap_timeout_ms": self.request_timeout_ms,
            # reconnect to a restarted broker within a second, as the Java clients do (kafka-python's
            # default backs off up to 30 s, so a long-lived admin, e.g. a waiting trigger, lagged that much)
            "reconnect_backoff_max_ms": 1000,
        }
        if self.uses_sasl:
            conf["sasl_mechanism"] = self.sasl_mechanism
            conf["sasl_plain_username"] = self.sasl_username
            conf["sasl_plain_password"] = self.sasl_password
        if self.uses_ssl:
            conf["ssl_cafile"] = self.ssl_cafile
            conf["ssl_certfile"] = self.ssl_certfile
            conf["ssl_keyfile"] = self.ssl_keyfile
            conf["ssl_password"] = self.ssl_key_password
            conf["ssl_check_hostname"] = self.ssl_check_hostname
        return conf


def server_list(value: object, what: str) -> str:
    """``host:port[,host:port...]`` normalized (spaces and empty entries dropped); anything else is refused."""
    servers = [s.strip() for s in value.split(",") if s.strip()] if isinstance(value, str) else []
    if not servers or any(":" not in s or not s.rsplit(":", 1)[1].isdigit() for s in servers):
        raise InvalidClientSettings(f"{what} {value!r} are not a comma-separated list of host:port.")
    return ",".join(servers)


def local_path(value: object, name: str) -> str:
    """A path setting as the worker's file system reads it: ``~`` and ``~user`` expanded. A ``~user`` that names
    no user on the worker, an empty or a non-text value is :class:`InvalidClientSettings` (Python would raise a
    bare RuntimeError deep inside a client, or a client would look for a file literally named ``~user/...``)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidClientSettings(f"{name} must be a path on the worker, not {value!r}.",
                                    remedy=f"Set {name} to a file the worker can read, or leave it out.")
    if not value.startswith("~"):
        return value
    expanded = os.path.expanduser(value)
    if expanded.startswith("~"):
        user = value[1:].split("/", 1)[0]
        raise InvalidClientSettings(f"{name} {value!r} starts with ~{user}, but the worker has no user {user!r}.",
                                    remedy=f"Give {name} as an absolute path on the worker.")
    return expanded


def jaas_escape(value: str) -> str:
    """Quote a value for a JAAS option string (backslash and double quote are escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _read_text(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError as exc:
        raise InvalidClientSettings(f"Cannot read {path}: {exc.strerror}.") from exc


def java_properties_text(props: dict[str, str]) -> str:
    """Render properties in ``java.util.Properties`` syntax, escaping what Properties.load would misread."""
    lines = []
    for key, value in props.items():
        lines.append(f"{_prop_escape(key, is_key=True)}={_prop_escape(value)}")
    return "\n".join(lines) + "\n"


def _prop_escape(text: str, *, is_key: bool = False) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "=:" or (ch in "#!" and i == 0) or (ch == " " and (is_key or i == 0)):
            out.append("\\" + ch)
        elif not " " <= ch <= "~":
            # Properties.load(InputStream), which the tools use, reads ISO-8859-1: anything outside
            # printable ASCII goes as \uXXXX (UTF-16 code units), or a non-ASCII password arrives mangled
            units = ch.encode("utf-16-be")
            out.extend(f"\\u{int.from_bytes(units[j:j + 2], 'big'):04x}" for j in range(0, len(units), 2))
        else:
            out.append(ch)
    return "".join(out)


def redact(text: str, settings: ClientSettings) -> str:
    """``text`` with the connection's secrets replaced by ``***`` (client messages may echo a credential). Here,
    beside the settings, so that the CLI backend's runner need not load the native clients' error tables."""
    for secret in (settings.sasl_password, settings.ssl_key_password):
        if secret:
            text = text.replace(secret, "***")
    return text

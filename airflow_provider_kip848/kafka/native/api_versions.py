"""The APIs an address advertises, read with one ``ApiVersions`` request on a connection of its own.

The provider's own clients negotiate API versions with the brokers they reach; the applications may reach the
cluster another way (a proxy or gateway at ``client_bootstrap_servers``), and what *that* address advertises
decides whether a consumer on ``group.protocol=consumer`` can send ConsumerGroupHeartbeat at all. So the preflight
asks each of those addresses directly: a bare socket (TLS when the connection uses it), one ApiVersions v0 request,
which Kafka answers before any SASL authentication, so no credential is sent. Anything but a list of APIs (a
refused or closed connection, an error code, an answer without a single API) is recorded as the address's
``error``: nothing is known of it.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import replace

from airflow_provider_kip848.kafka.model import AdvertisedApis
from airflow_provider_kip848.kafka.settings import ClientSettings

API_VERSIONS_KEY = 18
#: the largest ApiVersions answer read (a 4.4 broker's v0 answer is under 1 KiB)
MAX_ANSWER_BYTES = 1 << 20


def advertised_apis(settings: ClientSettings) -> tuple[AdvertisedApis, ...]:
    """What each address of ``settings.clients_bootstrap`` advertises, in the order they are listed."""
    own = set(settings.bootstrap_servers.split(","))
    return tuple(replace(read_api_versions(address, settings), provider_uses=address in own)
                 for address in settings.clients_bootstrap.split(","))


def read_api_versions(address: str, settings: ClientSettings) -> AdvertisedApis:
    host, port = address.rsplit(":", 1)
    timeout = settings.request_timeout_ms / 1000
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw:
            conn = _tls(raw, host, settings) if settings.uses_ssl else raw
            client_id = settings.client_id.encode()
            request = struct.pack(">hhih", API_VERSIONS_KEY, 0, 1, len(client_id)) + client_id
            conn.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", _read(conn, 4))[0]
            if not 10 <= size <= MAX_ANSWER_BYTES:
                return AdvertisedApis(address, error=f"answered ApiVersions with a frame of {size} bytes, not an "
                                                     "ApiVersions answer")
            frame = _read(conn, size)
    except EOFError:
        return AdvertisedApis(address, error="closed the connection instead of answering ApiVersions")
    except (OSError, ValueError) as exc:
        return AdvertisedApis(address, error=f"could not be asked for its ApiVersions: {exc}")
    correlation, error_code, count = struct.unpack_from(">ihi", frame)
    if correlation != 1:
        return AdvertisedApis(address, error=f"answered ApiVersions with correlation id {correlation}, not 1")
    if error_code:
        return AdvertisedApis(address, error=f"answered ApiVersions with error code {error_code}")
    if count <= 0 or 10 + 6 * count > len(frame):
        return AdvertisedApis(address, error="answered ApiVersions without a single API" if count <= 0 else
                              f"answered ApiVersions with {count} APIs in {len(frame)} bytes (truncated)")
    apis = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", frame, 10 + 6 * i)
        apis[key] = (low, high)
    return AdvertisedApis(address, apis)


def _tls(raw: socket.socket, host: str, settings: ClientSettings) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=settings.ssl_cafile)
    if settings.ssl_certfile and settings.ssl_keyfile:
        context.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile, settings.ssl_key_password)
    if not settings.ssl_check_hostname:
        context.check_hostname = False
    return context.wrap_socket(raw, server_hostname=host)


def _read(conn: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)

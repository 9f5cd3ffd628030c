"""The node agent's kubelet API, the one part the API server calls: ``/containerLogs``, over HTTPS.

``kubectl logs`` and the Kubernetes controller's ``logs()`` (``read_namespaced_pod_log``) ask the API
server for ``pods/{pod}/log``; the API server does not read logs itself, it proxies the request to the kubelet
of the pod's node: ``GET https://{address}:{port}/containerLogs/{namespace}/{pod}/{container}`` with the
query ``tailLines``, ``limitBytes``, ``previous``, where the address is the Node's ``status.addresses`` entry of
the first type in ``--kubelet-preferred-address-types`` (InternalIP here: 127.0.0.1) and the port its
``status.daemonEndpoints.kubeletEndpoint.Port``. The API server presents its kubelet client certificate
(``--kubelet-client-certificate``) and verifies this server's certificate against
``--kubelet-certificate-authority``: both are signed by the control plane's CA (kube_control_plane.py), and this
server accepts only a client certificate of that CA whose common name is the API server's kubelet client.

What is served is what the container's process wrote: the agent sends each container's stdout and stderr to
``{container}.log`` in the pod's directory, one file across restarts, and records the file's size when each
incarnation starts (:class:`LogSpans`); the current container's log is the span from its start, ``previous`` the
span before it (a kubelet keeps the last terminated container's log, no older one); while a container waits to
restart, both are the span of the one that exited, as the kubelet answers. ``tailLines`` keeps the
last lines, then ``limitBytes`` the first bytes of that, as the kubelet does. ``follow``, ``timestamps``,
``sinceSeconds`` and ``sinceTime`` are refused (400, naming the parameter): the agent keeps no timestamps per
line, and an answer that ignored them would look like a real one.

Nothing in the product imports this module (see ``kip848_harness/__init__``).
"""

from __future__ import annotations

import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

#: the common name of the API server's kubelet client certificate (kube_control_plane.py issues it)
APISERVER_CLIENT_CN = "kube-apiserver-kubelet-client"
_PATH = re.compile(r"^/containerLogs/([^/]+)/([^/]+)/([^/]+)/?$")
_REFUSED = ("follow", "timestamps", "sinceSeconds", "sinceTime")


@dataclass
class LogSpans:
    """One container's log file and where each of its incarnations began in it (byte offsets)."""

    path: Path
    starts: list[int] = field(default_factory=list)
    running: bool = False

    def started(self) -> None:
        """A new incarnation is about to write (called before its process starts)."""
        self.starts.append(self.path.stat().st_size if self.path.exists() else 0)
        self.running = True

    def ended(self) -> None:
        """The current incarnation's process exited (it waits to restart, or the pod is done)."""
        self.running = False

    def read(self, *, previous: bool) -> bytes | None:
        """The current incarnation's bytes, or the last terminated one's (None: there is no such incarnation).
        As the kubelet: while a container waits to restart (CrashLoopBackOff), both are its exited one's log."""
        starts = list(self.starts)
        if not starts or (previous and self.running and len(starts) < 2):
            return None
        if not self.running:
            previous = False  # the last incarnation has terminated: it is the current log and the previous one
        begin = starts[-2] if previous else starts[-1]
        end = starts[-1] if previous else None
        with open(self.path, "rb") as f:
            f.seek(begin)
            return f.read() if end is None else f.read(end - begin)


def select(data: bytes, *, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """The kubelet's order: the last ``tail_lines`` lines, then the first ``limit_bytes`` of them."""
    if tail_lines is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[len(lines) - tail_lines:]) if tail_lines > 0 else b""
    if limit_bytes is not None:
        data = data[:limit_bytes]
    return data


#: (namespace, pod, container) -> its spans, or None when this node runs no such pod or container
Lookup = Callable[[str, str, str], "LogSpans | None"]


def _handler(lookup: Lookup) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

        def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
            subject: Any = (peer or {}).get("subject", ())  # Any: ssl's nested tuples of (name, value) pairs
            names = [value for rdn in subject for key, value in rdn if key == "commonName"]
            if names != [APISERVER_CLIENT_CN]:
                self._send(403, f"forbidden: client {names} is not the API server's kubelet client\n".encode())
                return
            url = urlsplit(self.path)
            match = _PATH.match(url.path)
            if not match:
                self._send(404, f"the node agent serves only /containerLogs, not {url.path}\n".encode())
                return
            namespace, pod, container = (unquote(g) for g in match.groups())
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            refused = [k for k in _REFUSED if k in query and query[k] not in ("", "false", "0")]
            if refused:
                self._send(400, f"the kip848 node agent does not support {', '.join(refused)} on a log\n".encode())
                return
            try:
                tail = int(query["tailLines"]) if "tailLines" in query else None
                limit = int(query["limitBytes"]) if "limitBytes" in query else None
            except ValueError as exc:
                self._send(400, f"bad query: {exc}\n".encode())
                return
            spans = lookup(namespace, pod, container)
            if spans is None:
                self._send(404, f'container "{container}" in pod "{pod}" (namespace {namespace}) is not running '
                                f"on this node\n".encode())
                return
            previous = query.get("previous") in ("true", "1")
            data = spans.read(previous=previous)
            if data is None:
                self._send(400, (f'previous terminated container "{container}" in pod "{pod}" not found\n'
                                 if previous else f'container "{container}" in pod "{pod}" has not started\n')
                           .encode())
                return
            self._send(200, select(data, tail_lines=tail, limit_bytes=limit))

    return Handler


class LogServer:
    """The HTTPS server on 127.0.0.1 and a free port, in a daemon thread of the agent."""

    def __init__(self, lookup: Lookup, *, cert_file: str, key_file: str, client_ca_file: str,
                 host: str = "127.0.0.1") -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        context.load_verify_locations(client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED  # the API server's client certificate, of the plane's CA
        self.server = ThreadingHTTPServer((host, 0), _handler(lookup))
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])

    def start(self) -> LogServer:
        threading.Thread(target=self.server.serve_forever, name="kubelet-logs", daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


__all__ = ["APISERVER_CLIENT_CN", "LogServer", "LogSpans", "select"]

"""A Kafka-protocol proxy in front of real brokers that hides chosen APIs, as a gateway does.

Kafka gateways and proxies (Conduktor Gateway: KIP-848 support is off by default) answer the clients'
``ApiVersions`` themselves and leave out the APIs they do not forward: a consumer switched to
``group.protocol=consumer`` then fails with UnsupportedVersion although the brokers behind it support
ConsumerGroupHeartbeat. This proxy reproduces that in the tests, as a process of its own
(``python -m kip848_harness.kafka_proxy``; :class:`KafkaProxy` starts and stops it):

* every request is forwarded to the broker unchanged and every answer returned, in order;
* the answer to ``ApiVersions`` (API key 18, every version) has the ``--drop`` API keys removed
  (``--api-versions empty``: no API at all; ``close``: the connection is closed instead of answered);
* the brokers' addresses in ``Metadata`` (3), ``FindCoordinator`` (10) and ``DescribeCluster`` (60) answers
  are replaced by the proxy's, so clients stay on the proxy after bootstrapping, as behind a gateway.
  The proxy listens on the brokers' host, so only the port changes (the 4-byte port that follows the
  host's string): every such answer keeps its size.

One listening port per broker (``--route BROKER_PORT:PROXY_PORT``, repeated).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kip848_harness.errors import LocalKafkaError
from kip848_harness.kafka_process import free_port, port_open
from kip848_harness.processes import die_with_parent, send_signal

API_VERSIONS, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 18, 3, 10, 60
#: the answers that name brokers' addresses
ADDRESS_ANSWERS = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
MODES = ("drop", "empty", "close")


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _put_uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def rewrite_api_versions(body: bytes, version: int, drop: frozenset[int], *, empty: bool = False) -> bytes:
    """An ApiVersions answer's body (after the correlation id) without the ``drop`` keys (``empty``: without any).

    v0-v2: ``error_code int16, api_keys [int16 key, int16 min, int16 max] (int32 count), ...``; v3+ (flexible):
    the array's count is an unsigned varint (count + 1) and each entry ends with its tagged fields. What follows the
    array (throttle time, supported and finalized features) is copied unchanged."""
    error = body[:2]
    pos = 2
    flexible = version >= 3
    if flexible:
        count, pos = _uvarint(body, pos)
        count -= 1
    else:
        (count,) = struct.unpack_from(">i", body, pos)
        pos += 4
    kept: list[bytes] = []
    for _ in range(max(count, 0)):
        start = pos
        (key,) = struct.unpack_from(">h", body, pos)
        pos += 6
        if flexible:
            tags, pos = _uvarint(body, pos)
            for _tag in range(tags):
                _, pos = _uvarint(body, pos)
                size, pos = _uvarint(body, pos)
                pos += size
        if not empty and key not in drop:
            kept.append(body[start:pos])
    head = _put_uvarint(len(kept) + 1) if flexible else struct.pack(">i", len(kept))
    return error + head + b"".join(kept) + body[pos:]


def rewrite_addresses(body: bytes, host: str, routes: Mapping[int, int]) -> bytes:
    """``host`` followed by a broker's port, replaced by ``host`` followed by the proxy's port for that broker."""
    name = host.encode()
    for broker_port, proxy_port in routes.items():
        body = body.replace(name + struct.pack(">i", broker_port), name + struct.pack(">i", proxy_port))
    return body


@dataclass
class ProxyConfig:
    host: str
    routes: dict[int, int]  # broker port -> proxy port
    drop: frozenset[int] = frozenset()
    mode: str = "drop"
    counts: dict[str, int] = field(default_factory=lambda: {"connections": 0, "api_versions": 0})


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


async def _serve(config: ProxyConfig, broker_port: int, client_r: asyncio.StreamReader,
                 client_w: asyncio.StreamWriter) -> None:
    config.counts["connections"] += 1
    try:
        broker_r, broker_w = await asyncio.open_connection(config.host, broker_port)
    except OSError:
        client_w.close()
        return
    pending: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
    closing = asyncio.Event()

    async def requests() -> None:
        try:
            while True:
                frame = await _read_frame(client_r)
                key, version, correlation = struct.unpack_from(">hhi", frame)
                if key == API_VERSIONS:
                    config.counts["api_versions"] += 1
                    if config.mode == "close":
                        return
                pending[correlation] = (key, version)
                broker_w.write(struct.pack(">i", len(frame)) + frame)
                await broker_w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            closing.set()

    async def answers() -> None:
        try:
            while True:
                frame = await _read_frame(broker_r)
                (correlation,) = struct.unpack_from(">i", frame)
                key, version = pending.pop(correlation, (-1, -1))
                if key == API_VERSIONS:
                    # ApiVersions answers always carry header v0 (no tagged fields), whatever their version
                    body = rewrite_api_versions(frame[4:], version, config.drop, empty=config.mode == "empty")
                    frame = frame[:4] + body
                elif key in ADDRESS_ANSWERS:
                    frame = rewrite_addresses(frame, config.host, config.routes)
                client_w.write(struct.pack(">i", len(frame)) + frame)
                await client_w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            closing.set()

    tasks = [asyncio.create_task(requests()), asyncio.create_task(answers())]
    await closing.wait()
    for task in tasks:
        task.cancel()
    for writer in (client_w, broker_w):
        writer.close()


async def run_proxy(config: ProxyConfig) -> None:
    servers = []
    for broker_port, proxy_port in config.routes.items():
        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter, port: int = broker_port) -> None:
            await _serve(config, port, r, w)

        servers.append(await asyncio.start_server(handle, config.host, proxy_port))
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


class KafkaProxy:
    """The proxy as a process of its own in front of ``bootstrap_servers`` (one listening port per broker, all on
    the brokers' host); :attr:`bootstrap_servers` is what clients are given instead. ``drop``: the API keys hidden
    from ApiVersions; ``mode`` ``empty`` answers ApiVersions with no API at all, ``close`` closes the connection."""

    def __init__(self, bootstrap_servers: str, *, drop: Iterable[int] = (), mode: str = "drop",
                 log_path: Path | str | None = None) -> None:
        if mode not in MODES:
            raise LocalKafkaError(f"Unknown proxy mode {mode!r}.", remedy=f"Use one of {', '.join(MODES)}.")
        addresses = [a.rsplit(":", 1) for a in bootstrap_servers.split(",")]
        hosts = {h for h, _ in addresses}
        if len(hosts) != 1:
            raise LocalKafkaError(f"The brokers {bootstrap_servers} are on several hosts.",
                                  remedy="The proxy listens on the brokers' one host (only ports are rewritten).")
        self.host = hosts.pop()
        taken: set[int] = set()
        self.routes: dict[int, int] = {}
        for _, port in addresses:
            self.routes[int(port)] = free_port(self.host, avoid=taken | {int(p) for _, p in addresses})
            taken.add(self.routes[int(port)])
        self.drop = frozenset(drop)
        self.mode = mode
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{p}" for p in self.routes.values())

    def command(self) -> list[str]:
        argv = [sys.executable, "-m", "kip848_harness.kafka_proxy", "--host", self.host, "--mode", self.mode]
        for broker_port, proxy_port in self.routes.items():
            argv += ["--route", f"{broker_port}:{proxy_port}"]
        if self.drop:
            argv += ["--drop", ",".join(str(k) for k in sorted(self.drop))]
        return argv

    def start(self, timeout: float = 30.0) -> KafkaProxy:
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 - the child's
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        preexec_fn=die_with_parent, env={**os.environ})
        deadline = time.monotonic() + timeout
        while not all(port_open(self.host, p) for p in self.routes.values()):
            if self.process.poll() is not None:
                raise LocalKafkaError(f"The Kafka proxy exited with {self.process.returncode} at start.")
            if time.monotonic() > deadline:
                self.stop()
                raise LocalKafkaError(f"The Kafka proxy did not listen on {self.bootstrap_servers} within {timeout} s.")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        send_signal(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            send_signal(process.pid, signal.SIGKILL)
            process.wait(10)

    def __enter__(self) -> KafkaProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _routes(values: Sequence[str]) -> dict[int, int]:
    out = {}
    for value in values:
        broker, proxy = value.split(":")
        out[int(broker)] = int(proxy)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kip848_harness.kafka_proxy", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--route", action="append", required=True, help="BROKER_PORT:PROXY_PORT (repeat per broker)")
    parser.add_argument("--drop", default="", help="API keys hidden from ApiVersions, comma-separated (68,69)")
    parser.add_argument("--mode", choices=MODES, default="drop")
    args = parser.parse_args(argv)
    drop = frozenset(int(k) for k in args.drop.split(",") if k.strip())
    config = ProxyConfig(args.host, _routes(args.route), drop, args.mode)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        asyncio.run(run_proxy(config))
    except (KeyboardInterrupt, SystemExit):
        pass


if __name__ == "__main__":
    main()

"""The client library and release each instance of an application runs, and the preflight's verdict on it.

The consumer protocol has a first production-ready release per client family (the Java consumer 4.0,
librdkafka 2.12), the streams protocol one of Kafka Streams (4.2), and static members in a streams group
need Kafka Streams 4.4 (KAFKA-20169). A release *declared* by the run (its Params) or by the platform's
registry entry says what the team believes is deployed; an instance built against an older library passes
such a check and fails after the switch (UnsupportedVersionException, or a classic join where a consumer one
was meant). So each instance's release is read, in this order, from:

1. **the instance's log at start**, what the client library itself prints when it is created:

   * the Java clients (every ``KafkaConsumer``, ``KafkaProducer``, ``Admin``, and so every client of a Kafka
     Streams application): ``AppInfoParser`` logs ``Kafka version: 3.9.1`` (then ``Kafka commitId: ...``,
     ``Kafka startTimeMs: ...``) at INFO, whatever the log layout around the message; in 4.4 the class moved to
     ``org.apache.kafka.common.utils.internals``, the message did not. Confluent Platform's builds say
     ``7.9.0-ccs`` / ``8.0.0-ce``: their Apache Kafka release is read from a table of known ones (7.x is 3.x,
     8.0 is 4.0, 8.1 is 4.1); another one is unknown, never its number taken for Apache Kafka's;
   * Kafka Streams: ``KafkaStreams`` logs ``Kafka Streams version: 4.2.1`` when it is built; it marks the
     instance as a Streams application, and its release is the Streams library's (its clients are the same
     release in every Kafka distribution);
   * librdkafka (confluent-kafka and the other bindings): the library prints nothing at start unless
     ``debug`` is set, then ``librdkafka v2.16.0 (0x21000ff) rdkafka#consumer-1 initialized ...``; an
     application's own start banner naming ``librdkafka 2.16.0`` (``confluent_kafka.libversion()``) is read
     the same way. A librdkafka application that prints neither is unknown from its log;

2. **the controller's** ``config()``: the client library and release the platform's registry entry declares
   for the application (one for every instance);
3. **the run's Params** (``client``, ``client_version``).

Each :class:`InstanceRelease` says which one it came from. What none of them says is unknown, with why, and
unknown is never a pass: the preflight warns (shown in the approval, ``fail_on_warn`` makes it refuse).

The brokers' view of a connection (KIP-511: ``ClientSoftwareName``/``ClientSoftwareVersion`` in the
client's ApiVersions request) is not a source here: a 4.x broker keeps it on the connection and exposes it
only as tags of aggregate metrics (``kafka.server:type=socket-server-metrics`` connection counts per listener
and network thread, request metrics tagged with the client software) with no client id and no address, and
in the request log at DEBUG; none pairs a release with an instance.

No I/O: the controller operator reads the logs, the preflight operator hands this module what was read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from airflow_provider_kip848.kafka.rules.lint import MIN_CLIENT_RELEASE
from airflow_provider_kip848.kafka.rules.preflight_model import FAIL, PASS, WARN, Check

#: the client families a release is judged for
JAVA, LIBRDKAFKA = "java", "librdkafka"
#: where a release came from, in the order they are asked
FROM_LOG, FROM_CONTROLLER, FROM_PARAMS = "the instance's log", "the controller's config", "the run's Params"
#: the first production-ready release of each protocol, per client family (the lint's table: one source)
MINIMUM = MIN_CLIENT_RELEASE
#: Kafka Streams' first release that runs static members on the streams protocol (KAFKA-20169)
STREAMS_STATIC_MINIMUM = (4, 4)
#: Confluent Platform releases (``-ccs``/``-ce`` builds of kafka-clients) -> the Apache Kafka release line
#: they ship; a Confluent release outside this table is unknown
CONFLUENT_LINES: dict[tuple[int, int], tuple[int, ...]] = {
    **{(7, minor): (3, minor) for minor in range(10)}, (8, 0): (4, 0), (8, 1): (4, 1)}
#: how much of a log line is kept as evidence
EVIDENCE_CHARS = 160

_VERSION = r"v?(\d+)\.(\d+)(?:\.(\d+))?([-.][0-9A-Za-z.-]+)?"
_JAVA_LINE = re.compile(r"\bKafka version: " + _VERSION)
_STREAMS_LINE = re.compile(r"\bKafka Streams version: " + _VERSION)
_RDKAFKA_LINE = re.compile(r"\blibrdkafka(?:[ _-]?version)?[\s:=('\"]*" + _VERSION)


@dataclass(frozen=True)
class LogRelease:
    """What one instance's log says it runs (``library`` None: the log names no client release, ``reason``
    says so; ``releases_seen`` every distinct release the log named, oldest first)."""

    library: str | None
    version: str | None = None
    streams: bool = False
    evidence: str = ""
    reason: str = ""
    releases_seen: tuple[str, ...] = ()


def _version(match: re.Match[str]) -> str:
    major, minor, patch, suffix = match.groups()
    return f"{major}.{minor}" + (f".{patch}" if patch is not None else "") + (suffix or "")


def release_from_log(lines: Iterable[str]) -> LogRelease:
    """The client library and release a log names (the last one it names: a log that holds several starts
    ends with the running one). A Kafka Streams line wins over its clients' lines; the Java clients' over
    librdkafka's only when both appear (an application with both libraries is judged by the one that
    prints later)."""
    found: list[tuple[str, str, bool, str]] = []
    streams_seen = False
    for raw in lines:
        line = raw.strip()
        if (m := _STREAMS_LINE.search(line)) is not None:
            streams_seen = True
            found.append((JAVA, _version(m), True, _evidence(line, m)))
        elif (m := _JAVA_LINE.search(line)) is not None:
            found.append((JAVA, _version(m), False, _evidence(line, m)))
        elif (m := _RDKAFKA_LINE.search(line)) is not None:
            found.append((LIBRDKAFKA, _version(m), False, _evidence(line, m)))
    if not found:
        return LogRelease(None, reason="its log names no client release (no 'Kafka version:' line of the Java "
                                       "clients, no 'Kafka Streams version:', no librdkafka version)")
    seen = tuple(dict.fromkeys(f"{lib} {ver}" for lib, ver, _s, _l in found))
    candidates = [f for f in found if f[2]] or found  # a Streams application: its library's own line
    library, version, _streams, line = candidates[-1]
    return LogRelease(library, version, streams_seen, line, releases_seen=seen)


def _evidence(line: str, match: re.Match[str]) -> str:
    """The line as evidence: whole when short, else from the release's message on (a log layout's prefix, a
    thread or client name, can be long)."""
    return line if len(line) <= EVIDENCE_CHARS else line[match.start():match.start() + EVIDENCE_CHARS]


def parse_release(text: str | None) -> tuple[int, ...] | None:
    """A release as Apache Kafka's (or librdkafka's) numbers; None when it is not one: a Confluent Platform
    build outside :data:`CONFLUENT_LINES`, or text that is no release."""
    m = re.fullmatch(r"\s*" + _VERSION + r"\s*", str(text or ""))
    if m is None:
        return None
    numbers = tuple(int(x) for x in m.groups()[:3] if x is not None)
    suffix = (m.group(4) or "").lower()
    if suffix.startswith(("-ccs", "-ce")):
        line = CONFLUENT_LINES.get((numbers[0], numbers[1]))
        return None if line is None else line + numbers[2:]
    return numbers


@dataclass(frozen=True)
class InstanceRelease:
    """The release one instance runs and where it came from (``version`` None: unknown, ``reason`` says why;
    ``instance`` is ``(the application)`` when no controller names instances)."""

    instance: str
    library: str | None
    version: str | None
    source: str
    streams: bool = False
    evidence: str = ""
    reason: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> InstanceRelease:
        return cls(instance=str(data.get("instance") or ""), library=_text(data.get("library")),
                   version=_text(data.get("version")), source=str(data.get("source") or ""),
                   streams=bool(data.get("streams")), evidence=str(data.get("evidence") or ""),
                   reason=str(data.get("reason") or ""))

    def describe(self) -> str:
        if self.version is None:
            return f"{self.instance}: unknown ({self.reason})"
        what = f"{'Kafka Streams' if self.streams else self.library or 'client'} {self.version}"
        where = self.source + (f": {self.evidence!r}" if self.evidence else "")
        return f"{self.instance}: {what} ({where})" + (f"; not from its log: {self.reason}" if self.reason else "")


def _text(value: object) -> str | None:
    return None if value in (None, "", "None") else str(value)


def resolve_releases(logs: Sequence[Mapping[str, object]] | None, *,
                     config_client: str | None = None, config_version: str | None = None,
                     config_source: str = "", declared_client: str | None = None,
                     declared_version: str | None = None, no_instances: str = "") -> tuple[InstanceRelease, ...]:
    """Each instance's release from the first source that names one: its log (``logs``: one mapping per
    instance, ``{instance, library, version, streams, evidence, reason, source}`` as the controller operator
    read it; None: no controller names instances, ``no_instances`` says why), the controller's config, the run's
    Params."""
    fallback = _fallback(config_client, config_version, config_source, declared_client, declared_version)
    if not logs:
        why = ((no_instances or "no application controller names the instances") if logs is None else
               "the controller reports no instance running")
        return (_instance("(the application)", fallback, why),)
    out = []
    for entry in logs:
        name = str(entry.get("instance") or "")
        if _text(entry.get("version")) is not None:
            out.append(InstanceRelease(name, _text(entry.get("library")), _text(entry.get("version")), FROM_LOG,
                                       bool(entry.get("streams")), str(entry.get("evidence") or "")))
        else:
            out.append(_instance(name, fallback, str(entry.get("reason") or "its log was not read")))
    return tuple(out)


def _fallback(config_client: str | None, config_version: str | None, config_source: str,
              declared_client: str | None, declared_version: str | None) -> tuple[str | None, str | None, str]:
    if _text(config_version) is not None:
        return _text(config_client), _text(config_version), FROM_CONTROLLER + (f" ({config_source})"
                                                                             if config_source else "")
    if _text(declared_version) is not None:
        return _text(declared_client), _text(declared_version), FROM_PARAMS
    return None, None, ""


def _instance(name: str, fallback: tuple[str | None, str | None, str], why: str) -> InstanceRelease:
    library, version, source = fallback
    if version is None:
        return InstanceRelease(name, None, None, "", reason=f"{why}; neither the controller's config nor the "
                                                           "run's Params declare a release")
    return InstanceRelease(name, library, version, source, reason=why)


def check_client_releases(releases: Sequence[InstanceRelease], target: str, *,
                          static_members: bool = False) -> Check | None:
    """``client_release``: every instance runs a client release that speaks ``target`` (None: a target with
    no minimum, classic). Fails naming each instance below the minimum (or on librdkafka for streams) with its
    release and where it was read; warns when some are unknown (never a pass); ``static_members``: the
    application runs with a ``group.instance.id`` (streams: Kafka Streams 4.4 needed)."""
    if target not in ("consumer", "streams"):
        return None
    below, unknown, fine = [], [], []
    for r in releases:
        problem = _below(r, target, static_members)
        if r.version is None:
            unknown.append(r.describe())
        elif problem == "unknown":
            unknown.append(f"{r.describe()}: unknown ({_unknown_why(r)})")
        elif problem:
            below.append(f"{r.describe()}: {problem}")
        else:
            fine.append(r.describe())
    if below:
        return Check("client_release", FAIL, "; ".join(below + fine + unknown),
                     f"Upgrade the named instances' client library before switching to group.protocol={target} "
                     "(a declared release does not count where an instance's own log says otherwise).")
    if unknown:
        return Check("client_release", WARN, "; ".join(unknown + fine),
                     "Not judged for the instances whose release is unknown: make them log their client release "
                     "at start (the Java clients and Kafka Streams do at INFO; a librdkafka application: print "
                     "librdkafka's version, or set debug=generic), report it through the controller's config "
                     "(client, client_version), or declare it in the run's Params.")
    if not releases:
        return Check("client_release", WARN, "no instance to judge (the controller reports none running)",
                     "Start the application, or declare the client release in the run's Params.")
    return Check("client_release", PASS, "; ".join(fine))


def _unknown_why(r: InstanceRelease) -> str:
    if parse_release(r.version) is None:
        return (f"{r.version} is a Confluent Platform build outside the known lines" if "-c" in str(r.version)
                else f"{r.version!r} is not a release")
    return f"client library {r.library!r} is neither java nor librdkafka"


def _below(r: InstanceRelease, target: str, static_members: bool) -> str:
    """Why ``r`` cannot run ``target`` ("" when it can; "unknown" when its version is no release)."""
    numbers = parse_release(r.version)
    if numbers is None:
        return "unknown"
    library = r.library or (JAVA if r.streams else None)
    if target == "streams" and library == LIBRDKAFKA:
        return "the streams protocol is spoken by Kafka Streams (Java) only"
    if library not in (JAVA, LIBRDKAFKA):
        return "unknown"
    minimum = MINIMUM.get((library, target))
    if minimum is not None and numbers < minimum[0]:
        return f"predates {minimum[1]}"
    if target == "streams" and static_members and numbers < STREAMS_STATIC_MINIMUM:
        return "Kafka Streams before 4.4 refuses static membership (group.instance.id) on the streams protocol"
    return ""


__all__ = ["CONFLUENT_LINES", "FROM_CONTROLLER", "FROM_LOG", "FROM_PARAMS", "JAVA", "LIBRDKAFKA", "MINIMUM",
           "InstanceRelease", "LogRelease", "check_client_releases", "parse_release", "release_from_log",
           "resolve_releases"]

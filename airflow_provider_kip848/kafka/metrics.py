"""The group coordinator's own figures, read from each broker's Prometheus JMX exporter.

The migration guides ask operators to watch, during and after a migration, how
many groups use each protocol, the streams groups by state, and the rebalance
rate and count. The brokers publish these as JMX metrics; most deployments
expose them over HTTP with the Prometheus JMX exporter. This module fetches
that text from one URL per broker (:func:`read_group_metrics`), parses the
exposition format (:func:`parse_prometheus_text`), picks the group
coordinator's values (:func:`node_group_metrics`) and sums them over the
brokers (:func:`combine`) into a :class:`GroupMetricsSample`.

What is read, by JMX name (Kafka 4.3.1) and the exporter's default name::

    kafka.server:type=group-coordinator-metrics,protocol=<p>  group-count
        kafka_server_group_coordinator_metrics_group_count{protocol="classic|consumer|streams|share"}
    kafka.server:type=group-coordinator-metrics,state=<s>     consumer-group-count, streams-group-count
        kafka_server_group_coordinator_metrics_consumer_group_count{state="Stable|..."}
        kafka_server_group_coordinator_metrics_streams_group_count{state="Stable|NotReady|..."}
    kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups<State>  Value   (classic groups)
        kafka_coordinator_group_GroupMetadataManager_Value{name="NumGroupsStable|..."}
    kafka.server:type=group-coordinator-metrics  consumer-group-rebalance-rate/-count,
        streams-group-rebalance-rate/-count, group-completed-rebalance-rate/-count (classic groups)
        kafka_server_group_coordinator_metrics_consumer_group_rebalance_rate ...

Names are matched case-insensitively and with or without the ``_total`` suffix
an exporter adds to counters. Every group is counted by its coordinator only,
and every rebalance by the coordinator of its group, so summing the brokers is
correct for each of these values. A value no broker exposes is ``None`` (a dict
without that key), never 0; a cluster-wide value is ``None`` unless every
broker exposes it (a sum over some brokers would undercount).

Two properties of the brokers to keep in mind when watching them: the group
counts are refreshed by a timer of the coordinator every 60 s (Kafka 4.x,
not configurable), so a new or deleted group shows up within a minute; the
rebalance counts are cumulative since each broker started and the rates are
per second over the broker's metrics window (``metrics.sample.window.ms`` x
``metrics.num.samples``, 30 s x 2 by default). Compare two samples of the same
brokers, not counts across a broker restart.

This module imports nothing from Airflow.
"""

from __future__ import annotations

import http.client
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from airflow_provider_kip848.kafka.errors import InvalidArgument, MetricsUnavailable, MetricsUnreadable

#: Seconds to wait for one endpoint (connect and read).
DEFAULT_TIMEOUT = 10.0
#: A broker's whole JMX set is a few MB in Prometheus text; anything far larger is not an exporter.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024

_COORDINATOR = "kafka_server_group_coordinator_metrics_"
GROUP_COUNT = _COORDINATOR + "group_count"
CONSUMER_GROUP_COUNT = _COORDINATOR + "consumer_group_count"
STREAMS_GROUP_COUNT = _COORDINATOR + "streams_group_count"
CLASSIC_GROUP_GAUGES = "kafka_coordinator_group_groupmetadatamanager_value"
#: field of :class:`GroupMetrics` -> the exporter's name of that rebalance value (lower case)
REBALANCE_METRICS: dict[str, str] = {
    "classic_rebalance_rate": _COORDINATOR + "group_completed_rebalance_rate",
    "classic_rebalance_count": _COORDINATOR + "group_completed_rebalance_count",
    "consumer_rebalance_rate": _COORDINATOR + "consumer_group_rebalance_rate",
    "consumer_rebalance_count": _COORDINATOR + "consumer_group_rebalance_count",
    "streams_rebalance_rate": _COORDINATOR + "streams_group_rebalance_rate",
    "streams_rebalance_count": _COORDINATOR + "streams_group_rebalance_count",
}


# -- the exposition format ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSample:
    """One line of Prometheus text: ``name{label="value",...} value [timestamp]``."""

    name: str
    labels: Mapping[str, str]
    value: float


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def parse_prometheus_text(text: str, *, source: str = "the metrics endpoint") -> list[MetricSample]:
    """Every sample of a Prometheus text exposition (format 0.0.4; OpenMetrics lines read the same way).

    Comments (``# HELP``, ``# TYPE``, ``# EOF``) and blank lines are skipped;
    ``NaN`` and ``+Inf`` are kept as floats; a timestamp or an exemplar after
    the value is ignored. A line that is not a sample is
    :class:`MetricsUnreadable` naming ``source`` and the line number.
    """
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            samples.append(_parse_line(stripped))
        except ValueError as exc:
            shown = stripped if len(stripped) <= 80 else stripped[:77] + "..."
            raise MetricsUnreadable(f"{source} did not answer with Prometheus text: line {number} ({shown!r}) "
                                    f"is not a sample ({exc}).") from None
    return samples


def _parse_line(line: str) -> MetricSample:
    match = _NAME.match(line)
    if not match:
        raise ValueError("no metric name")
    name, pos = match.group(0), match.end()
    labels: dict[str, str] = {}
    after_name = len(line) - len(line[pos:].lstrip(" \t"))  # tokens may be separated by blanks and tabs
    if after_name < len(line) and line[after_name] == "{":
        labels, pos = _parse_labels(line, after_name + 1)
    rest = line[pos:]
    if rest and rest[0] not in " \t":
        raise ValueError("no blank before the value")
    parts = rest.split()
    if not parts:
        raise ValueError("no value")
    try:
        value = float(parts[0])
    except ValueError:
        raise ValueError(f"{parts[0]!r} is not a number") from None
    return MetricSample(name, labels, value)


def _parse_labels(line: str, pos: int) -> tuple[dict[str, str], int]:
    """The labels from just after ``{`` up to and including ``}``; returns them and the position after ``}``."""
    labels: dict[str, str] = {}
    while True:
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == "}":
            return labels, pos + 1
        match = _LABEL_NAME.match(line, pos)
        if not match:
            raise ValueError("a malformed label")
        value, pos = _label_value(line, match.end())
        labels[match.group(1)] = value
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos < len(line) and line[pos] == ",":
            pos += 1
        elif not (pos < len(line) and line[pos] == "}"):
            raise ValueError("labels not closed by '}'")


def _label_value(line: str, pos: int) -> tuple[str, int]:
    """A label value from just after its opening quote; returns it and the position after the closing quote."""
    out = []
    while pos < len(line):
        char = line[pos]
        if char == "\\" and pos + 1 < len(line):
            out.append(_ESCAPES.get(line[pos + 1], "\\" + line[pos + 1]))
            pos += 2
        elif char == '"':
            return "".join(out), pos + 1
        else:
            out.append(char)
            pos += 1
    raise ValueError("a label value without its closing quote")


# -- the figures ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GroupMetrics:
    """The group coordinator's figures of one broker, or of the cluster (summed over its brokers).

    The dicts hold only what was exposed (``{"classic": 3, "consumer": 5, ...}``); a scalar that was not
    exposed is ``None``. Classic rebalances are counted when they complete (``group-completed-rebalance``),
    consumer and streams rebalances when the group epoch moves.
    """

    #: groups per protocol: ``classic``, ``consumer``, ``streams``, ``share`` (``group-count``)
    groups_by_protocol: dict[str, int] = field(default_factory=dict)
    #: consumer (KIP-848) groups per state: Empty, Assigning, Reconciling, Stable, Dead
    consumer_groups_by_state: dict[str, int] = field(default_factory=dict)
    #: streams (KIP-1071) groups per state: Empty, NotReady, Assigning, Reconciling, Stable, Dead
    streams_groups_by_state: dict[str, int] = field(default_factory=dict)
    #: classic groups per state: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    classic_groups_by_state: dict[str, int] = field(default_factory=dict)
    #: rebalances per second over the broker's metrics window, and in total since the broker started
    classic_rebalance_rate: float | None = None
    classic_rebalance_count: int | None = None
    consumer_rebalance_rate: float | None = None
    consumer_rebalance_count: int | None = None
    streams_rebalance_rate: float | None = None
    streams_rebalance_count: int | None = None

    def group_count(self, protocol: str) -> int | None:
        """Groups using ``protocol`` (``classic``, ``consumer``, ``streams``, ``share``); None when not exposed."""
        return self.groups_by_protocol.get(protocol)

    @property
    def missing(self) -> tuple[str, ...]:
        """The figures that were not exposed (an empty dict or None), by field name."""
        return tuple(f.name for f in fields(GroupMetrics) if getattr(self, f.name) in (None, {}))

    def _figures(self) -> dict[str, Any]:
        return {f.name: (dict(value) if isinstance(value := getattr(self, f.name), dict) else value)
                for f in fields(GroupMetrics)}

    def to_dict(self) -> dict[str, object]:
        return {**self._figures(), "missing": list(self.missing)}


@dataclass(frozen=True, kw_only=True)
class NodeGroupMetrics(GroupMetrics):
    """One broker's figures, as its exporter at ``url`` showed them."""

    url: str

    def to_dict(self) -> dict[str, object]:
        return {"url": self.url, **super().to_dict()}


@dataclass(frozen=True, kw_only=True)
class GroupMetricsSample(GroupMetrics):
    """The cluster's group-coordinator figures at ``taken_at``: each broker's in ``nodes``, their sums in the
    fields (a sum only where every broker exposed the value: otherwise None, or the key left out)."""

    taken_at: datetime
    nodes: tuple[NodeGroupMetrics, ...] = ()

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(n.url for n in self.nodes)

    def to_dict(self) -> dict[str, object]:
        return {"taken_at": self.taken_at.isoformat(timespec="seconds"), **super().to_dict(),
                "nodes": [n.to_dict() for n in self.nodes]}


def node_group_metrics(samples: Iterable[MetricSample], url: str) -> NodeGroupMetrics:
    """The group coordinator's figures among one broker's samples (pure; NaN and infinities count as not
    exposed: a value the broker could not compute is not a 0)."""
    by_name: dict[str, list[MetricSample]] = {}
    for sample in samples:
        if not math.isfinite(sample.value):
            continue
        name = sample.name.lower()
        by_name.setdefault(name.removesuffix("_total"), []).append(sample)

    def by_label(name: str, label: str, key: Callable[[str], str | None] = lambda v: v) -> dict[str, int]:
        out: dict[str, int] = {}
        for sample in by_name.get(name, []):
            value = sample.labels.get(label)
            k = key(value) if value is not None else None
            if k:
                out[k] = out.get(k, 0) + _count(sample.value)
        return out

    def scalar(name: str) -> float | None:
        found = by_name.get(name)
        return sum(s.value for s in found) if found else None

    def classic_state(name: str) -> str | None:  # NumGroupsStable -> Stable; NumGroups (all of them) -> None
        return name.removeprefix("NumGroups") if name.startswith("NumGroups") else None

    rebalances: dict[str, Any] = {}
    for fname, metric in REBALANCE_METRICS.items():
        value = scalar(metric)
        rebalances[fname] = None if value is None else (_count(value) if fname.endswith("_count") else value)
    return NodeGroupMetrics(
        url=url,
        groups_by_protocol=by_label(GROUP_COUNT, "protocol"),
        consumer_groups_by_state=by_label(CONSUMER_GROUP_COUNT, "state"),
        streams_groups_by_state=by_label(STREAMS_GROUP_COUNT, "state"),
        classic_groups_by_state=by_label(CLASSIC_GROUP_GAUGES, "name", classic_state),
        **rebalances,
    )


def _count(value: float) -> int:
    return round(value)


def combine(nodes: Sequence[NodeGroupMetrics], taken_at: datetime) -> GroupMetricsSample:
    """The cluster's figures: each value summed over ``nodes`` when every node exposed it (pure)."""
    if not nodes:
        raise InvalidArgument("combine() needs the figures of at least one broker.")
    sums: dict[str, Any] = {}
    for f in fields(GroupMetrics):
        values = [getattr(n, f.name) for n in nodes]
        if isinstance(values[0], dict):
            common = set.intersection(*(set(v) for v in values))
            sums[f.name] = {k: sum(v[k] for v in values) for k in sorted(common)}
        else:
            sums[f.name] = None if any(v is None for v in values) else sum(values)
    return GroupMetricsSample(taken_at=taken_at, nodes=tuple(nodes), **sums)


# -- the endpoints ----------------------------------------------------------------------------------------


def parse_metrics_urls(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"http://b1:7071/metrics, http://b2:7071/metrics"`` (or a list) -> the URLs, blanks and duplicates
    dropped. Only ``http``/``https`` URLs with a host; no credentials in them (they would end up in logs)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    urls: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidArgument(f"A metrics URL must be text, not {item!r}.")
        url = item.strip()
        if not url or url in urls:
            continue
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port  # raises on a port that is not a number
        except ValueError as exc:
            raise InvalidArgument(f"{url!r} is not a metrics URL ({exc}).",
                                  remedy="Use http://<broker>:<port>/metrics, one URL per broker.") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgument(f"{url!r} is not an http(s) URL with a host.",
                                  remedy="Use http://<broker>:<port>/metrics, one URL per broker.")
        if parts.username is not None or parts.password is not None:
            raise InvalidArgument(f"The metrics URL for {parts.hostname}:{port or ''} carries credentials.",
                                  remedy="Expose the exporter to the workers without credentials in the URL.")
        urls.append(url)
    return tuple(urls)


def fetch_metrics_text(url: str, *, timeout: float = DEFAULT_TIMEOUT) -> str:
    """The Prometheus text ``url`` serves. :class:`MetricsUnavailable` (retriable) when it does not answer
    within ``timeout`` or answers HTTP 5xx; :class:`MetricsUnreadable` for another HTTP error."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain; version=0.0.4"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            raise MetricsUnavailable(f"The metrics endpoint {url} answered HTTP {exc.code} {exc.reason}.",
                                     urls=(url,)) from None
        raise MetricsUnreadable(f"The metrics endpoint {url} answered HTTP {exc.code} {exc.reason}.") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        why = (f"no answer within {timeout:g} s" if isinstance(reason, TimeoutError)
               else str(reason) or type(reason).__name__)
        raise MetricsUnavailable(f"The metrics endpoint {url} did not answer ({why}).", urls=(url,)) from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise MetricsUnreadable(f"The metrics endpoint {url} sent more than {MAX_RESPONSE_BYTES >> 20} MB.")
    text: str = body.decode("utf-8", errors="replace")
    return text


def read_group_metrics(urls: str | Iterable[str], *, timeout: float = DEFAULT_TIMEOUT) -> GroupMetricsSample:
    """Fetch every broker's exporter (``urls``: one per broker, a list or comma-separated) side by side and
    return the cluster's :class:`GroupMetricsSample`.

    Every URL must answer: a cluster total without one broker would be wrong,
    so one failing URL is :class:`MetricsUnavailable` naming every URL that failed.
    """
    targets = parse_metrics_urls(urls)
    if not targets:
        raise InvalidArgument("No metrics URL given.", remedy="Pass one URL per broker, e.g. http://b1:7071/metrics.")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds, not {timeout!r}.")

    def one(url: str) -> NodeGroupMetrics | Exception:
        try:
            return node_group_metrics(parse_prometheus_text(fetch_metrics_text(url, timeout=timeout),
                                                            source=f"The metrics endpoint {url}"), url)
        except (MetricsUnavailable, MetricsUnreadable) as exc:
            return exc

    with ThreadPoolExecutor(max_workers=min(len(targets), 16), thread_name_prefix="kip848-metrics") as pool:
        results = list(pool.map(one, targets))
    taken_at = datetime.now(UTC)
    unreadable = [r for r in results if isinstance(r, MetricsUnreadable)]
    if unreadable:
        raise unreadable[0]
    failed = [r for r in results if isinstance(r, MetricsUnavailable)]
    if len(failed) == 1:
        raise failed[0]
    if failed:
        down = tuple(u for r in failed for u in r.urls)
        raise MetricsUnavailable(f"{len(failed)} of {len(targets)} metrics endpoints did not answer: "
                                 + "; ".join(r.what for r in failed), urls=down)
    return combine([r for r in results if isinstance(r, NodeGroupMetrics)], taken_at)

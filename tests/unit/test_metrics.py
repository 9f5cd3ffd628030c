"""Broker metrics: the Prometheus text parser and the group-coordinator figures, on recorded real exporter output
(tests/unit/fixtures/metrics, Kafka 4.3.1), and the fetch against small real HTTP servers."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from airflow_provider_kip848.kafka.errors import InvalidArgument, MetricsUnavailable, MetricsUnreadable
from airflow_provider_kip848.kafka.metrics import (
    GroupMetrics,
    combine,
    fetch_metrics_text,
    node_group_metrics,
    parse_metrics_urls,
    parse_prometheus_text,
    read_group_metrics,
)

FIX = Path(__file__).parent / "fixtures" / "metrics"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
EVERY_FIGURE = ("groups_by_protocol", "consumer_groups_by_state", "streams_groups_by_state", "classic_groups_by_state",
                "classic_rebalance_rate", "classic_rebalance_count", "consumer_rebalance_rate",
                "consumer_rebalance_count", "streams_rebalance_rate", "streams_rebalance_count")


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def node(name: str, url: str = "http://b1:7071/metrics"):
    return node_group_metrics(parse_prometheus_text(fixture(name)), url)


def without(text: str, *needles: str) -> str:
    """``text`` without the lines (samples and their HELP/TYPE) that mention any of ``needles``."""
    return "\n".join(line for line in text.splitlines() if not any(n in line for n in needles))


# -- the exposition format ---------------------------------------------------------------------------------


def test_parser_reads_every_sample_of_a_real_exporter_page():
    samples = parse_prometheus_text(fixture("node_busy.prom"))
    lines = [ln for ln in fixture("node_busy.prom").splitlines() if ln and not ln.startswith("#")]
    assert len(samples) == len(lines) > 50  # the coordinator's figures and the agent's own JVM figures
    by_key = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    assert by_key[("kafka_server_group_coordinator_metrics_group_count", (("protocol", "classic"),))] == 2.0
    assert by_key[("jmx_exporter_build_info", (("name", "jmx_prometheus_javaagent"), ("version", "1.0.1")))] == 1


def test_parser_handles_escapes_timestamps_specials_and_exemplars():
    text = "\n".join([
        "# HELP odd a metric",
        "# TYPE odd gauge",
        'odd{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",} 1.5 1712345678000',
        "bare 2",
        'spaced { a = "x" , b="y" }\t3e2',
        "nan_value NaN",
        'inf_value{le="+Inf"} +Inf',
        'om_total{a="b"} 7 # {trace_id="abc"} 1.0',
        "# EOF",
    ])
    samples = {s.name: s for s in parse_prometheus_text(text)}
    assert samples["odd"].labels == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb"}
    assert samples["odd"].value == 1.5
    assert samples["bare"].labels == {} and samples["bare"].value == 2
    assert samples["spaced"].labels == {"a": "x", "b": "y"} and samples["spaced"].value == 300
    assert samples["nan_value"].value != samples["nan_value"].value  # NaN is kept as NaN
    assert samples["inf_value"].value == float("inf") and samples["inf_value"].labels == {"le": "+Inf"}
    assert samples["om_total"].value == 7


@pytest.mark.parametrize("line", [
    "<html><body>Kafka UI</body></html>",
    'metric{a="unclosed} 1',
    "metric{a=x} 1",
    "metric",
    "metric{a=\"b\"}",
    "metric one",
    'metric{a="b"}1',
])
def test_a_line_that_is_not_a_sample_is_refused_with_its_number(line):
    with pytest.raises(MetricsUnreadable) as err:
        parse_prometheus_text(f"# HELP ok fine\nok 1\n{line}\n", source="http://b1:7071/metrics")
    assert "http://b1:7071/metrics did not answer with Prometheus text: line 3" in str(err.value)
    assert "metrics_url" in str(err.value)  # the remedy says where to point it
    assert not err.value.retriable


# -- one broker's figures ---------------------------------------------------------------------------------------


def test_busy_node_figures():
    figures = node("node_busy.prom")
    assert figures.url == "http://b1:7071/metrics"
    assert figures.groups_by_protocol == {"classic": 2, "consumer": 2, "share": 0, "streams": 1}
    assert figures.consumer_groups_by_state == {"Assigning": 0, "Dead": 0, "Empty": 1, "Reconciling": 0, "Stable": 1}
    assert figures.streams_groups_by_state == {"Assigning": 0, "Dead": 0, "Empty": 0, "NotReady": 0,
                                               "Reconciling": 0, "Stable": 1}
    assert figures.classic_groups_by_state == {"CompletingRebalance": 0, "Dead": 0, "Empty": 1,
                                               "PreparingRebalance": 0, "Stable": 1}
    assert (figures.classic_rebalance_count, figures.consumer_rebalance_count, figures.streams_rebalance_count) == (
        3, 3, 2)
    for rate in (figures.classic_rebalance_rate, figures.consumer_rebalance_rate, figures.streams_rebalance_rate):
        assert isinstance(rate, float) and 0 < rate < 1
    assert isinstance(figures.consumer_rebalance_count, int)
    assert figures.group_count("streams") == 1 and figures.group_count("nope") is None
    assert figures.missing == ()


def test_a_fresh_node_reports_zeros_that_are_there():
    figures = node("node_fresh.prom")
    assert figures.groups_by_protocol == {"classic": 0, "consumer": 0, "share": 0, "streams": 0}
    assert figures.consumer_rebalance_count == 0 and figures.streams_rebalance_rate == 0.0
    assert figures.missing == ()


def test_absent_figures_are_none_never_zero():
    """An exporter without the group coordinator's metrics (another config, an older broker): nothing is 0."""
    jvm_only = without(fixture("node_busy.prom"), "kafka_")
    figures = node_group_metrics(parse_prometheus_text(jvm_only), "http://b1:7071/metrics")
    assert figures.groups_by_protocol == {} and figures.streams_groups_by_state == {}
    assert figures.consumer_rebalance_count is None and figures.classic_rebalance_rate is None
    assert figures.group_count("classic") is None
    assert figures.missing == EVERY_FIGURE
    assert figures.to_dict()["consumer_rebalance_count"] is None


def test_a_broker_without_streams_groups_misses_only_those():
    no_streams = without(fixture("node_busy.prom"), "streams_group", 'protocol="streams"')
    figures = node_group_metrics(parse_prometheus_text(no_streams), "u")
    assert figures.groups_by_protocol == {"classic": 2, "consumer": 2, "share": 0}
    assert figures.group_count("streams") is None
    assert figures.streams_rebalance_count is None and figures.streams_groups_by_state == {}
    assert figures.consumer_rebalance_count == 3
    assert figures.missing == ("streams_groups_by_state", "streams_rebalance_rate", "streams_rebalance_count")


def test_nan_is_not_a_value():
    text = fixture("node_fresh.prom").replace(
        "kafka_server_group_coordinator_metrics_consumer_group_rebalance_rate 0.0",
        "kafka_server_group_coordinator_metrics_consumer_group_rebalance_rate NaN")
    figures = node_group_metrics(parse_prometheus_text(text), "u")
    assert figures.consumer_rebalance_rate is None and figures.streams_rebalance_rate == 0.0


def test_counter_suffix_and_lower_case_names_are_the_same_figures():
    """An exporter that types the counts as counters (``_total``) or lower-cases names shows the same values."""
    text = (fixture("node_busy.prom")
            .replace("rebalance_count ", "rebalance_count_total ")
            .replace("GroupMetadataManager", "groupmetadatamanager"))
    assert node_group_metrics(parse_prometheus_text(text), "u") == node("node_busy.prom", "u")


# -- the cluster: sums over the brokers -------------------------------------------------------------------------


def test_cluster_figures_are_the_sums_of_its_brokers():
    n1, n2 = node("cluster_node1.prom", "http://b1:7071/metrics"), node("cluster_node2.prom", "http://b2:7071/metrics")
    assert n1.groups_by_protocol["classic"] == 3 and n2.groups_by_protocol["consumer"] == 4
    sample = combine([n1, n2], NOW)
    assert sample.taken_at == NOW and sample.urls == ("http://b1:7071/metrics", "http://b2:7071/metrics")
    assert sample.nodes == (n1, n2)
    assert sample.groups_by_protocol == {"classic": 6, "consumer": 6, "share": 0, "streams": 0}
    assert sample.consumer_groups_by_state["Empty"] == 6 and sample.classic_groups_by_state["Empty"] == 6
    assert sample.consumer_rebalance_count == n1.consumer_rebalance_count + n2.consumer_rebalance_count == 6
    assert sample.classic_rebalance_count == 6
    assert sample.consumer_rebalance_rate == pytest.approx(n1.consumer_rebalance_rate + n2.consumer_rebalance_rate)
    assert sample.missing == ()


def test_a_value_one_broker_does_not_expose_has_no_cluster_total():
    """A sum over some brokers would undercount: the total is absent, each broker's own value stays."""
    n1 = node("cluster_node1.prom", "http://b1:7071/metrics")
    n2 = node_group_metrics(parse_prometheus_text(
        without(fixture("cluster_node2.prom"), "streams_group", 'protocol="streams"')), "http://b2:7071/metrics")
    sample = combine([n1, n2], NOW)
    assert "streams" not in sample.groups_by_protocol and sample.group_count("streams") is None
    assert sample.streams_rebalance_count is None and sample.streams_groups_by_state == {}
    assert sample.nodes[0].streams_rebalance_count == 0
    assert sample.groups_by_protocol["classic"] == 6 and sample.consumer_rebalance_count == 6
    assert "streams_rebalance_count" in sample.missing


def test_sample_to_dict_is_plain_json():
    sample = combine([node("cluster_node1.prom", "http://b1:7071/metrics"),
                      node("cluster_node2.prom", "http://b2:7071/metrics")], NOW)
    data = json.loads(json.dumps(sample.to_dict()))
    assert data["taken_at"] == "2026-01-02T03:04:05+00:00"
    assert data["groups_by_protocol"]["classic"] == 6 and data["missing"] == []
    assert [n["url"] for n in data["nodes"]] == ["http://b1:7071/metrics", "http://b2:7071/metrics"]
    assert data["nodes"][1]["groups_by_protocol"]["consumer"] == 4
    assert set(EVERY_FIGURE) <= set(data) and isinstance(sample, GroupMetrics)


def test_combine_needs_a_broker():
    with pytest.raises(InvalidArgument):
        combine([], NOW)


# -- metrics URLs -----------------------------------------------------------------------------------------------


def test_metrics_urls_are_split_trimmed_and_deduplicated():
    assert parse_metrics_urls(" http://b1:7071/metrics, ,https://b2:7071/metrics,http://b1:7071/metrics ") == (
        "http://b1:7071/metrics", "https://b2:7071/metrics")
    assert parse_metrics_urls(["http://b1:7071/metrics"]) == ("http://b1:7071/metrics",)
    assert parse_metrics_urls(None) == () and parse_metrics_urls("") == ()


@pytest.mark.parametrize(("value", "expected"), [
    ("b1:7071", "not an http(s) URL"),
    ("ftp://b1/metrics", "not an http(s) URL"),
    ("http:///metrics", "not an http(s) URL"),
    ("http://b1:port/metrics", "is not a metrics URL"),
    ("http://ops:secret@b1:7071/metrics", "carries credentials"),
])
def test_bad_metrics_urls_are_refused(value, expected):
    with pytest.raises(InvalidArgument) as err:
        parse_metrics_urls(value)
    assert expected in str(err.value)
    assert "secret" not in str(err.value)


# -- fetching, against real HTTP servers on this machine ---------------------------------------------------------


class _Server:
    """A tiny HTTP server: ``routes`` maps a path to (status, body); unknown paths answer 404."""

    def __init__(self, routes: dict[str, tuple[int, str]]) -> None:
        routes_ = routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                status, body = routes_.get(self.path, (404, "not found"))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str = "/metrics") -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[list[_Server]]:
    made = [_Server({"/metrics": (200, fixture("cluster_node1.prom"))}),
            _Server({"/metrics": (200, fixture("cluster_node2.prom")), "/broken": (503, "down for a restart"),
                     "/html": (200, "<html>hello</html>")})]
    yield made
    for s in made:
        s.close()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_read_group_metrics_sums_two_live_endpoints(servers):
    urls = f"{servers[0].url()},{servers[1].url()}"
    sample = read_group_metrics(urls, timeout=5)
    assert sample.urls == (servers[0].url(), servers[1].url())
    assert sample.groups_by_protocol["classic"] == 6 and sample.groups_by_protocol["consumer"] == 6
    assert sample.taken_at.tzinfo is not None
    assert fetch_metrics_text(servers[0].url()) == fixture("cluster_node1.prom")


def test_an_endpoint_that_does_not_answer_is_retriable_and_named(servers):
    dead = f"http://127.0.0.1:{_dead_port()}/metrics"
    with pytest.raises(MetricsUnavailable) as err:
        read_group_metrics([servers[0].url(), dead], timeout=5)
    assert err.value.retriable and err.value.urls == (dead,)
    assert f"The metrics endpoint {dead} did not answer" in str(err.value)
    assert "Check that the Prometheus JMX exporter runs on each broker" in str(err.value)


def test_every_endpoint_that_fails_is_named(servers):
    dead = f"http://127.0.0.1:{_dead_port()}/metrics"
    with pytest.raises(MetricsUnavailable) as err:
        read_group_metrics([dead, servers[1].url("/broken"), servers[0].url()], timeout=5)
    assert err.value.urls == (dead, servers[1].url("/broken"))
    assert "2 of 3 metrics endpoints did not answer" in str(err.value) and "HTTP 503" in str(err.value)


def test_an_endpoint_that_answers_without_metrics_is_not_retriable(servers):
    with pytest.raises(MetricsUnreadable) as err:
        read_group_metrics(servers[1].url("/nothing-here"), timeout=5)
    assert "answered HTTP 404" in str(err.value) and not err.value.retriable
    with pytest.raises(MetricsUnreadable) as err:
        read_group_metrics(servers[1].url("/html"), timeout=5)
    assert "did not answer with Prometheus text: line 1" in str(err.value)


def test_an_endpoint_that_never_answers_times_out():
    with socket.socket() as silent:  # accepts connections (the backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/metrics"
        with pytest.raises(MetricsUnavailable) as err:
            read_group_metrics(url, timeout=0.5)
    assert "no answer within 0.5 s" in str(err.value) and err.value.retriable


@pytest.mark.parametrize("timeout", [0, -1, "10", True])
def test_a_bad_timeout_is_refused(timeout):
    with pytest.raises(InvalidArgument):
        read_group_metrics("http://127.0.0.1:1/metrics", timeout=timeout)


def test_no_url_is_refused():
    with pytest.raises(InvalidArgument, match="No metrics URL"):
        read_group_metrics(" , ")

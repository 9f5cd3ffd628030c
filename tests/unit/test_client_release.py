"""The client release an instance runs, read from the lines its client library prints at start, and the
preflight's ``client_release`` verdict on it (kafka/rules/client_release.py, pure).

The log lines are the libraries' own: the Java clients' ``AppInfoParser`` ("Kafka version: {}", in
``org.apache.kafka.common.utils`` up to 4.3, ``...utils.internals`` from 4.4), Kafka Streams' ("Kafka Streams
version: {}"), librdkafka's ``INIT`` debug line as librdkafka 2.16.0 prints it with ``debug=generic``."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.rules.client_release import (
    FROM_CONTROLLER,
    FROM_LOG,
    FROM_PARAMS,
    InstanceRelease,
    check_client_releases,
    parse_release,
    release_from_log,
    resolve_releases,
)
from airflow_provider_kip848.kafka.rules.preflight import run_preflight
from tests.unit.test_changed_kafka_facts_rules import facts as preflight_facts

JAVA_391 = [
    "[2026-11-29 10:00:00,100] INFO ConsumerConfig values: ",
    "\tgroup.protocol = classic",
    "[2026-11-29 10:00:00,200] INFO Kafka version: 3.9.1 (org.apache.kafka.common.utils.AppInfoParser)",
    "[2026-11-29 10:00:00,201] INFO Kafka commitId: f745dfdcee2b9851 (org.apache.kafka.common.utils.AppInfoParser)",
    "[2026-11-29 10:00:00,201] INFO Kafka startTimeMs: 1795963873948 (org.apache.kafka.common.utils.AppInfoParser)",
]
STREAMS_421 = [
    "[main] INFO org.apache.kafka.common.utils.AppInfoParser - Kafka version: 4.2.1",
    "[main] INFO org.apache.kafka.streams.KafkaStreams - stream-client [wc-1] Kafka Streams version: 4.2.1",
    "[main] INFO org.apache.kafka.streams.KafkaStreams - stream-client [wc-1] Kafka Streams commit ID: abc",
]
RDKAFKA_INIT = ("%7|1795963873.948|INIT|rdkafka#consumer-1| [thrd:app]: librdkafka v2.16.0 (0x21000ff) "
                "rdkafka#consumer-1 initialized (builtin.features gzip,snappy,ssl, debug 0x1)")


@pytest.mark.parametrize(("lines", "library", "version", "streams"), [
    (JAVA_391, "java", "3.9.1", False),
    (["2026-11-29T10:00:00Z INFO [o.a.k.c.u.i.AppInfoParser] Kafka version: 4.4.0"], "java", "4.4.0", False),
    (STREAMS_421, "java", "4.2.1", True),
    ([RDKAFKA_INIT], "librdkafka", "2.16.0", False),
    (["client library: confluent-kafka 2.16.0, librdkafka 2.16.0"], "librdkafka", "2.16.0", False),
    (["versions: confluent_kafka ('2.11.0', 1) librdkafka version ('2.11.0', 34406655)"], "librdkafka", "2.11.0",
     False),
    (["INFO Kafka version: 7.9.0-ccs (org.apache.kafka.common.utils.AppInfoParser)"], "java", "7.9.0-ccs", False),
])
def test_the_release_is_read_from_the_line_the_library_prints(lines, library, version, streams):
    found = release_from_log(lines)
    assert (found.library, found.version, found.streams) == (library, version, streams)
    assert version in found.evidence


def test_a_log_without_a_release_line_is_unknown_with_why():
    found = release_from_log(["started group=orders protocol=classic client.id=app-0", "closed"])
    assert found.library is None and found.version is None
    assert "names no client release" in found.reason


def test_a_log_of_several_starts_is_judged_by_the_last_and_names_the_others():
    found = release_from_log([*JAVA_391, "restarted", "INFO Kafka version: 4.1.0 (AppInfoParser)"])
    assert found.version == "4.1.0"
    assert found.releases_seen == ("java 3.9.1", "java 4.1.0")


def test_confluent_builds_map_to_their_apache_line_or_are_unknown():
    assert parse_release("7.9.0-ccs") == (3, 9, 0)
    assert parse_release("8.0.1-ce") == (4, 0, 1)
    assert parse_release("9.3.0-ccs") is None  # not in the table: never read as Apache Kafka 9.3
    assert parse_release("4.4.0") == (4, 4, 0)
    assert parse_release("not a release") is None


def _log(instance, lines, source="supervisorctl tail"):
    found = release_from_log(lines)
    return {"instance": instance, "library": found.library, "version": found.version, "streams": found.streams,
            "evidence": found.evidence, "reason": found.reason, "source": source}


def test_the_log_wins_over_the_controller_and_the_params():
    releases = resolve_releases([_log("orders:orders_0", JAVA_391)], config_client="java", config_version="4.4.0",
                                config_source="cat app.properties", declared_client="java",
                                declared_version="4.1.0")
    (r,) = releases
    assert (r.library, r.version) == ("java", "3.9.1")
    assert r.source.startswith(FROM_LOG)
    check = check_client_releases(releases, "consumer")
    assert check.status == "fail"
    assert "orders:orders_0: java 3.9.1 (the instance's log" in check.evidence
    assert "predates the Java consumer 4.0" in check.evidence


def test_without_a_log_line_the_controller_then_the_params_are_said_as_the_source():
    silent = [_log("orders:orders_0", ["started"])]
    (r,) = resolve_releases(silent, config_client="librdkafka", config_version="2.16.0",
                            declared_client="librdkafka", declared_version="2.11.0")
    assert r.source == FROM_CONTROLLER and r.version == "2.16.0"
    assert "names no client release" in r.reason
    (r,) = resolve_releases(silent, declared_client="librdkafka", declared_version="2.11.0")
    assert r.source == FROM_PARAMS
    check = check_client_releases((r,), "consumer")
    assert check.status == "fail" and "the run's Params" in check.evidence


def test_unknown_is_never_a_pass():
    silent = resolve_releases([_log("a", ["started"]), _log("b", JAVA_391[2:3])])
    check = check_client_releases(silent, "consumer")
    assert silent[0].version is None
    assert check.status == "fail"  # b runs 3.9.1: refused; a is listed as unknown
    silent = resolve_releases([_log("a", ["started"]), _log("b", ["INFO Kafka version: 4.4.0"])])
    check = check_client_releases(silent, "consumer")
    assert check.status == "warn"
    assert "a: unknown (its log names no client release" in check.evidence
    assert "b: java 4.4.0" in check.evidence
    unmapped = (InstanceRelease("c", "java", "9.3.0-ccs", FROM_LOG),)
    assert check_client_releases(unmapped, "consumer").status == "warn"
    (nothing,) = resolve_releases(None)
    assert nothing.instance == "(the application)" and nothing.version is None
    assert check_client_releases((nothing,), "consumer").status == "warn"


def test_each_protocols_minimum_and_streams_static_members():
    def verdict(library, version, target, *, streams=False, static=False):
        r = InstanceRelease("i", library, version, FROM_LOG, streams=streams)
        return check_client_releases((r,), target, static_members=static).status

    assert verdict("java", "4.0.0", "consumer") == "pass"
    assert verdict("java", "3.9.1", "consumer") == "fail"
    assert verdict("librdkafka", "2.12.0", "consumer") == "pass"
    assert verdict("librdkafka", "2.11.1", "consumer") == "fail"
    assert verdict("java", "4.1.0", "streams", streams=True) == "fail"
    assert verdict("java", "4.2.1", "streams", streams=True) == "pass"
    assert verdict("java", "4.3.1", "streams", streams=True, static=True) == "fail"
    assert verdict("java", "4.4.0", "streams", streams=True, static=True) == "pass"
    assert verdict("librdkafka", "2.16.0", "streams") == "fail"
    assert check_client_releases((InstanceRelease("i", "java", "3.9.1", FROM_LOG),), "classic") is None


def test_the_preflight_judges_the_releases_it_is_given_and_only_then():
    old = resolve_releases([_log("orders:orders_0", JAVA_391)], declared_client="java", declared_version="4.4.0")
    report = run_preflight(preflight_facts(), "classic_to_consumer", group_id="g", client_releases=old)
    assert report.check("client_release").status == "fail"
    assert "client_release" in [c.name for c in report.failures]
    assert "client_release" not in [c.name for c in run_preflight(preflight_facts(), "classic_to_consumer",
                                                                  group_id="g").checks]
    assert "client_release" not in [c.name for c in run_preflight(preflight_facts(), "consumer_to_classic",
                                                                  group_id="g", client_releases=old).checks]

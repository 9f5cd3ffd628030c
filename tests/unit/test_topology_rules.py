"""kafka.rules.topology: a Streams application's TopologyDescription parsed and judged against partition counts.

Every description here was printed by the real Kafka Streams (4.3.1): wordcount.txt is WordCountDemo's own, from
testing.apps.describe_topology (the text the demo's controller reports); the other shapes come from
fixtures/topology/Shapes.java, which builds them with the Streams DSL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_kip848.kafka.errors import InvalidArgument
from airflow_provider_kip848.kafka.rules.topology import (
    NO_TOPOLOGY,
    check_topology,
    derive_needs,
    needed_topics,
    parse_topology,
)

FIXTURES = Path(__file__).parent / "fixtures" / "topology"
APP = "app"
WC_REPARTITION = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
WC_CHANGELOG = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"


def topology(name: str):
    return parse_topology((FIXTURES / f"{name}.txt").read_text(), name)


def verdicts(name: str, partitions: dict[str, int | None]) -> dict[str, tuple[str, str, str]]:
    return {c.name: (c.status, c.evidence, c.remedy) for c in check_topology(topology(name), APP, partitions)}


def all_at(name: str, count: int) -> dict[str, int | None]:
    return dict.fromkeys(needed_topics(topology(name), APP), count)


def test_wordcount_needs_its_source_its_repartition_topic_and_its_changelog():
    wc = topology("wordcount")
    assert [s.id for s in wc.subtopologies] == [0, 1]
    assert wc.internal_topics == ("KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition",)
    assert needed_topics(wc, APP) == ("streams-plaintext-input", WC_REPARTITION, WC_CHANGELOG)
    needs = derive_needs(wc, APP, {"streams-plaintext-input": 3})
    # the repartition topic takes the widest source of the sub-topology writing it; the changelog one
    # partition per task of its sub-topology, whose only source is that repartition topic
    assert [(n.topic, n.partitions) for n in needs.repartition] == [(WC_REPARTITION, 3)]
    assert [(n.topic, n.partitions) for n in needs.changelogs] == [(WC_CHANGELOG, 3)]
    assert needs.co_partitioned == ()
    assert {name: v[0] for name, v in verdicts("wordcount", all_at("wordcount", 2)).items()} == {
        "topology_source_topics": "pass", "topology_repartition_topics": "pass",
        "topology_changelog_topics": "pass", "topology_co_partitioning": "pass"}


def test_a_missing_repartition_topic_fails_naming_it():
    status, evidence, remedy = verdicts("wordcount", {**all_at("wordcount", 2), WC_REPARTITION: None})[
        "topology_repartition_topics"]
    assert status == "fail"
    assert f"{WC_REPARTITION} (missing), needs 2" in evidence
    assert WC_REPARTITION in remedy and "recreate" in remedy


def test_a_missing_source_topic_fails():
    status, evidence, _ = verdicts("wordcount", {**all_at("wordcount", 2), "streams-plaintext-input": None})[
        "topology_source_topics"]
    assert status == "fail" and "streams-plaintext-input (missing)" in evidence


def test_a_changelog_with_another_count_than_its_tasks_fails_a_missing_one_is_only_a_warning():
    wrong = verdicts("wordcount", {**all_at("wordcount", 2), WC_CHANGELOG: 1})["topology_changelog_topics"]
    assert wrong[0] == "fail" and f"{WC_CHANGELOG} has 1, needs 2" in wrong[2]
    # the description cannot tell a store whose logging is disabled: never taken as a failure, never a pass
    missing = verdicts("wordcount", {**all_at("wordcount", 2), WC_CHANGELOG: None})["topology_changelog_topics"]
    assert missing[0] == "warn" and "withLoggingDisabled" in missing[2]


def test_a_repartition_count_other_than_derived_is_a_warning_an_explicit_count_is_invisible():
    status, _, remedy = verdicts("wordcount", {**all_at("wordcount", 2), WC_REPARTITION: 4})[
        "topology_repartition_topics"]
    assert status == "warn" and "Repartitioned.numberOfPartitions" in remedy
    # and the changelog downstream follows the repartition topic that exists (4 tasks)
    assert verdicts("wordcount", {**all_at("wordcount", 2), WC_REPARTITION: 4, WC_CHANGELOG: 4})[
        "topology_changelog_topics"][0] == "pass"


@pytest.mark.parametrize("shape", ["join", "named_join"])
def test_joined_topics_with_unequal_counts_fail_also_when_the_join_is_named(shape):
    """The join is found from the store both sides use, not from a processor's name: a named join says nothing."""
    assert [s.joined_sources() for s in topology(shape).subtopologies][0] == (("orders", "customers"),)
    status, evidence, _ = verdicts(shape, {**all_at(shape, 2), "customers": 3})["topology_co_partitioning"]
    assert status == "fail" and "customers (3), orders (2)" in evidence


def test_a_merge_of_topics_and_a_global_table_are_not_joins_a_pattern_is_not_checked():
    mixed = topology("mixed")
    assert all(s.joined_sources() == () for s in mixed.subtopologies)
    counts = {**all_at("mixed", 2), "clicks-a": 4}
    checks = verdicts("mixed", counts)
    assert checks["topology_co_partitioning"][0] == "pass"
    # the global store's topic is its changelog: no <app>-regions-store-changelog is needed
    assert not any("regions-store" in t for t in needed_topics(mixed, APP))
    # the repartition topic takes the widest source of its writer (4); it has 2 here: set explicitly (3 in the
    # application's code), which the description does not show: a warning
    assert checks["topology_repartition_topics"][0] == "warn"
    status, evidence, _ = checks["topology_source_topics"]
    assert status == "warn" and "pattern audit-.*" in evidence


def test_a_repartition_topic_joined_with_a_table_takes_the_tables_count():
    needs = derive_needs(topology("rekey_join"), APP, {"clicks": 6, "users": 2})
    assert needs.co_partitioned == ((f"{APP}-KSTREAM-KEY-SELECT-0000000001-repartition", "users"),)
    assert [(n.partitions, n.basis) for n in needs.repartition] == [(2, "co-partitioned with users")]


def test_without_a_topology_the_check_says_it_was_not_checked():
    (check,) = check_topology(None, APP, {})
    assert check.name == NO_TOPOLOGY and check.status == "warn" and check.evidence.startswith("not checked")
    # where the topology did not come from either, and why: the brokers serve one (KIP-1331) for streams groups only
    assert "none from the brokers" in check.evidence and "KIP-1331" in check.evidence, check.evidence


@pytest.mark.parametrize("text, says", [
    ("", "empty"),
    ("Topologies:\n", "no sub-topology"),
    ("Source: x (topics: [a])", "line 1"),
    ("Topologies:\n   Sub-topology: 0\n    Source KSTREAM-SOURCE (topics: [a])\n", "line 3"),
    ((FIXTURES / "wordcount.txt").read_text().replace("Sub-topology: 1", "Sub-topology: 0"), "twice"),
])
def test_text_that_is_not_a_topology_description_is_refused_naming_where(text, says):
    with pytest.raises(InvalidArgument, match=says):
        parse_topology(text, "the run")

"""The preflight of the destructive DAGs on constructed facts: ``disable_feature`` (kafka_disable_group_feature)
and ``delete_streams_group`` (kip1071_delete_streams_group), and the feature operator's empty-dependants rule.
The real-broker runs are tests/e2e/test_destructive_dags.py."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.errors import FeatureInUse, InvalidArgument, InvalidGroupId
from airflow_provider_kip848.kafka.model import (
    BrokerVersion,
    ClusterFeatures,
    Feature,
    FeatureUpdate,
    GroupCoordinatorConfig,
    GroupListing,
    GroupType,
    StreamsGroupDescription,
    StreamsGroupMember,
)
from airflow_provider_kip848.kafka.rules.features import refuse_dependents
from airflow_provider_kip848.kafka.rules.preflight import PreflightFacts, run_preflight


def facts(level=1, dependents=None, listing=None, description=None, known=True) -> PreflightFacts:
    features = {"metadata.version": Feature("metadata.version", 7, 30, 30)}
    if known:
        features["streams.version"] = Feature("streams.version", 0, 1, level)
    return PreflightFacts((BrokerVersion(1, "4.3", "4.3-IV0"),), ClusterFeatures(features),
                          GroupCoordinatorConfig(1, {}), listing, description, dependent_groups=dependents or {})


def disable(f: PreflightFacts, level: int = 0):
    return run_preflight(f, "disable_feature", feature="streams.version", feature_level=level)


def test_disable_with_no_dependants_passes():
    r = disable(facts())
    assert r.passed and [c.status for c in r.checks] == ["pass", "pass"]
    assert r.check("feature_level").evidence == "streams.version can go 1 -> 0"
    assert r.check("dependent_groups").evidence == "no streams group exists"


def test_empty_dependants_warn_and_name_what_happens_to_them():
    r = disable(facts(dependents={"old-app": 0, "older-app": 0}))
    check = r.check("dependent_groups")
    assert r.passed and check.status == "warn"
    assert check.evidence == "2 empty streams group(s) stay: 'old-app' (empty), 'older-app' (empty)"
    assert "cannot be described and nobody can join them" in check.remedy
    assert "kip1071_delete_streams_group" in check.remedy


@pytest.mark.parametrize("dependents, fragment", [
    ({"live": 2, "old": 0}, "1 streams group(s) with members: 'live' (2 member(s))"),
    ({"share-ish": -1}, "(count unknown): 'share-ish' (members unknown)"),
])
def test_a_group_with_members_or_an_unknown_count_fails(dependents, fragment):
    r = disable(facts(dependents=dependents))
    assert not r.passed and r.failures == (r.check("dependent_groups"),)
    assert fragment in r.check("dependent_groups").evidence
    if -1 in dependents.values():
        assert "never taken for empty on a guess" in r.check("dependent_groups").remedy


@pytest.mark.parametrize("kwargs, level, status, evidence", [
    ({"level": 0}, 0, "pass", "streams.version is already at 0; nothing to do"),
    ({"level": 0}, 1, "fail", "streams.version is at 0; level 1 would raise it"),
    ({}, 5, "fail", "streams.version is at 1; level 5 would raise it"),
    ({"known": False}, 0, "fail", "streams.version is not known to this cluster"),
])
def test_feature_level(kwargs, level, status, evidence):
    r = disable(facts(**kwargs), level)
    assert [(c.name, c.status, c.evidence) for c in r.checks] == [("feature_level", status, evidence)]


def test_disable_needs_a_group_protocol_feature():
    with pytest.raises(InvalidArgument, match="not 'metadata.version'"):
        run_preflight(facts(), "disable_feature", feature="metadata.version")


def streams(members: int) -> tuple[GroupListing, StreamsGroupDescription]:
    state = "Stable" if members else "Empty"
    ms = tuple(StreamsGroupMember(f"m{i}", f"p{i}", f"c{i}", 3) for i in range(members))
    return (GroupListing("app", GroupType.STREAMS, state, "streams"),
            StreamsGroupDescription("app", state, 1, 3, 3, 0, ms))


def test_delete_streams_group_checks():
    ok = run_preflight(facts(None, None, *streams(0)), "delete_streams_group", group_id="app")
    assert ok.passed and [(c.name, c.status) for c in ok.checks] == [("group_type", "pass"), ("group_empty", "pass")]

    busy = run_preflight(facts(None, None, *streams(2)), "delete_streams_group", group_id="app")
    assert busy.failures == (busy.check("group_empty"),)
    assert busy.check("group_empty").evidence == "2 active member(s), state Stable"

    unreadable = run_preflight(facts(None, None, streams(0)[0], None), "delete_streams_group", group_id="app")
    assert unreadable.failures == (unreadable.check("group_empty"),)

    consumer = run_preflight(facts(None, None, GroupListing("app", GroupType.CONSUMER, "Empty", "consumer")),
                             "delete_streams_group", group_id="app")
    assert consumer.failures and consumer.check("group_type").evidence == "a consumer group (Empty)"

    gone = run_preflight(facts(), "delete_streams_group", group_id="app")
    assert gone.passed and gone.check("group_type").status == "warn"
    assert gone.check("group_type").evidence == "group 'app' does not exist: nothing to delete"

    with pytest.raises(InvalidGroupId):
        run_preflight(facts(), "delete_streams_group")


def test_the_operators_empty_dependants_rule():
    update = FeatureUpdate("streams.version", "disable", 1, 0, False, noop=False, applied=False, message="")
    assert refuse_dependents(update, {"old": 0}, allow_empty=True) is None
    assert isinstance(refuse_dependents(update, {"old": 0}), FeatureInUse)
    for busy in ({"old": 0, "live": 1}, {"unknown": -1}):
        refusal = refuse_dependents(update, busy, allow_empty=True)
        assert isinstance(refusal, FeatureInUse) and refusal.groups == busy

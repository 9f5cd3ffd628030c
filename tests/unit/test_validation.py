"""Pure validation shared by both backends: feature plans and group-config bounds."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.cli.parsers import parse_config_entries, parse_group_config
from airflow_provider_kip848.kafka.errors import ConfigOutOfBounds, ConfigUnknown, InvalidFeatureLevel
from airflow_provider_kip848.kafka.model import ClusterFeatures, Feature, GroupCoordinatorConfig
from airflow_provider_kip848.kafka.rules.features import outcome_message, plan_feature_update, resolve_level
from airflow_provider_kip848.kafka.rules.group_configs import validate_changes
from tests.unit.test_cli_parsers import fixture

FEATURES = ClusterFeatures({
    "streams.version": Feature("streams.version", 0, 1, 1),
    "group.version": Feature("group.version", 0, 1, 0),
    "metadata.version": Feature("metadata.version", 7, 30, 29),
})


def test_already_at_level_is_a_noop_that_says_so():
    plan = plan_feature_update(FEATURES, "streams.version", 1, "upgrade")
    assert plan.noop and not plan.applied
    assert plan.message == "streams.version is already at level 1; nothing to change."


def test_upgrade_plan_and_messages():
    plan = plan_feature_update(FEATURES, "group.version", "1", "upgrade")
    assert (plan.from_level, plan.to_level, plan.noop) == (0, 1, False)
    assert outcome_message(plan, dry_run=True) == "group.version can be upgraded to 1."
    mv = plan_feature_update(FEATURES, "metadata.version", "4.3-IV0", "upgrade")
    assert mv.to_level == 30 and outcome_message(mv, dry_run=False) == "metadata.version was upgraded to 4.3-IV0."
    off = plan_feature_update(FEATURES, "streams.version", None, "disable")
    assert off.to_level == 0 and outcome_message(off, dry_run=True) == "streams.version can be disabled."


@pytest.mark.parametrize("feature, level, action, fragment", [
    ("nope.version", 1, "upgrade", "not known to this cluster"),
    ("streams.version", 5, "upgrade", "level 5 is not supported: the cluster supports 0..1"),
    ("metadata.version", "4.9-IV9", "upgrade", "is not a number"),
    ("streams.version", 0, "upgrade", "an upgrade to 0 would lower it"),
    ("group.version", 1, "downgrade", "a downgrade to 1 would raise it"),
    ("group.version", 1, "promote", "Unknown feature action"),
    ("group.version", True, "upgrade", "is not a number"),
])
def test_bad_feature_changes_are_refused(feature, level, action, fragment):
    with pytest.raises(InvalidFeatureLevel, match=fragment):
        plan_feature_update(FEATURES, feature, level, action)


def test_resolve_level_names():
    assert resolve_level("metadata.version", "4.2-IV1") == 29
    assert resolve_level("streams.version", " 1 ") == 1


CURRENT = parse_group_config("g1", fixture("configs_g1_all.out")).entries
BROKER = GroupCoordinatorConfig(1, {n: e.value for n, e in parse_config_entries(fixture("configs_broker_all.out")).items()
                                    if n.startswith("group.")})


def test_valid_changes_are_normalised_to_strings():
    assert validate_changes("g1", {"streams.num.standby.replicas": 2, "consumer.session.timeout.ms": "10000",
                                   "share.isolation.level": "read_committed"}, [],
                            current=CURRENT, coordinator=BROKER) == {
        "streams.num.standby.replicas": "2", "consumer.session.timeout.ms": "10000",
        "share.isolation.level": "read_committed"}


@pytest.mark.parametrize("changes, error, fragment", [
    ({"no.such.config": "1"}, ConfigUnknown, "'no.such.config' is not a group config of this broker"),
    ({"streams.num.standby.replicas": 3}, ConfigOutOfBounds,
     "above the maximum \\(broker group.streams.max.standby.replicas=2\\); allowed 0..2"),
    ({"consumer.session.timeout.ms": 1000}, ConfigOutOfBounds,
     "below the minimum \\(broker group.consumer.min.session.timeout.ms=2000\\)"),
    ({"consumer.session.timeout.ms": 999999}, ConfigOutOfBounds, "above the maximum"),
    ({"consumer.session.timeout.ms": "abc"}, ConfigOutOfBounds, "is not an integer"),
    ({"consumer.session.timeout.ms": 2.5}, ConfigOutOfBounds, "is not an integer"),
    ({"streams.num.standby.replicas": True}, ConfigOutOfBounds, "is not an integer"),
    ({"share.isolation.level": "dirty"}, ConfigOutOfBounds, "must be one of read_committed, read_uncommitted"),
    ({"share.auto.offset.reset": "sometime"}, ConfigOutOfBounds, "earliest, latest or by_duration"),
    ({"share.renew.acknowledge.enable": "yes"}, ConfigOutOfBounds, "must be true or false"),
    ({"consumer.session.timeout.ms": 3000, "consumer.heartbeat.interval.ms": 5000}, ConfigOutOfBounds,
     "consumer.session.timeout.ms=3000 must be greater than consumer.heartbeat.interval.ms=5000"),
    ({"streams.initial.rebalance.delay.ms": -5}, ConfigOutOfBounds, "below the minimum"),
])
def test_bad_group_configs_are_refused_with_the_bounds(changes, error, fragment):
    with pytest.raises(error, match=fragment):
        validate_changes("g1", changes, [], current=CURRENT, coordinator=BROKER)


def test_deleting_an_unknown_config_is_refused():
    with pytest.raises(ConfigUnknown):
        validate_changes("g1", {}, ["consumer.sesion.timeout.ms"], current=CURRENT, coordinator=BROKER)

"""Preflight rules on constructed facts (the real-broker counterparts are in tests/integration/test_operators.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_kip848.kafka.model import (
    BrokerVersion,
    ClusterFeatures,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    Feature,
    GroupCoordinatorConfig,
    GroupListing,
    GroupType,
    MemberProtocol,
)
from airflow_provider_kip848.kafka.rules.preflight import PreflightFacts, run_preflight

COORD = {"group.coordinator.rebalance.protocols": "classic,consumer,streams",
         "group.consumer.migration.policy": "bidirectional", "group.consumer.max.size": "10",
         "group.streams.max.size": "10"}


def facts(release="4.3", mv=30, group_version=1, streams_version=1, coord=None, gtype=GroupType.CLASSIC,
          members=2, static=0, user_data=None, assignor="range", protocol_type="consumer", releases=None):
    brokers = tuple(BrokerVersion(i + 1, r, f"{r}-IV0") for i, r in enumerate(releases or [release]))
    features = ClusterFeatures({"metadata.version": Feature("metadata.version", 7, mv, mv),
                                "group.version": Feature("group.version", 0, 1, group_version),
                                "streams.version": Feature("streams.version", 0, 1, streams_version)})
    ms = tuple(ConsumerGroupMember(f"m{i}", f"c{i}", "h", instance_id=f"s{i}" if i < static else None,
                                   protocol=MemberProtocol.CLASSIC) for i in range(members))
    desc = ConsumerGroupDescription("g", gtype, "Stable" if members else "Empty", assignor, 1, ms)
    return PreflightFacts(brokers, features, GroupCoordinatorConfig(1, {**COORD, **(coord or {})}),
                          GroupListing("g", gtype, desc.state, protocol_type), desc,
                          user_data if user_data is not None else {m.member_id: b"" for m in ms})


def status(report, name):
    return report.check(name).status


def test_healthy_online_upgrade_passes():
    r = run_preflight(facts(static=1), "classic_to_consumer", group_id="g")
    assert r.passed and status(r, "static_membership") == "warn"
    assert "UNRELEASED_INSTANCE_ID" in r.check("static_membership").remedy


@pytest.mark.parametrize("kwargs, check", [
    ({"release": "3.9"}, "broker_version"),
    ({"coord": {"group.coordinator.rebalance.protocols": "classic"}}, "protocol_enabled"),
    ({"group_version": 0}, "feature_finalized"),
    ({"coord": {"group.consumer.migration.policy": "disabled"}}, "migration_policy"),
    ({"coord": {"group.consumer.migration.policy": "downgrade"}}, "migration_policy"),
    ({"user_data": {"m0": b"\x00custom", "m1": b""}}, "custom_assignor"),
    ({"members": 11}, "group_size"),
    ({"gtype": GroupType.STREAMS}, "group_type"),
    ({"protocol_type": "connect"}, "group_type"),
])
def test_online_upgrade_refusals(kwargs, check):
    r = run_preflight(facts(**kwargs), "classic_to_consumer", group_id="g")
    assert not r.passed and status(r, check) == "fail", r.render_text()
    assert r.check(check).remedy


def test_empty_group_converts_under_any_policy():
    r = run_preflight(facts(members=0, coord={"group.consumer.migration.policy": "disabled"}),
                      "classic_to_consumer", group_id="g")
    assert status(r, "migration_policy") == "pass"


def test_rollback_needs_downgrade_policy():
    f = facts(gtype=GroupType.CONSUMER, coord={"group.consumer.migration.policy": "upgrade"})
    assert status(run_preflight(f, "consumer_to_classic", group_id="g"), "migration_policy") == "fail"


def test_streams_offline_on_4_2_needs_a_declared_patch_release():
    f = facts(release="4.2", mv=29, members=0)
    assert status(run_preflight(f, "classic_to_streams", group_id="g"), "broker_version") == "fail"
    r = run_preflight(f, "classic_to_streams", group_id="g", declared_broker_version="4.2.0")
    assert status(r, "broker_version") == "fail" and "KAFKA-20254" in r.check("broker_version").remedy
    assert run_preflight(f, "classic_to_streams", group_id="g", declared_broker_version="4.2.1").passed
    bad = run_preflight(f, "classic_to_streams", group_id="g", declared_broker_version="4.3.1")
    assert status(bad, "broker_version") == "fail"


@pytest.mark.parametrize("kwargs, check, expect_empty, outcome", [
    ({"members": 2}, "group_empty", None, "fail"),
    ({"members": 2}, "group_empty", False, "warn"),
    ({"members": 0, "streams_version": 0}, "feature_finalized", None, "fail"),
    ({"members": 0, "gtype": GroupType.CONSUMER}, "group_type", None, "fail"),
    ({"members": 2, "static": 1}, "static_membership", False, "fail"),
    ({"members": 0, "releases": ["4.3", "4.2"]}, "broker_version", None, "fail"),
])
def test_streams_offline_checks(kwargs, check, expect_empty, outcome):
    r = run_preflight(facts(**kwargs), "classic_to_streams", group_id="g", expect_empty=expect_empty)
    assert status(r, check) == outcome, r.render_text()


def test_feature_enablement():
    assert run_preflight(facts(streams_version=1), "enable_feature", feature="streams.version").check(
        "feature_level").evidence.endswith("nothing to do")
    # below the metadata.version where it is on by default: said, not refused (no dependency: the controller
    # accepts it, tests/integration/test_operators.py shows it on a real broker)
    r = run_preflight(facts(streams_version=0, mv=28), "enable_feature", feature="streams.version")
    assert status(r, "feature_level") == "pass" and "below 4.2-IV1" in r.check("feature_level").evidence
    assert run_preflight(facts(streams_version=0, mv=29, release="4.2"), "enable_feature", feature="streams.version",
                         declared_broker_version="4.2.1").passed


def test_report_renders_and_serialises():
    r = run_preflight(facts(group_version=0), "classic_to_consumer", group_id="g")
    text = r.render_text()
    assert text.startswith("Preflight classic_to_consumer for g: FAILED (1 check(s))")
    assert "[FAIL] feature_finalized: group.version finalized at 0" in text
    assert r.to_dict()["failures"] == ["feature_finalized"]


def test_unknown_mode():
    with pytest.raises(ValueError, match="unknown preflight mode"):
        run_preflight(facts(), "sideways", group_id="g")


@pytest.mark.parametrize("policy, severity, expected", [
    ("bidirectional", "fail", "pass"), ("downgrade", "fail", "pass"),
    ("upgrade", "fail", "fail"), ("disabled", "fail", "fail"), ("upgrade", "warn", "warn")])
def test_the_rollback_the_dag_offers_must_fit_the_migration_policy(policy, severity, expected):
    r = run_preflight(facts(coord={"group.consumer.migration.policy": policy}), "classic_to_consumer", group_id="g",
                      rollback=severity)
    assert status(r, "rollback_policy") == expected
    if expected != "pass":
        assert "offline" in r.check("rollback_policy").remedy
    assert "rollback_policy" not in [c.name for c in run_preflight(
        facts(coord={"group.consumer.migration.policy": policy}), "classic_to_consumer", group_id="g").checks]


def test_a_bad_rollback_severity_is_refused():
    with pytest.raises(ValueError, match="rollback must be"):
        run_preflight(facts(), "classic_to_consumer", group_id="g", rollback="maybe")


def test_the_version_remedy_says_how_to_read_the_brokers_own_release():
    remedy = run_preflight(facts(release="4.2", mv=29, gtype=GroupType.CLASSIC, members=0), "classic_to_streams",
                           group_id="g").check("broker_version").remedy
    assert "'Kafka version: X'" in remedy and "kafka.server:type=app-info" in remedy
    assert "prints the tool's version, not the broker's" in remedy


def test_cooperative_sticky_with_user_data_points_at_the_offline_dag():
    """librdkafka's cooperative-sticky writes assignment userData: telling the user to "switch to a built-in
    assignor" would send them to what they already use."""
    r = run_preflight(facts(assignor="cooperative-sticky", user_data={"m0": b"\x00\x01", "m1": b"\x00\x01"}),
                      "classic_to_consumer", group_id="g")
    check = r.check("custom_assignor")
    assert check.status == "fail" and "kip848_consumer_offline_migration" in check.remedy
    assert "built-in" not in check.remedy
    # a custom assignor: switch, or the same offline DAG
    r = run_preflight(facts(assignor="acme", user_data={"m0": b"x", "m1": b""}), "classic_to_consumer", group_id="g")
    assert "kip848_consumer_offline_migration" in r.check("custom_assignor").remedy
    # the policy refusal names it too
    r = run_preflight(facts(coord={"group.consumer.migration.policy": "disabled"}), "classic_to_consumer",
                      group_id="g")
    assert "kip848_consumer_offline_migration" in r.check("migration_policy").remedy


@pytest.mark.parametrize("assignor, brokers, expected", [
    ("range", "uniform,range", "warn"),        # range today, uniform by default tomorrow
    ("range", "range,uniform", "pass"),
    ("roundrobin", "uniform,range", "pass"),
    ("cooperative-sticky", "uniform,range", "pass"),
    ("range", "uniform", "fail"),              # the equivalent is not offered by the brokers
    ("acme", "uniform,range", "warn"),          # no equivalent
    # built-ins may be listed by class name
    ("range", "org.apache.kafka.coordinator.group.assignor.RangeAssignor", "pass"),
    ("range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor,com.acme.Zoned", "fail"),
])
def test_assignor_mapping_reads_the_brokers_assignors(assignor, brokers, expected):
    f = facts(assignor=assignor, coord={"group.consumer.assignors": brokers})
    r = run_preflight(f, "classic_to_consumer", group_id="g")
    assert status(r, "assignor_mapping") == expected, r.render_text()


def test_offline_consumer_modes():
    # the online refusals do not apply offline: userData is dropped with the classic group
    f = facts(members=0, user_data={}, coord={"group.consumer.migration.policy": "disabled"})
    r = run_preflight(f, "classic_to_consumer_offline", group_id="g")
    assert r.passed and {c.name for c in r.checks} >= {"group_empty", "feature_finalized", "assignor_mapping"}
    assert "migration_policy" not in {c.name for c in r.checks}
    # live members: fail, or warn when the DAG empties the group itself
    live = facts(members=2)
    assert status(run_preflight(live, "classic_to_consumer_offline", group_id="g"), "group_empty") == "fail"
    assert status(run_preflight(live, "classic_to_consumer_offline", group_id="g", expect_empty=False),
                  "group_empty") == "warn"
    back = facts(gtype=GroupType.CONSUMER, members=0)
    assert run_preflight(back, "consumer_to_classic_offline", group_id="g").passed
    assert status(run_preflight(facts(gtype=GroupType.STREAMS), "classic_to_consumer_offline", group_id="g"),
                  "group_type") == "fail"


def test_streams_to_classic_mode():
    f = facts(gtype=GroupType.STREAMS, members=0, release="4.2", mv=29)
    r = run_preflight(f, "streams_to_classic", group_id="g")
    assert r.passed and r.check("group_type").evidence.startswith("streams group")
    assert status(r, "broker_version") == "pass"  # the 4.2.0 bug concerns the way in, not the way back
    assert "already a classic group" in run_preflight(facts(members=0), "streams_to_classic",
                                                       group_id="g").check("group_type").evidence
    assert status(run_preflight(facts(gtype=GroupType.CONSUMER, members=0), "streams_to_classic", group_id="g"),
                  "group_type") == "fail"


def test_source_topics_and_topology():
    base = facts(members=0)
    f = PreflightFacts(base.brokers, base.features, base.coordinator, base.listing, base.description,
                       source_topics={"orders": 4, "payments": None},
                       committed_topics=("orders", "g-agg-repartition", "legacy"))
    r = run_preflight(f, "classic_to_streams", group_id="g", source_topics=["orders", "payments"])
    assert status(r, "source_topics") == "fail" and "payments" in r.check("source_topics").remedy
    topo = r.check("topology")
    assert topo.status == "warn" and "new: payments" in topo.evidence and "no longer read: legacy" in topo.evidence
    assert "repartition" not in topo.evidence  # the group's own internal topics are not source topics
    ok = PreflightFacts(base.brokers, base.features, base.coordinator, base.listing, base.description,
                        source_topics={"orders": 4}, committed_topics=("orders",))
    r = run_preflight(ok, "classic_to_streams", group_id="g", source_topics=["orders"])
    assert status(r, "source_topics") == "pass" and status(r, "topology") == "pass"
    # not given: not checked (and not guessed)
    assert "source_topics" not in {c.name for c in run_preflight(ok, "classic_to_streams", group_id="g").checks}


def test_cooperative_sticky_without_user_data_yet_is_not_called_safe():
    r = run_preflight(facts(assignor="cooperative-sticky"), "classic_to_consumer", group_id="g")
    check = r.check("custom_assignor")
    assert check.status == "warn" and "kip848_consumer_offline_migration" in check.remedy


def test_enabling_a_feature_checks_the_brokers_protocol_list():
    f = facts(streams_version=0, coord={"group.coordinator.rebalance.protocols": "classic,consumer"})
    r = run_preflight(f, "enable_feature", feature="streams.version")
    assert status(r, "protocol_enabled") == "fail" and "streams" in r.check("protocol_enabled").remedy
    assert status(run_preflight(f, "enable_feature", feature="group.version"), "protocol_enabled") == "pass"
    # share groups are not listed there: no such check
    assert "protocol_enabled" not in {c.name for c in run_preflight(f, "enable_feature",
                                                                     feature="share.version").checks}


def test_brokers_that_disagree_on_a_group_setting_fail_naming_each_broker_and_value():
    base = facts(releases=["4.3", "4.3", "4.3"])
    configs = tuple(GroupCoordinatorConfig(i, dict(COORD)) for i in (1, 2, 3))
    agreeing = replace(base, coordinators=configs)
    assert status(run_preflight(agreeing, "classic_to_consumer", group_id="g"), "brokers_agree") == "pass"
    rolling = replace(base, coordinators=(configs[0], GroupCoordinatorConfig(2, {**COORD, "group.consumer.max.size":
                                                                                 "5"}), configs[2]))
    report = run_preflight(rolling, "classic_to_consumer", group_id="g")
    assert not report.passed and report.check("brokers_agree").evidence == (
        "group.consumer.max.size: broker 1 = 10, broker 2 = 5, broker 3 = 10")
    # a setting only some brokers report (set on the first ones of a rolling change) counts as a disagreement
    partial = replace(base, coordinators=(configs[0], configs[1], GroupCoordinatorConfig(3, {
        k: v for k, v in COORD.items() if k != "group.streams.max.size"})))
    assert "broker 3 = (unset)" in run_preflight(partial, "classic_to_streams", group_id="g",
                                                 declared_broker_version="4.3.0").check("brokers_agree").evidence
    # settings a migration does not depend on may differ (a broker's own id, its log dirs, ...)
    unrelated = replace(base, coordinators=(configs[0], configs[1], GroupCoordinatorConfig(3, {
        **COORD, "group.share.record.lock.duration.ms": "1"})))
    assert status(run_preflight(unrelated, "classic_to_consumer", group_id="g"), "brokers_agree") == "pass"
    # a broker whose configs were not read: not known to agree
    unread = replace(base, coordinators=configs[:2])
    assert "broker(s) 3 were not read" in run_preflight(unread, "classic_to_consumer",
                                                        group_id="g").check("brokers_agree").evidence
    assert status(run_preflight(unread, "enable_feature", feature="streams.version", feature_level=1,
                                declared_broker_version="4.3.0"), "brokers_agree") == "fail"


@pytest.mark.parametrize("releases, outcome", [(["4.3"], "fail"), (["4.4", "4.3"], "fail"), (["4.4"], "warn")])
def test_a_static_streams_application_needs_every_broker_on_44(releases, outcome):
    """KAFKA-20169: the group.instance.id the application will run with on streams (its controller's config and
    the form's), which an empty classic group cannot show, is judged against every broker's release: one broker
    before 4.4 may be the coordinator, and it answers with a fatal INVALID_REQUEST."""
    r = run_preflight(facts(members=0, releases=releases), "classic_to_streams", group_id="g",
                      client_properties={"group.protocol": "streams", "group.instance.id": "wc-inst"})
    check = r.check("static_membership")
    assert check.status == outcome, r.render_text()
    assert "the application's config: group.instance.id=wc-inst" in check.evidence
    assert f"brokers {', '.join(sorted(set(releases)))}" in check.evidence
    if outcome == "fail":
        assert not r.passed and "a broker 4.3 answers" in check.remedy, check.remedy
        assert "INVALID_REQUEST 'Static membership is not yet supported.'" in check.remedy
    else:
        assert r.passed and "<group.instance.id>-<n>" in check.remedy


def test_without_the_application_config_the_static_check_says_so():
    r = run_preflight(facts(members=0, release="4.3"), "classic_to_streams", group_id="g")
    assert r.check("static_membership").evidence == "no static members (the application's config was not given)"
    r = run_preflight(facts(members=0, release="4.3"), "classic_to_streams", group_id="g",
                      client_properties={"group.protocol": "streams"})
    assert r.check("static_membership").evidence == "no static members" and r.passed

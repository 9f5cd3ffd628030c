"""Issue 30, item 9 on constructed facts: KIP-1251 (assignment epochs, 4.3.0), group configs outliving their group
(KAFKA-20236) and the CLI backend's refusal of offsets changes on streams groups (KAFKA-20454). The real-broker
counterparts are in tests/integration/test_changed_kafka_facts.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_kip848.kafka.errors import WrongGroupType
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
from airflow_provider_kip848.kafka.rules.offsets import refuse_offsets_change_by_tools
from airflow_provider_kip848.kafka.rules.preflight import PreflightFacts, run_preflight

COORD = {"group.coordinator.rebalance.protocols": "classic,consumer,streams",
         "group.consumer.migration.policy": "bidirectional"}
INTERVALS = {"group.consumer.assignment.interval.ms": "1000", "group.streams.assignment.interval.ms": "1000"}


def facts(releases=("4.3",), configs=None, members=0, exists=True, group_configs=None, has_offsets=None,
          configs_error=None) -> PreflightFacts:
    brokers = tuple(BrokerVersion(i + 1, r, f"{r}-IV0") for i, r in enumerate(releases))
    coordinators = tuple(GroupCoordinatorConfig(b.node_id, {**COORD, **(INTERVALS if b.release in ("4.3", "4.4") else {}),
                                                            **(configs or {})}) for b in brokers)
    features = ClusterFeatures({"metadata.version": Feature("metadata.version", 7, 30, 30),
                                "group.version": Feature("group.version", 0, 1, 1),
                                "streams.version": Feature("streams.version", 0, 1, 1)})
    ms = tuple(ConsumerGroupMember(f"m{i}", f"c{i}", "h", protocol=MemberProtocol.CLASSIC) for i in range(members))
    desc = ConsumerGroupDescription("g", GroupType.CLASSIC, "Stable" if members else "Empty", "range", 1, ms)
    return PreflightFacts(brokers, features, coordinators[0], GroupListing("g", GroupType.CLASSIC, desc.state,
                                                                           "consumer") if exists else None,
                          desc if exists else None, {m.member_id: b"" for m in ms}, coordinators=coordinators,
                          group_configs=group_configs, group_configs_error=configs_error,
                          group_has_offsets=has_offsets)


def check(f: PreflightFacts, mode: str, name: str, **kw):
    return run_preflight(f, mode, group_id="g", **kw).check(name)


@pytest.mark.parametrize("mode", ["classic_to_consumer", "classic_to_consumer_offline"])
def test_brokers_before_4_3_warn_for_moves_to_the_consumer_protocol(mode):
    c = check(facts(releases=("4.2",)), mode, "assignment_epochs")
    assert c.status == "warn" and "broker 1: 4.2 (< 4.3.0" in c.evidence
    assert "group.consumer.assignment.interval.ms not present (broker < 4.3)" in c.evidence
    assert "KIP-1251" in c.remedy and "STALE_MEMBER_EPOCH" in c.remedy
    ok = check(facts(), mode, "assignment_epochs")
    assert ok.status == "pass" and ok.evidence.endswith("group.consumer.assignment.interval.ms=1000 (broker 1)")


def test_a_rolling_broker_upgrade_names_the_old_brokers_and_each_interval():
    c = check(facts(releases=("4.3", "4.2", "4.3")), "classic_to_consumer", "assignment_epochs")
    assert c.status == "warn" and c.evidence.startswith("broker 2: 4.2 (< 4.3.0")
    assert "group.consumer.assignment.interval.ms=1000 (broker 1, 3)" in c.evidence
    assert "group.consumer.assignment.interval.ms not present (broker < 4.3) (broker 2)" in c.evidence
    same = check(facts(releases=("4.3", "4.3"), configs={"group.consumer.assignment.interval.ms": "500"}),
                 "classic_to_consumer", "assignment_epochs")
    assert same.evidence.endswith("group.consumer.assignment.interval.ms=500 on every broker")


def test_an_unknown_release_or_an_unread_config_is_said_so_not_guessed():
    c = check(facts(releases=("unknown",)), "classic_to_consumer", "assignment_epochs")
    assert c.status == "warn" and "is unknown" in c.evidence and "not read" in c.evidence
    f = facts()
    f = replace(f, coordinators=(GroupCoordinatorConfig(1, dict(COORD)),), coordinator=GroupCoordinatorConfig(1, COORD))
    assert "group.consumer.assignment.interval.ms not read" in check(f, "classic_to_consumer", "assignment_epochs").evidence


def test_streams_groups_have_assignment_epochs_since_4_2_and_other_modes_do_not_ask():
    c = check(facts(releases=("4.2",)), "classic_to_streams", "assignment_epochs", declared_broker_version="4.2.1")
    assert c.status == "pass" and "group.streams.assignment.interval.ms not present (broker < 4.3)" in c.evidence
    for mode in ("consumer_to_classic", "streams_to_classic", "consumer_to_classic_offline"):
        assert "assignment_epochs" not in [x.name for x in run_preflight(facts(releases=("4.2",)), mode,
                                                                          group_id="g").checks]


def test_group_configs_of_a_group_that_does_not_exist_are_named():
    c = check(facts(exists=False, group_configs={"consumer.session.timeout.ms": "30000"}),
              "classic_to_consumer_offline", "inherited_group_configs")
    assert c.status == "warn" and "does not exist but has group configs: consumer.session.timeout.ms=30000" in c.evidence
    assert "KAFKA-20236" in c.remedy and "--delete-config" in c.remedy


def test_an_empty_group_without_offsets_may_be_a_recreated_one():
    configs = {"consumer.heartbeat.interval.ms": "3000"}
    new = check(facts(group_configs=configs, has_offsets=False), "classic_to_consumer", "inherited_group_configs")
    assert new.status == "warn" and "no committed offsets (new, or recreated)" in new.evidence
    assert "consumer.heartbeat.interval.ms=3000" in new.evidence
    old = check(facts(group_configs=configs, has_offsets=True), "classic_to_consumer", "inherited_group_configs")
    assert (old.status, old.evidence) == ("pass", "the group's own configs: consumer.heartbeat.interval.ms=3000")
    running = check(facts(members=2, group_configs=configs), "classic_to_consumer", "inherited_group_configs")
    assert running.status == "pass"
    assert check(facts(exists=False, group_configs={}), "classic_to_consumer",
                 "inherited_group_configs").evidence == "no group configs set"


def test_group_configs_that_could_not_be_read_are_unknown_and_unread_ones_not_judged():
    c = check(facts(configs_error="DESCRIBE_CONFIGS refused"), "classic_to_consumer", "inherited_group_configs")
    assert c.status == "warn" and "could not be read: DESCRIBE_CONFIGS refused" in c.evidence
    # facts without the read (the fleet inventory's verdicts): no such check, rather than a guess
    assert "inherited_group_configs" not in [x.name for x in run_preflight(facts(), "classic_to_consumer",
                                                                             group_id="g").checks]


def test_the_tools_may_not_change_a_streams_groups_offsets():
    with pytest.raises(WrongGroupType) as err:
        refuse_offsets_change_by_tools("wc", GroupType.STREAMS)
    assert "Group 'wc' is a streams group" in str(err.value) and "KAFKA-20454" in str(err.value)
    assert err.value.actual is GroupType.STREAMS and "native backend" in err.value.remedy
    for other in (GroupType.CLASSIC, GroupType.CONSUMER, None):
        refuse_offsets_change_by_tools("g", other)

"""The bug windows of the online classic -> consumer upgrade (kafka/rules/upgrade_window.py) on constructed facts:
when the first member may switch, and which broker releases the preflight names. The real-broker counterpart (the
bug reproduced on 4.4.0, the roll waiting it out) is tests/integration/test_upgrade_window.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_kip848.kafka.model import GroupState, GroupType
from airflow_provider_kip848.kafka.rules.preflight import run_preflight
from airflow_provider_kip848.kafka.rules.preflight_model import PASS, WARN
from airflow_provider_kip848.kafka.rules.upgrade_window import (
    UpgradeWindowFacts,
    Window,
    check_upgrade_bug_windows,
    upgrade_window,
)
from tests.unit.test_preflight_rules import facts as preflight_facts

STABLE = UpgradeWindowFacts("g", GroupType.CLASSIC, GroupState.STABLE, ("m1", "m2"), generation=3, record_members=2,
                            state_after=GroupState.STABLE, members_after=("m2", "m1"))


def test_a_stable_classic_group_past_its_first_rebalance_is_open():
    verdict = upgrade_window(STABLE)
    assert verdict.window is Window.OPEN and verdict.generation == 3, verdict
    assert "Stable at generation 3 with 2 member(s)" in verdict.reason


@pytest.mark.parametrize(("change", "window", "words"), [
    ({"state": GroupState.PREPARING_REBALANCE, "generation": 0}, Window.WAIT, "KAFKA-21581/KAFKA-21584"),
    ({"state": GroupState.PREPARING_REBALANCE, "generation": None}, Window.WAIT, "KAFKA-21581/KAFKA-21584"),
    ({"state": GroupState.COMPLETING_REBALANCE}, Window.WAIT, "KAFKA-21582"),
    ({"state": GroupState.PREPARING_REBALANCE}, Window.WAIT, "KAFKA-21582"),
    ({"generation": 0}, Window.WAIT, "generation 0"),
    ({"state_after": GroupState.PREPARING_REBALANCE}, Window.WAIT, "began while the records were read"),
    ({"members_after": ("m1", "m3")}, Window.WAIT, "began while the records were read"),
    ({"generation": None, "record_members": None}, Window.UNKNOWN, "no GroupMetadata record"),
    ({"record_members": 1}, Window.UNKNOWN, "disagrees with its description"),
    ({"state_after": None, "members_after": None}, Window.UNKNOWN, "not described again"),
    ({"state": GroupState.DEAD}, Window.UNKNOWN, "state Dead"),
    ({"state": GroupState.UNKNOWN, "error": "Not allowed to read __consumer_offsets", "retriable": False},
     Window.UNKNOWN, "Not allowed"),
])
def test_not_open_when_rebalancing_at_generation_0_or_unknown(change, window, words):
    verdict = upgrade_window(replace(STABLE, **change))
    assert verdict.window is window and words in verdict.reason, verdict
    assert verdict.retriable is change.get("retriable", True)


@pytest.mark.parametrize(("fact", "words"), [
    (UpgradeWindowFacts("g", None, GroupState.UNKNOWN), "no such group"),
    (UpgradeWindowFacts("g", GroupType.CONSUMER, GroupState.STABLE, ("m1",)), "a consumer group"),
    (UpgradeWindowFacts("g", GroupType.CLASSIC, GroupState.EMPTY), "converts offline"),
])
def test_nothing_converts_online_so_the_window_is_open(fact, words):
    verdict = upgrade_window(fact)
    assert verdict.window is Window.OPEN and words in verdict.reason, verdict


@pytest.mark.parametrize(("releases", "declared", "status", "words"), [
    (["4.4"], None, WARN, "4.4 (unless 4.4.1 or later: declare it)"),
    (["4.4"], "4.4.0", WARN, "brokers 4.4:"),
    (["4.4"], "4.4.1", PASS, "fixed in 4.3.3, 4.4.1 and 4.5.0"),
    (["4.3"], "4.3.1", WARN, "brokers 4.3:"),
    (["4.3"], "4.3.3", PASS, "declared 4.3.3"),
    (["4.2"], "4.2.2", WARN, "brokers 4.2:"),
    (["4.0", "4.1"], None, WARN, "brokers 4.0, 4.1:"),
    (["4.5"], None, PASS, "brokers 4.5"),
    (["4.4", "4.5"], "4.4.0", WARN, "brokers 4.4:"),
])
def test_the_preflight_names_the_affected_and_the_fixed_releases(releases, declared, status, words):
    check = check_upgrade_bug_windows(releases, declared, downgrade=False)
    assert check.status == status and words in check.evidence, check
    if status == WARN:
        assert "KAFKA-21581/KAFKA-21584 (generation 0) and KAFKA-21582" in check.evidence, check
        assert "Stable at generation >= 1 with no rebalance in progress" in check.remedy, check


def test_the_way_back_names_kafka_21176_and_the_open_pr_and_the_check_after_the_roll():
    check = check_upgrade_bug_windows(["4.4"], "4.4.0", downgrade=True)
    assert check.status == WARN and "KAFKA-21176" in check.evidence and "apache/kafka#23514" in check.evidence
    assert check.remedy.startswith("Checked after the roll (prove_group_loads)"), check
    assert "way_back_path" in check.remedy, check


@pytest.mark.parametrize(("mode", "present"), [("classic_to_consumer", True), ("consumer_to_classic", True),
                                               ("classic_to_consumer_offline", False), ("classic_to_streams", False)])
def test_the_online_modes_carry_the_check(mode, present):
    kwargs = {"gtype": GroupType.CONSUMER} if mode.startswith("consumer") else {}
    names = [c.name for c in run_preflight(preflight_facts(release="4.4", **kwargs), mode, group_id="g").checks]
    assert ("upgrade_bug_windows" in names) is present, names

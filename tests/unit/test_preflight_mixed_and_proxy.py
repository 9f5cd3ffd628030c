"""Preflight rules of issue 47.5/47.6 on constructed facts: what the clients' bootstrap address advertises
(client_apis), a cluster of two releases (brokers_agree, features_agree). Their real-broker counterparts:
tests/integration/test_client_path_apis.py (a real proxy) and test_mixed_versions.py (4.4.0 beside 4.3.1)."""

from __future__ import annotations

import struct
from dataclasses import replace

from airflow_provider_kip848.kafka.model import AdvertisedApis, BrokerVersion, GroupCoordinatorConfig
from airflow_provider_kip848.kafka.rules.preflight import run_preflight
from kip848_harness.kafka_proxy import rewrite_addresses, rewrite_api_versions
from tests.unit.test_preflight_rules import COORD, facts

BROKER_APIS = {k: (0, 1) for k in (0, 1, 3, 18, 68, 69, 88, 89)}
FEATURES_43 = {"group.version": (0, 1), "share.version": (0, 1), "metadata.version": (7, 30)}
FEATURES_44 = {"group.version": (0, 1), "share.version": (0, 2), "metadata.version": (7, 33)}
LEVELS = {"group.version": 1, "share.version": 1, "metadata.version": 30}


def mixed(**kwargs):
    base = facts(**kwargs)
    brokers = (BrokerVersion(1, "4.4", "4.4-IV2", supported_features=FEATURES_44, finalized_features=dict(LEVELS)),
               BrokerVersion(2, "4.3", "4.3-IV0", supported_features=FEATURES_43, finalized_features=dict(LEVELS)),
               BrokerVersion(3, "4.3", "4.3-IV0", supported_features=FEATURES_43, finalized_features=dict(LEVELS)))
    configs = (GroupCoordinatorConfig(1, {**COORD, "group.streams.assignors": "sticky"}),
               GroupCoordinatorConfig(2, dict(COORD)), GroupCoordinatorConfig(3, dict(COORD)))
    return replace(base, brokers=brokers, coordinators=configs, coordinator=configs[0])


def test_a_setting_only_the_newer_release_has_warns_naming_each_release():
    report = run_preflight(mixed(), "classic_to_consumer", group_id="g")
    check = report.check("brokers_agree")
    assert check.status == "warn" and report.passed, report.render_text()
    assert "group.streams.assignors = sticky only on broker 1 (4.4)" in check.evidence
    assert "releases: broker 1: 4.4, broker 2: 4.3, broker 3: 4.3" in check.evidence
    assert report.check("broker_version").status == "warn"


def test_a_real_disagreement_still_fails_in_a_mixed_cluster():
    f = mixed()
    configs = (f.coordinators[0], GroupCoordinatorConfig(2, {**COORD, "group.consumer.max.size": "5"}),
               f.coordinators[2])
    check = run_preflight(replace(f, coordinators=configs), "classic_to_consumer", group_id="g").check("brokers_agree")
    assert check.status == "fail"
    assert "group.consumer.max.size: broker 1 (4.4) = 10, broker 2 (4.3) = 5, broker 3 (4.3) = 10" in check.evidence
    # a setting the *older* brokers have and the newer not is no upgrade artefact: it fails
    older_only = (GroupCoordinatorConfig(1, dict(COORD)),
                  GroupCoordinatorConfig(2, {**COORD, "group.streams.assignors": "sticky"}),
                  GroupCoordinatorConfig(3, {**COORD, "group.streams.assignors": "sticky"}))
    check = run_preflight(replace(f, coordinators=older_only), "classic_to_consumer", group_id="g").check(
        "brokers_agree")
    assert check.status == "fail" and "broker 1 (4.4) = (unset)" in check.evidence


def test_finalized_levels_that_differ_between_brokers_fail():
    f = mixed()
    lagging = replace(f.brokers[2], finalized_features={**LEVELS, "group.version": 0})
    report = run_preflight(replace(f, brokers=(*f.brokers[:2], lagging)), "classic_to_consumer", group_id="g")
    check = report.check("features_agree")
    assert check.status == "fail" and not report.passed
    assert "group.version: broker 1 (4.4) = 1, broker 2 (4.3) = 1, broker 3 (4.3) = 0" in check.evidence


def test_a_level_one_release_lacks_fails_and_one_all_support_passes():
    check = run_preflight(mixed(), "enable_feature", feature="share.version", feature_level=2).check("features_agree")
    assert check.status == "fail"
    assert "broker 1 (4.4): 0..2, broker 2 (4.3): 0..1, broker 3 (4.3): 0..1" in check.evidence
    ok = run_preflight(mixed(), "enable_feature", feature="group.version", feature_level=1).check("features_agree")
    assert ok.status == "pass" and "releases 4.3, 4.4" in ok.evidence


def test_a_broker_whose_features_were_not_read_is_unknown():
    f = mixed()
    unread = replace(f.brokers[1], supported_features={}, finalized_features={})
    check = run_preflight(replace(f, brokers=(f.brokers[0], unread, f.brokers[2])), "classic_to_consumer",
                          group_id="g").check("features_agree")
    assert check.status == "fail" and "broker 2 (4.3) were not read" in check.evidence


def with_clients(*apis: AdvertisedApis):
    return replace(facts(), client_apis=apis)


def test_client_apis_names_what_each_address_lacks():
    hidden = {k: v for k, v in BROKER_APIS.items() if k not in (68, 69)}
    f = with_clients(AdvertisedApis("proxy:9092", hidden), AdvertisedApis("broker:9092", BROKER_APIS))
    check = run_preflight(f, "classic_to_consumer", group_id="g").check("client_apis")
    assert check.status == "fail"
    assert check.evidence == "proxy:9092 does not advertise ConsumerGroupHeartbeat (API key 68)"
    # where the provider bootstraps too, its describe is needed as well
    f = with_clients(AdvertisedApis("proxy:9092", hidden, provider_uses=True))
    assert "ConsumerGroupDescribe (API key 69)" in run_preflight(f, "classic_to_consumer",
                                                                 group_id="g").check("client_apis").evidence
    # the way back to classic needs neither
    assert "client_apis" not in [c.name for c in run_preflight(f, "consumer_to_classic", group_id="g").checks]


def test_an_address_that_answered_nothing_is_unknown_and_fails():
    f = with_clients(AdvertisedApis("proxy:9092", error="answered ApiVersions without a single API"))
    check = run_preflight(f, "classic_to_streams", group_id="g", declared_broker_version="4.3.1").check("client_apis")
    assert check.status == "fail" and check.evidence == "proxy:9092 answered ApiVersions without a single API"
    assert "client_bootstrap_servers" in check.remedy


def test_facts_without_client_apis_skip_the_check():
    assert "client_apis" not in [c.name for c in run_preflight(facts(), "classic_to_consumer", group_id="g").checks]


def api_versions_body(keys, *, flexible: bool) -> bytes:
    if flexible:
        entries = b"".join(struct.pack(">hhh", k, 0, 1) + b"\x00" for k in keys)
        return b"\x00\x00" + bytes([len(keys) + 1]) + entries + b"\x00\x00\x00\x00" + b"\x00"
    return b"\x00\x00" + struct.pack(">i", len(keys)) + b"".join(struct.pack(">hhh", k, 0, 1) for k in keys) + \
        b"\x00\x00\x00\x00"


def test_the_proxy_drops_api_keys_in_both_encodings():
    for flexible, version in ((False, 2), (True, 4)):
        body = api_versions_body([0, 18, 68, 69], flexible=flexible)
        assert rewrite_api_versions(body, version, frozenset({68, 69})) == api_versions_body([0, 18],
                                                                                             flexible=flexible)
        assert rewrite_api_versions(body, version, frozenset(), empty=True) == api_versions_body([], flexible=flexible)


def test_the_proxy_rewrites_only_the_brokers_ports():
    body = b"\x00\x09127.0.0.1" + struct.pack(">i", 9092) + b"\x0a127.0.0.1" + struct.pack(">i", 9093)
    out = rewrite_addresses(body, "127.0.0.1", {9092: 19092})
    assert out == b"\x00\x09127.0.0.1" + struct.pack(">i", 19092) + b"\x0a127.0.0.1" + struct.pack(">i", 9093)

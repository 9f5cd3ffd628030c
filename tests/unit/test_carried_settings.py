"""Carrying an application's client settings over to its streams or consumer group's configs (pure rule)."""

from __future__ import annotations

import pytest

from airflow_provider_kip848.kafka.rules.carried_settings import carry_over, to_set

BROKER = {"group.streams.num.standby.replicas": "0", "group.streams.session.timeout.ms": "45000",
          "group.streams.heartbeat.interval.ms": "5000"}
NONE = {"streams.num.standby.replicas": None, "streams.session.timeout.ms": None,
        "streams.heartbeat.interval.ms": None}


def by_config(settings):
    return {s.config: s for s in settings}


def test_the_applications_standbys_are_carried_over():
    s = by_config(carry_over(NONE, {"num.standby.replicas": "1", "main.consumer.session.timeout.ms": "30000"}, {},
                             BROKER))
    assert s["streams.num.standby.replicas"].value == "1" and s["streams.num.standby.replicas"].changes
    assert s["streams.session.timeout.ms"].source == "application config (main.consumer.session.timeout.ms)"
    assert s["streams.heartbeat.interval.ms"].value is None
    assert s["streams.heartbeat.interval.ms"].source == "broker default (group.streams.heartbeat.interval.ms=5000)"
    assert to_set(list(s.values())) == {"streams.num.standby.replicas": "1", "streams.session.timeout.ms": "30000"}


def test_requested_wins_and_a_group_value_is_kept():
    s = by_config(carry_over({**NONE, "streams.num.standby.replicas": 2}, {"num.standby.replicas": "1"},
                             {"streams.session.timeout.ms": "20000"}, BROKER))
    assert s["streams.num.standby.replicas"].value == "2" and s["streams.num.standby.replicas"].source == "requested"
    kept = s["streams.session.timeout.ms"]
    assert kept.value is None and kept.current == "20000" and kept.source == "group config" and not kept.changes
    # asking for what is already there changes nothing
    same = by_config(carry_over({**NONE, "streams.session.timeout.ms": "20000"}, {},
                                {"streams.session.timeout.ms": "20000"}, BROKER))
    assert not same["streams.session.timeout.ms"].changes


def test_the_way_back_shows_what_the_classic_application_will_use():
    """Back on classic the application's own settings decide again: standbys that lived only in the
    streams group's config are lost unless the application config has them; the plan shows it."""
    from airflow_provider_kip848.kafka.rules.carried_settings import carry_back

    broker = {"group.streams.num.standby.replicas": "0", "group.streams.session.timeout.ms": "45000",
              "group.streams.heartbeat.interval.ms": "5000"}
    settings = {s.config: s for s in carry_back({"consumer.session.timeout.ms": "30000"},
                                                {"streams.num.standby.replicas": "1"}, broker)}
    standby = settings["num.standby.replicas"]
    assert (standby.current, standby.value, standby.changes) == ("1", "0", True)
    assert standby.source == "client default (num.standby.replicas=0)"
    session = settings["session.timeout.ms"]
    assert (session.current, session.value, session.source) == ("45000", "30000",
                                                                "application config (consumer.session.timeout.ms)")
    heartbeat = settings["heartbeat.interval.ms"]
    assert (heartbeat.current, heartbeat.value, heartbeat.changes) == ("5000", "3000", True)
    kept = {s.config: s for s in carry_back({"num.standby.replicas": "1"}, {"streams.num.standby.replicas": "1"},
                                            broker)}
    assert not kept["num.standby.replicas"].changes


CONSUMER_BROKER = {"group.consumer.session.timeout.ms": "45000", "group.consumer.heartbeat.interval.ms": "5000",
                   "group.consumer.min.session.timeout.ms": "45000", "group.consumer.max.session.timeout.ms": "60000",
                   "group.consumer.min.heartbeat.interval.ms": "5000",
                   "group.consumer.max.heartbeat.interval.ms": "15000"}


def test_a_consumer_applications_timeouts_are_carried_over_clamped_into_the_brokers_bounds():
    """KIP-848 ignores the consumer's session.timeout.ms and heartbeat.interval.ms: the group's configs decide.
    A value outside the brokers' bounds is moved to the bound, and the plan says so."""
    s = by_config(carry_over({}, {"session.timeout.ms": "10000", "heartbeat.interval.ms": "8000"}, {},
                             CONSUMER_BROKER, group_type="consumer"))
    assert set(s) == {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"}
    session = s["consumer.session.timeout.ms"]
    assert (session.current, session.value, session.changes) == (None, "45000", True)
    assert session.source == ("application config (session.timeout.ms), 10000 clamped to the brokers' minimum "
                              "(group.consumer.min.session.timeout.ms=45000)")
    heartbeat = s["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.source) == ("8000", "application config (heartbeat.interval.ms)")
    high = by_config(carry_over({}, {"session.timeout.ms": "90000"}, {}, CONSUMER_BROKER, group_type="consumer"))
    assert high["consumer.session.timeout.ms"].value == "60000"
    assert "clamped to the brokers' maximum (group.consumer.max.session.timeout.ms=60000)" in \
        high["consumer.session.timeout.ms"].source
    # nothing in the application: the brokers' default applies, named; a group value is kept
    kept = by_config(carry_over({}, {}, {"consumer.session.timeout.ms": "50000"}, CONSUMER_BROKER,
                                group_type="consumer"))
    assert kept["consumer.session.timeout.ms"].source == "group config" and not kept["consumer.session.timeout.ms"].changes
    assert kept["consumer.heartbeat.interval.ms"].source == "broker default (group.consumer.heartbeat.interval.ms=5000)"


def test_standbys_beyond_the_brokers_limit_are_clamped_and_a_requested_value_is_left_to_the_validation():
    s = by_config(carry_over(NONE, {"num.standby.replicas": "3"}, {},
                             {**BROKER, "group.streams.max.standby.replicas": "2"}))
    assert s["streams.num.standby.replicas"].value == "2"
    assert "3 clamped to the brokers' maximum (group.streams.max.standby.replicas=2)" in \
        s["streams.num.standby.replicas"].source
    asked = by_config(carry_over({**NONE, "streams.num.standby.replicas": "5"}, {}, {},
                                 {**BROKER, "group.streams.max.standby.replicas": "2"}))
    assert asked["streams.num.standby.replicas"].value == "5"  # the run's own value: its validation refuses it


def test_an_unknown_group_type_is_refused():
    with pytest.raises(ValueError, match="streams, consumer"):
        carry_over({}, {}, {}, {}, group_type="classic")

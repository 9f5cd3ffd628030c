"""Carrying a Streams application's assignment settings over to its streams group (pure rule)."""

from __future__ import annotations

from airflow_provider_kip848.kafka.rules.streams_settings import carry_over, to_set

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
    from airflow_provider_kip848.kafka.rules.streams_settings import carry_back

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

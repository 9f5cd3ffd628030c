"""The report's group-metrics section: samples in order, rebalances between the first and last, unknown stays unknown."""

from __future__ import annotations

from airflow_provider_kip848.changecontrol.monitoring import metrics_chart, metrics_section
from airflow_provider_kip848.changecontrol.report import render_markdown


def point(label, at, classic, consumer, consumer_rebalances, note=""):
    return {"label": label, "note": note, "sample": {
        "taken_at": at, "groups_by_protocol": {"classic": classic, "consumer": consumer},
        "streams_groups_by_state": {}, "classic_rebalance_count": 4, "consumer_rebalance_count": consumer_rebalances,
        "streams_rebalance_count": None}}


def test_rebalances_between_first_and_last_sample_and_unknown_stays_unknown():
    section = metrics_section([point("before", "2026-11-25T01:00:00+00:00", 3, 0, 0), None,
                               point("after", "2026-11-25T01:02:00+00:00", 2, 1, 5)])
    assert [r["label"] for r in section["samples"]] == ["before", "after"]
    assert section["rebalances_during_change"] == {"classic": 0, "consumer": 5, "streams": None}
    svg = metrics_chart(section)
    assert svg and "consumer groups" in svg
    text = render_markdown({"title": "t", "outcome": "migrated", "generated_at": "now", "metrics": section},
                           chart="metrics.svg")
    assert "| before | 2026-11-25T01:00:00+00:00 |" in text and "4 / 5 / ?" in text
    assert "Rebalances counted during the change: classic 0, consumer 5, streams ?" in text


def test_no_sample_no_section_and_one_sample_no_chart():
    assert metrics_section([None, None]) is None
    only = metrics_section([{"label": "before", "sample": None, "note": "no metrics_url on the connection"}])
    assert only["note"] == "no metrics_url on the connection" and metrics_chart(only) is None

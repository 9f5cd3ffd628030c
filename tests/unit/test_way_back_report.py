"""The run report says where a way back left the group (issue 46, item 4): "mixed", in bold, when some instances or
members are not back on the protocol the run came from, with the split's facts in their own section."""

from __future__ import annotations

from airflow_provider_kip848.changecontrol.report import render_markdown

MIXED = {"protocol": "classic", "back": False, "mixed": True, "not_back": ["orders:orders_1 (FATAL) is not running"],
         "members_not_back": ["orders: app-2 on consumer"],
         "summary": "the group is mixed (the coordinator: orders is consumer / Stable (classic: app-0; consumer: "
                    "app-2)); instances not back on classic: orders:orders_1 (FATAL) is not running"}


def test_a_mixed_group_after_the_way_back_is_said_in_the_summary_in_bold():
    text = render_markdown({"title": "t", "outcome": "failed", "generated_at": "now", "split": MIXED})
    line = next(x for x in text.splitlines() if x.startswith("- after the way back:"))
    assert line.startswith("- after the way back: **the group is mixed") and line.endswith("**"), line
    assert "orders:orders\\_1" in line or "orders:orders_1" in line, line
    assert "## After the way back" in text and '"members_not_back"' in text


def test_a_way_back_that_brought_everything_back_is_plain():
    back = {"back": True, "mixed": False, "summary": "every instance is back on classic (...)"}
    text = render_markdown({"title": "t", "outcome": "timed_out_rolled_back", "generated_at": "now", "split": back})
    assert "- after the way back: every instance is back on classic (...)" in text.replace("\\", ""), text


def test_a_hostile_name_in_the_split_stays_text():
    hostile = dict(MIXED, summary="the group is mixed (the platform: <img src=x onerror=alert(1)> [x](javascript:y))")
    line = next(x for x in render_markdown({"title": "t", "outcome": "failed", "generated_at": "now",
                                           "split": hostile}).splitlines() if x.startswith("- after the way back"))
    # escaped as every name is (kafka/inert.py): no tag, no link
    assert "\\<img" in line and " <img" not in line and "\\[x\\](javascript:" in line, line

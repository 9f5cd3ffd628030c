"""The downtime section and its chart, from a group's records (and the output records' timing)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from airflow_provider_kip848.changecontrol.downtime import downtime_chart, downtime_markdown, downtime_section
from airflow_provider_kip848.changecontrol.report import render_markdown
from airflow_provider_kip848.kafka.group_records import (
    CommitStall,
    GroupDowntime,
    GroupRecord,
    RecordType,
    commit_rate,
    group_history,
)

T0 = 1_790_000_000.0
SVG = "{http://www.w3.org/2000/svg}"


def offline_move() -> list[GroupRecord]:
    """A classic group of 2 stopped at once (Empty at +2), converted on the first consumer heartbeat (+5),
    the second member reconciled at +7.5; commits of t:0 before and after."""
    R = RecordType

    def commit(at, offset):
        return GroupRecord(R.OFFSET_COMMIT, "app", T0 + at, topic="t", partition=0, offset=offset)

    def member(at, mid):
        return GroupRecord(R.CONSUMER_GROUP_MEMBER_METADATA, "app", T0 + at, member_id=mid, protocol="consumer")

    def assign(at, mid, epoch, ok):
        return GroupRecord(R.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "app", T0 + at, member_id=mid, epoch=epoch,
                           reconciled=ok)

    def meta(kind, at, epoch):
        return GroupRecord(kind, "app", T0 + at, epoch=epoch)

    return [commit(0, 10), commit(1, 20), GroupRecord(R.GROUP_METADATA, "app", T0 + 2, epoch=6, members=0),
            GroupRecord(R.GROUP_METADATA, "app", T0 + 5, True), meta(R.CONSUMER_GROUP_METADATA, 5, 1),
            member(5, "a"), meta(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 5, 1), assign(5, "a", 1, True),
            meta(R.CONSUMER_GROUP_METADATA, 6, 2), member(6, "b"),
            meta(R.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 6, 2), assign(6, "a", 2, True),
            assign(6, "b", 2, False), assign(7.5, "b", 2, True), commit(8, 45), commit(9, 50)]


def downtime(records: list[GroupRecord]) -> GroupDowntime:
    stall = CommitStall("t:0", 6.5, T0 + 1.5, T0 + 8)
    history = group_history(records, members_before=2, state_before="Stable", target="consumer")
    return GroupDowntime(T0, history, {"t:0": stall}, (), tuple(commit_rate(records)))


def test_the_section_gives_the_gap_settling_rebalances_and_states_from_the_records():
    section = downtime_section(downtime(offline_move()), group_id="app", target="consumer")
    assert section["gap_source"] == "committed offsets" and section["output_gap"] is None
    assert section["processing_gap"]["seconds"] == 6.5 and section["processing_gap"]["partition"] == "t:0"
    # first member left at +2 (2 -> 0), Stable with every member on consumer at +5 (then again at +7.5)
    assert section["settle_s"] == 3 and section["rebalances"] == 3 and section["types"] == ["classic", "consumer"]
    assert [s["state"] for s in section["states"]] == ["Empty", "Stable", "Reconciling", "Stable"]
    text = "\n".join(downtime_markdown(section, "downtime.svg"))
    assert "6.500 s on `t:0`" in text and "Stable on consumer**: 3.000 s" in text  # a partition names a topic
    assert "![group timeline](downtime.svg)" in text and "classic -> consumer" in text
    assert ("**States**: classic Empty (none; 14:13:22.000) -> consumer Stable (1 consumer; 14:13:25.000) -> "
            "consumer Reconciling (2 consumer; 14:13:26.000) -> consumer Stable (2 consumer; 14:13:27.500)") in text


def test_an_output_gap_takes_precedence_and_both_are_kept():
    timing = {"longest": {"partition": "out:1", "seconds": 5.9, "started_at": T0 + 1.8, "ended_at": T0 + 7.7},
              "partitions": [{"partition": "out:1", "seconds": 5.9, "started_at": T0 + 1.8, "ended_at": T0 + 7.7},
                             {"partition": "out:0", "seconds": 5.1, "started_at": T0 + 2, "ended_at": T0 + 7.1}],
              "rate": [[T0, 10.0], [T0 + 1, 12.0], [T0 + 2, 0.0], [T0 + 8, 30.0]]}
    section = downtime_section(downtime(offline_move()), group_id="app", target="consumer", output_timing=timing)
    assert section["gap_source"] == "output records" and section["processing_gap"]["seconds"] == 5.9
    assert section["committed_gap"]["seconds"] == 6.5
    text = "\n".join(downtime_markdown(section))
    assert "5.900 s on `out:1`" in text and "Longest commit stall: 6.500 s" in text and "| `out:0` | 5.100 |" in text


def test_nothing_in_the_records_stays_unknown():
    empty = GroupDowntime(T0, group_history([], target="streams"), {})
    section = downtime_section(empty, group_id="g", target="streams")
    assert section["processing_gap"] is None and section["settle_s"] is None and section["rebalances"] == 0
    text = "\n".join(downtime_markdown(section))
    assert "none measured" in text and "not in the records" in text
    assert downtime_chart(section) is None


def test_the_chart_has_members_by_protocol_rates_and_the_state_band():
    timing = {"longest": None, "partitions": [], "rate": [[T0, 10.0], [T0 + 8, 30.0]]}
    section = downtime_section(downtime(offline_move()), group_id="app", target="consumer", output_timing=timing)
    svg = downtime_chart(section)
    assert svg is not None
    root = ET.fromstring(svg)
    texts = {t.text for t in root.iter(f"{SVG}text")}
    assert {"consumer members", "committed records/s", "output records/s"} <= texts
    titles = [t.text or "" for t in root.iter(f"{SVG}title")]
    for state in ("classic Empty", "consumer Stable", "consumer Reconciling"):
        assert any(t.startswith(state) for t in titles), state


def test_the_report_writes_the_section_and_its_chart(tmp_path):
    from airflow_provider_kip848.changecontrol.report import write_report

    section = downtime_section(downtime(offline_move()), group_id="app", target="consumer")
    files = write_report(str(tmp_path), {"title": "t", "outcome": "migrated", "generated_at": "now", "downtime": section})
    assert ET.parse(files["downtime_chart"]).getroot().tag == f"{SVG}svg"
    assert "![group timeline](downtime.svg)" in (tmp_path / "report.md").read_text()
    error = render_markdown({"title": "t", "outcome": "migrated", "generated_at": "now",
                             "downtime": {"error": "no access"}})
    assert "Not measured: no access" in error


def test_the_commit_rate_counts_offsets_moved_per_second_and_zero_where_none_moved():
    rate = commit_rate(offline_move())
    assert rate[0] == (T0, 0.0) and rate[1] == (T0 + 1, 10.0)  # the first commit has no base
    assert dict(rate)[T0 + 8] == 25.0 and dict(rate)[T0 + 9] == 5.0 and dict(rate)[T0 + 4] == 0.0
    assert len(rate) == 10 and commit_rate([]) == []

"""The validation verdicts without Spark: the builders both jobs share, the wave spec, its read plan and report.

The Spark parts (frames, one collect per check) are tested on real data in
tests/integration/test_spark.py; here the rules that turn figures into a
verdict, and the wave spec's strict reading, are pinned down.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kip848.kafka.errors import Kip848Error
from airflow_provider_kip848.kafka.model import OffsetSnapshot, PartitionOffsets, TopicPartition
from airflow_provider_kip848.spark import checks, wave
from airflow_provider_kip848.spark.checks import Verdict
from airflow_provider_kip848.spark.report import render_html, wave_report_dict

TP = TopicPartition


def snapshot(group_id: str, committed: dict[tuple[str, int], int | None], log_end: int = 100) -> OffsetSnapshot:
    parts = tuple(PartitionOffsets(t, p, c, 0, log_end) for (t, p), c in sorted(committed.items()))
    return OffsetSnapshot("cluster-1", group_id, "classic", "Stable", "2026-11-25T09:00:00+00:00", parts)


# -- the shared builders ------------------------------------------------------------------------------

def test_offsets_verdict_counts_each_status_and_fails_on_lost_progress():
    rows = [{"topic": "t", "partition": p, "before": b, "after": a, "status": s} for p, b, a, s in [
        (0, 10, 10, "equal"), (1, 10, 12, "advanced"), (2, 10, 7, "regressed"), (3, 5, None, "missing"),
        (4, None, 3, "new")]]
    v = checks.offsets_verdict(rows)
    assert not v.passed and v.check == "offsets_preserved"
    assert v.counts == {"equal": 1, "advanced": 1, "regressed": 1, "missing": 1, "new": 1}
    assert [o["partition"] for o in v.offending] == [2, 3]
    assert v.summary == "2 partition(s) lost or moved progress (equal 1, advanced 1, regressed 1, missing 1, new 1)"
    strict = checks.offsets_verdict(rows[:2], allow_advanced=False)
    assert not strict.passed and [o["status"] for o in strict.offending] == ["advanced"]
    assert checks.offsets_verdict(rows[:2]).summary == "committed offsets preserved (equal 1, advanced 1)"
    assert checks.offsets_verdict([]).passed


def test_offsets_rows_join_two_snapshots_by_partition_with_a_status_each():
    before = snapshot("g", {("b", 0): 10, ("a", 1): 10, ("a", 0): 10, ("a", 2): 5, ("c", 0): None, ("d", 0): None})
    after = snapshot("g", {("a", 0): 10, ("a", 1): 12, ("b", 0): 7, ("c", 0): 4, ("d", 0): None, ("e", 0): 1})
    rows = checks.offsets_rows(before, after)
    assert [(r["topic"], r["partition"], r["before"], r["after"], r["status"]) for r in rows] == [
        ("a", 0, 10, 10, "equal"), ("a", 1, 10, 12, "advanced"), ("a", 2, 5, None, "missing"),
        ("b", 0, 10, 7, "regressed"), ("c", 0, None, 4, "new"), ("d", 0, None, None, "none"), ("e", 0, None, 1, "new")]
    assert checks.offsets_verdict(rows).counts == {"equal": 1, "advanced": 1, "regressed": 1, "missing": 1, "new": 2}


def test_lag_rows_a_partition_without_a_commit_lags_by_its_whole_log():
    parts = (PartitionOffsets("t", 1, 40, 0, 100), PartitionOffsets("t", 0, None, 20, 100),
             PartitionOffsets("t", 2, 120, 0, 100), PartitionOffsets("t", 3, 5, 0, None),
             PartitionOffsets("t", 4, None, None, None))
    snap = OffsetSnapshot("cluster-1", "g", "classic", "Stable", "2026-11-25T09:00:00+00:00", parts)
    assert checks.lag_rows(snap) == [{"topic": "t", "partition": 0, "lag": 80}, {"topic": "t", "partition": 1, "lag": 60},
                                     {"topic": "t", "partition": 2, "lag": 0}, {"topic": "t", "partition": 3, "lag": 0},
                                     {"topic": "t", "partition": 4, "lag": None}]


def test_lag_verdict_total_and_per_partition_limits_and_before():
    rows = [{"topic": "t", "partition": 0, "lag": 3}, {"topic": "t", "partition": 1, "lag": None},
            {"topic": "t", "partition": 2, "lag": 9}]
    v = checks.lag_verdict(rows, max_total_lag=12, max_partition_lag=5)
    assert not v.passed and v.offending == [{"topic": "t", "partition": 2, "lag": 9}]
    assert v.counts == {"total_lag": 12, "max_partition_lag": 9, "partitions": 3}
    assert v.data == {"lag_after": {"t:0": 3, "t:1": 0, "t:2": 9}}
    assert checks.lag_verdict(rows, max_total_lag=12).passed
    before = checks.lag_verdict(rows[:1], max_total_lag=10**18, label="before")
    both = checks.with_lag_before(v, before)
    assert both.summary.endswith("(before: 3)") and both.data == {"lag_before": {"t:0": 3}, **v.data}
    assert both.passed == v.passed


def test_continuity_verdict_passes_only_without_gaps_extra_duplicates_or_unparsable_ids():
    ok = checks.continuity_verdict(records=10, unparsable=0, duplicates=0, duplicated_ids=0, listed_duplicates=[],
                                   lo=0, hi=9, missing_ids=0, listed_missing=[])
    assert ok.passed and ok.summary == "10 records, ids 0..9: 0 duplicate(s) over 0 id(s), 0 missing id(s)"
    bad = checks.continuity_verdict(records=12, unparsable=1, duplicates=3, duplicated_ids=2, listed_duplicates=[4, 5],
                                    lo=0, hi=9, missing_ids=1, listed_missing=[7])
    assert not bad.passed
    assert bad.offending == [{"duplicated_id": 4}, {"duplicated_id": 5}, {"missing_id": 7}]
    assert bad.counts == {"records": 12, "duplicates": 3, "duplicated_ids": 2, "missing_ids": 1, "unparsable": 1}
    assert bad.summary.endswith(", 1 record(s) without an id")
    allowed = checks.continuity_verdict(records=12, unparsable=0, duplicates=3, duplicated_ids=2,
                                        listed_duplicates=[4, 5], lo=0, hi=9, missing_ids=0, listed_missing=[],
                                        allowed_duplicates=3)
    assert allowed.passed


def test_missing_ids_are_named_from_the_first_gaps_up_to_the_limit():
    assert checks.missing_from_gaps([(3, 4), (9, 9)]) == [3, 4, 9]
    assert checks.missing_from_gaps([(0, 10**9)], limit=5) == [0, 1, 2, 3, 4]
    assert checks.missing_from_gaps([]) == []


def test_counts_verdict_explains_missing_offsets_only_when_told():
    ranges = {TP("t", 0): (0, 33), TP("t", 1): (10, 10), TP("t", 2): (0, 5)}
    counted = {("t", 0): 30, ("t", 2): 5}
    plain = checks.counts_verdict(counted, ranges)
    assert not plain.passed and plain.counts == {"records": 35, "offsets": 38, "missing_offsets": 3}
    assert [o["partition"] for o in plain.offending] == [0]
    told = checks.counts_verdict(counted, ranges, explained_by="transactions")
    assert told.passed and "explained by transactions" in told.summary
    more = checks.counts_verdict({("t", 0): 34}, {TP("t", 0): (0, 33)}, explained_by="compaction")
    assert not more.passed, "more records than offsets is never explained"
    with pytest.raises(ValueError, match="explained_by"):
        checks.counts_verdict({}, {}, explained_by="retention")


def test_id_sources_are_key_value_or_a_json_field():
    for ok in ("key", "value", "json:order_id"):
        assert checks.check_id_source(ok) == ok
    for bad in ("json:", "header:x", None, 3):
        with pytest.raises(ValueError, match="id_source"):
            checks.check_id_source(bad)


# -- the wave spec ------------------------------------------------------------------------------------

def wave_dict(**overrides) -> dict:
    before = snapshot("g1", {("in", 0): 10, ("in", 1): 20})
    spec = {
        "title": "wave 1", "bootstrap_servers": "127.0.0.1:9092", "reader": "python", "output_dir": "/tmp/out",
        "groups": [
            {"group_id": "g1", "app": "orders",
             "offsets_preserved": {"before": before.to_dict(), "after": "/snaps/orders/g1.after.json"},
             "lag": {"after": "/snaps/orders/g1.after.json", "max_total_lag": 5},
             "continuity": {"ranges": {"out:0": [0, 100], "out:1": [5, 50]}, "id_source": "json:id",
                            "expected_min": 0, "expected_max": 144},
             "counts": {"between": [{"out:0": {"log_start": 0, "log_end": 0}},
                                    {"out:0": {"log_start": 0, "log_end": 100}}]}},
            {"group_id": "g2", "counts": {"ranges": {"out:0": [50, 150], "other:0": [0, 0]},
                                          "explained_by": "compaction"},
             "output_timing": {"ranges": {"out:0": [100, 200]}, "max_gap_seconds": "2.5"}},
            {"group_id": "g3", "continuity": {"ranges": {"out2:0": [0, 10]}, "id_source": "key", "id_type": "int"}},
        ],
    }
    spec.update(overrides)
    return spec


def test_a_wave_spec_reads_each_groups_checks_and_round_trips():
    spec = wave.WaveSpec.from_dict(wave_dict())
    assert [g.group_id for g in spec.groups] == ["g1", "g2", "g3"]
    g1, g2, g3 = spec.groups
    assert g1.checks == ("offsets_preserved", "lag", "continuity", "counts") and g1.app == "orders"
    assert isinstance(g1.offsets_preserved.before, OffsetSnapshot) and g1.offsets_preserved.after.endswith(".json")
    assert g1.counts.ranges == {TP("out", 0): (0, 100)}, "between two captures: what was written in between"
    assert g2.checks == ("counts", "output_timing") and g2.counts.explained_by == "compaction"
    assert g2.output_timing == wave.TimingCheck({TP("out", 0): (100, 200)}, 2.5)
    assert g3.continuity.id_type == "int" and g3.continuity.expected_min is None
    assert spec.needs_records and spec.settings().bootstrap_servers == "127.0.0.1:9092"
    again = wave.WaveSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec


@pytest.mark.parametrize("change, fragment", [
    ({"groups": []}, "non-empty list"),
    ({"groups": "g1"}, "non-empty list"),
    ({"format": "something-else"}, "not a wave validation spec"),
    ({"version": 2}, "version 2"),
    ({"reader": "spark"}, "reader must be one of"),
    ({"bootstrap_servers": None}, "names no bootstrap_servers"),
    ({"groups": [{"group_id": "g1"}]}, "asks for no check"),
    ({"groups": [{"group_id": " g1", "counts": {"ranges": {}}}]}, "whitespace"),
    ({"groups": [{"group_id": "g1", "counts": {"ranges": {}}}, {"group_id": "g1", "lag": {"after": "/a"}}]},
     "listed twice"),
    ({"groups": [{"group_id": "g1", "count": {"ranges": {}}}]}, "unknown keys"),
    ({"groups": [{"group_id": "g1", "counts": {"ranges": {}, "explain": "x"}}]}, "unknown keys"),
    ({"groups": [{"group_id": "g1", "counts": {}}]}, "needs 'ranges' or 'between'"),
    ({"groups": [{"group_id": "g1", "counts": {"ranges": {"t:0": [9, 3]}}}]}, "0 <= start <= end"),
    ({"groups": [{"group_id": "g1", "counts": {"ranges": {"t:x": [0, 3]}}}]}, "bad ranges"),
    ({"groups": [{"group_id": "g1", "counts": {"ranges": {}, "explained_by": "retention"}}]}, "explained_by"),
    ({"groups": [{"group_id": "g1", "output_timing": {"ranges": {}, "max_gap": 3}}]}, "unknown keys"),
    ({"groups": [{"group_id": "g1", "output_timing": {"ranges": {}, "max_gap_seconds": -1}}]}, "max_gap_seconds"),
    ({"groups": [{"group_id": "g1", "output_timing": {}}]}, "needs 'ranges' or 'between'"),
    ({"groups": [{"group_id": "g1", "continuity": {"ranges": {}, "id_source": "header"}}]}, "id_source"),
    ({"groups": [{"group_id": "g1", "continuity": {"ranges": {}, "id_type": "string"}}]}, "id_type"),
    ({"groups": [{"group_id": "g1", "continuity": {"ranges": {}, "allowed_duplicates": -1}}]}, "allowed_duplicates"),
    ({"groups": [{"group_id": "g1", "lag": {"after": None}}]}, "snapshot path or a snapshot object"),
    ({"groups": [{"group_id": "g1", "lag": {"after": {"format": "x"}}}]}, "not an offsets snapshot"),
    ({"groups": [{"group_id": "g1", "lag": {"after": "/a", "max_total_lag": "lots"}}]}, "max_total_lag"),
    ({"groups": [{"group_id": "g1", "lag": {"after": "/a", "max_total_lag": None}}]}, "give lag.before"),
    ({"groups": [{"group_id": "g1", "lag": {"after": "/a", "before": "/b", "max_total_lag": None,
                                            "margin_records": -1}}]}, "margin_records"),
    ({"groups": [{"group_id": "g1", "offsets_preserved": {"before": "/a", "after": "/b", "allow_advanced": "?"}}]},
     "allow_advanced"),
])
def test_a_bad_wave_spec_is_refused_with_the_reason(change, fragment):
    with pytest.raises(Kip848Error, match=fragment):
        wave.WaveSpec.from_dict(wave_dict(**change))


def test_a_wave_of_snapshot_checks_only_needs_no_cluster():
    spec = wave.WaveSpec.from_dict({"groups": [{"group_id": "g", "lag": {"after": "/a"}}]})
    assert not spec.needs_records and wave.read_ranges(spec) == {} and wave.range_tags(spec) == []


def test_inline_snapshots_replaces_every_path_by_its_snapshot():
    after = snapshot("g1", {("in", 0): 12, ("in", 1): 20})
    read: list[str] = []

    def read_text(path: str) -> str:
        read.append(path)
        return after.to_json()

    spec = wave.inline_snapshots(wave.WaveSpec.from_dict(wave_dict()), read_text)
    g1 = spec.groups[0]
    assert g1.offsets_preserved.after == after and g1.lag.after == after and g1.lag.before is None
    assert read == ["/snaps/orders/g1.after.json"] * 2
    text = json.dumps(spec.to_dict())
    assert "/snaps/" not in text and wave.WaveSpec.from_dict(json.loads(text)) == spec


def test_the_wave_reads_each_partition_once_and_tags_records_per_group_and_partition():
    spec = wave.WaveSpec.from_dict(wave_dict())
    assert wave.id_sources(spec) == [("json:id", "long"), ("key", "int")]
    assert wave.read_partitions(spec) == [TP("out", 0), TP("out", 1), TP("out2", 0)]
    # (gk, topic, partition, pk, continuity range, counts range, output-timing range, id source)
    assert wave.range_tags(spec) == [
        (0, "out", 0, 0, 0, 100, 0, 100, None, None, 0),
        (0, "out", 1, 1, 5, 50, None, None, None, None, 0),
        (1, "out", 0, 0, None, None, 50, 150, 100, 200, None),
        (2, "out2", 0, 2, 0, 10, None, None, None, None, 1),
    ], "an empty range (other:0) reads nothing"
    assert wave.read_ranges(spec) == {TP("out", 0): (0, 200), TP("out", 1): (5, 50), TP("out2", 0): (0, 10)}


# -- the verdicts of a wave ---------------------------------------------------------------------------

def verdict(check: str, passed: bool) -> Verdict:
    return Verdict(check, passed, f"{check} {'ok' if passed else 'bad'}")


def test_the_wave_passes_only_when_every_group_passes_every_check():
    groups = [wave.GroupVerdicts("g1", (verdict("lag", True), verdict("partition_counts", True)), "a"),
              wave.GroupVerdicts("g2", (verdict("lag", True), verdict("record_continuity", False)), "b")]
    overall = wave.overall_verdict(groups)
    assert not overall.passed and overall.check == "wave"
    assert overall.counts == {"groups": 2, "passed": 1, "failed": 1, "checks": 4, "failed_checks": 1}
    assert overall.offending == [{"group_id": "g2", "app": "b", "failed_checks": ["record_continuity"]}]
    assert overall.summary == "1 of 2 group(s) failed: g2 (record_continuity)"
    assert wave.overall_verdict(groups[:1]).passed
    assert wave.overall_verdict(groups[:1]).summary == "all 1 group(s) passed (2 check(s))"
    assert not wave.overall_verdict([]).passed, "a wave that judged nothing proves nothing"
    assert not wave.GroupVerdicts("g", ()).passed
    assert wave.GroupVerdicts.from_dict(json.loads(json.dumps(groups[1].to_dict()))) == groups[1]


def test_the_wave_report_and_its_page_show_every_group_failed_first():
    groups = [wave.GroupVerdicts("g-ok", (verdict("lag", True),)),
              wave.GroupVerdicts("g-bad", (verdict("partition_counts", False),), "orders")]
    report = wave_report_dict("wave 3", wave.overall_verdict(groups), [g.to_dict() for g in groups], {"reader": "x"})
    assert report["passed"] is False and report["overall"]["counts"]["failed"] == 1
    page = render_html(report)
    assert page.index("g-bad (orders): FAILED") < page.index("g-ok: PASSED")
    assert "wave 3: FAILED" in page and "1 of 2 group(s) failed" in page
    line = json.loads(wave.summary_line(report))
    assert line == {"passed": False, "files": {}, "overall": report["overall"]["summary"],
                    "groups": {"g-ok": True, "g-bad": False}}

"""The downtime section and its chart, from a folded timeline."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from airflow_provider_kip848.changecontrol.downtime import downtime_chart, downtime_markdown, downtime_section
from airflow_provider_kip848.kafka.model.groups import GroupState, GroupType
from airflow_provider_kip848.kafka.timeline import GroupObservation, fold
from tests.unit.test_timeline import offline_migration

T0 = 1_790_000_000.0


def shifted(looks):
    return [GroupObservation(at=T0 + o.at, type=o.type, state=o.state, members=o.members, group_epoch=o.group_epoch,
                             committed=o.committed, log_end=o.log_end, error=o.error) for o in looks]


def test_the_section_gives_the_gap_settling_and_rebalances_from_the_looks():
    tl = fold(shifted(offline_migration()), target_type=GroupType.CONSUMER, expected_members=2)
    section = downtime_section(tl, group_id="app")
    assert section["gap_source"] == "committed offsets"
    assert section["processing_gap"]["seconds"] == 9 and section["processing_gap"]["partition"] == "t:0"
    assert section["settle_s"] == 7 and section["rebalances_seen"] == 4 and not section["rebalances_exact"]
    text = "\n".join(downtime_markdown(section, "timeline.svg"))
    assert "9.0 s on t:0" in text and "Stable on consumer**: 7.0 s" in text and "at least" in text and "![group timeline](timeline.svg)" in text


def test_an_output_gap_takes_precedence_and_says_so():
    tl = fold(shifted(offline_migration()), target_type=GroupType.CONSUMER)
    out = {"seconds": 8.2, "started_at": T0 + 9.5, "ended_at": T0 + 17.7, "partition": "out:0"}
    section = downtime_section(tl, group_id="app", output_gap=out)
    assert section["gap_source"] == "output records" and section["processing_gap"]["seconds"] == 8.2
    assert section["committed_gap"]["seconds"] == 9  # both kept
    assert "8.2 s on out:0" in "\n".join(downtime_markdown(section))


def test_nothing_seen_stays_unknown():
    looks = [GroupObservation.unknown(T0, "down"), GroupObservation.unknown(T0 + 1, "down")]
    section = downtime_section(fold(looks, target_type=GroupType.STREAMS), group_id="g")
    assert section["processing_gap"] is None and section["settle_s"] is None and section["resolution_s"] is None
    text = "\n".join(downtime_markdown(section))
    assert "not measured" in text and "not seen" in text and "precision unknown" in text


def test_the_chart_is_svg_with_the_state_band_and_breaks_at_unknown_looks():
    looks = shifted(offline_migration())
    looks.insert(5, GroupObservation.unknown(T0 + 4.5, "paused"))
    svg = downtime_chart(fold(looks, target_type=GroupType.CONSUMER), group_id="app")
    assert svg is not None
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    for state in ("Stable", "PreparingRebalance", "Empty", "unknown"):
        assert any(t and t.startswith(state) for t in titles), state
    # the consumer and classic member lines, lag and rate are in the legend
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"classic members", "consumer members", "lag (records)", "committed records/s"} <= set(texts)
    assert downtime_chart(fold(looks[:1], target_type=GroupType.CONSUMER), group_id="app") is None


def test_states_merge_into_steps():
    looks = [GroupObservation(at=T0 + t, type=GroupType.CONSUMER, state=GroupState.STABLE, members={"consumer": 1})
             for t in range(20)]
    svg = downtime_chart(fold(looks, target_type=GroupType.CONSUMER), group_id="g")
    assert svg is not None and svg.count("<title>Stable from") == 1

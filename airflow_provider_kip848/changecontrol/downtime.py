"""The report's downtime section: how long the application stood still and how long its group took to settle.

Built from the group's :class:`~airflow_provider_kip848.kafka.timeline.Timeline`
(looks taken by the run while it changed the group) and, where the application
has an output topic, the gap the validation job measured from the output
records' timestamps. The section says which source each figure comes from and
its precision (the longest interval between two known looks); unknown values
stay unknown, never 0. The chart shows live members by protocol, lag and
committed records per second, with the group's state as a band above.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from airflow_provider_kip848.changecontrol.plot import bar_chart_svg, line_chart_svg
from airflow_provider_kip848.kafka.group_records import CommitStall, GroupHistory
from airflow_provider_kip848.kafka.timeline import Timeline

#: partitions listed by their longest stall in the report (all are in the JSON)
TOP_PARTITIONS = 10
#: bars in the stalls chart
MAX_BARS = 30


def downtime_section(timeline: Timeline, *, group_id: str,
                     output_gap: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The report section for one group. ``output_gap``: the validation job's longest gap between output
    records (``seconds``, ``started_at``, ``ended_at``, ``partition``), when there is an output topic."""
    s = timeline.summary()
    committed_gap = None if s.longest_gap is None else {**s.longest_gap.to_dict(),
                                                         "started": _iso(s.longest_gap.started_at),
                                                         "ended": _iso(s.longest_gap.ended_at)}
    ranked = sorted(s.gaps.values(), key=lambda g: (-g.seconds, g.partition))
    return {
        "group_id": group_id,
        "target_type": timeline.target_type.value,
        "looks": s.looks,
        "unknown_looks": s.unknown_looks,
        "resolution_s": None if s.resolution_s is None else round(s.resolution_s, 3),
        "first_member_left": _iso(s.first_member_left_at),
        "empty": _iso(s.empty_at),
        "stable_on_target": _iso(s.stable_on_target_at),
        "settle_s": None if s.settle_s is None else round(s.settle_s, 3),
        "rebalances_seen": s.rebalances_seen,
        "rebalances_exact": s.rebalances_exact,
        "type_changes": s.type_changes,
        "gap_source": "output records" if output_gap else "committed offsets",
        "processing_gap": dict(output_gap) if output_gap else committed_gap,
        "committed_gap": committed_gap,
        "partitions": [g.to_dict() for g in ranked],
    }


def downtime_chart(timeline: Timeline, *, group_id: str) -> str | None:
    """The timeline chart (SVG), or None with fewer than two looks."""
    if timeline.looks < 2:
        return None
    return line_chart_svg(timeline.series(), band=timeline.states(), title=f"Group {group_id} through the change",
                          x_label="seconds since the first look")


def downtime_markdown(section: Mapping[str, Any], chart: str | None = None) -> list[str]:
    """Markdown lines of the section (``chart``: the chart's file name next to the report)."""
    gap = section.get("processing_gap")
    lines = ["## Downtime", ""]
    if gap:
        end = " (still open at the last look: at least this long)" if gap.get("open") else ""
        where = f" on {gap['partition']}" if gap.get("partition") else ""
        lines.append(f"- **Processing gap** ({section['gap_source']}): {gap['seconds']:.1f} s{where}, "
                     f"{gap.get('started') or _iso(gap.get('started_at'))} -> "
                     f"{gap.get('ended') or _iso(gap.get('ended_at'))}{end}")
    else:
        lines.append("- **Processing gap**: not measured (no partition had records waiting while looked at)")
    settle = section.get("settle_s")
    lines.append(f"- **First member left -> Stable on {section['target_type']}**: "
                 + (f"{settle:.1f} s ({section['first_member_left']} -> {section['stable_on_target']})"
                    if settle is not None else
                    f"not seen (first member left: {section.get('first_member_left') or 'not seen'}, "
                    f"Stable on {section['target_type']}: {section.get('stable_on_target') or 'not seen'})"))
    count = section["rebalances_seen"]
    exact = "" if section["rebalances_exact"] else " (at least: classic rebalances are seen from the states looked at)"
    lines.append(f"- **Rebalances seen**: {count}{exact}; group type changes: {section['type_changes']}")
    res = section.get("resolution_s")
    lines.append(f"- **Looks**: {section['looks']} ({section['unknown_looks']} unknown); precision "
                 + (f"{res} s (the longest interval between two known looks)" if res is not None else "unknown"))
    parts = section.get("partitions") or []
    if parts:
        lines += ["", "| partition | longest stall (s) | from | to |", "|---|---|---|---|"]
        for g in parts[:TOP_PARTITIONS]:
            lines.append(f"| {g['partition']} | {g['seconds']:.1f}{' (open)' if g.get('open') else ''} | "
                         f"{_iso(g['started_at'])} | {_iso(g['ended_at'])} |")
    if chart:
        lines += ["", f"![group timeline]({chart})"]
    return [*lines, ""]


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")


# -- from the group's own records (exact; works wherever the run's tasks run) -----------------------------------

def records_section(history: GroupHistory, stalls: Mapping[str, CommitStall], *, group_id: str, since: float,
                    output_gap: Mapping[str, Any] | None = None, notes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The downtime section from the group's records since ``since``: the longest commit stall (each
    partition's, ranked), rebalances by the group's own counters, the types it went through, when the first
    member left. ``output_gap`` (the validation job's, from output records) takes precedence as *the* gap."""
    ranked = sorted(stalls.values(), key=lambda g: (-g.seconds, g.partition))
    longest = ranked[0] if ranked else None
    commit_gap = None if longest is None else {**longest.to_dict(), "started": _iso(longest.started_at),
                                               "ended": _iso(longest.ended_at)}
    return {
        "source": "group records",
        "group_id": group_id,
        "since": _iso(since),
        "gap_source": "output records" if output_gap else "committed offsets",
        "processing_gap": dict(output_gap) if output_gap else commit_gap,
        "committed_gap": commit_gap,
        "partitions": [s.to_dict() for s in ranked],
        "rebalances": history.rebalances,
        "types": list(history.types),
        "first_member_left": _iso(history.first_member_left_at),
        "classic_empty": _iso(history.classic_empty_at),
        "records": history.records,
        "notes": list(notes),
    }


def records_chart(section: Mapping[str, Any]) -> str | None:
    """Each partition's longest stall as a bar (SVG), or None without a stall."""
    parts = section.get("partitions") or []
    if not parts:
        return None
    bars = [(p["partition"] + ("" if p.get("exact", True) else " (upper bound)") + (" (open)" if p.get("open") else ""),
             float(p["seconds"])) for p in parts[:MAX_BARS]]
    return bar_chart_svg(bars, title=f"Longest commit stall per partition, group {section['group_id']}")


def records_markdown(section: Mapping[str, Any], chart: str | None = None) -> list[str]:
    lines = ["## Downtime", "", f"_From the group's own records in __consumer_offsets since {section['since']}._", ""]
    gap = section.get("processing_gap")
    if gap:
        bound = "" if gap.get("exact", True) else " (an upper bound: the held-back record's time was unreadable)"
        still = " (still open: nothing committed past it yet)" if gap.get("open") else ""
        lines.append(f"- **Processing gap** ({section['gap_source']}): {gap['seconds']:.3f} s on {gap['partition']}, "
                     f"{gap.get('started') or _iso(gap.get('started_at'))} -> "
                     f"{gap.get('ended') or _iso(gap.get('ended_at'))}{bound}{still}")
    else:
        lines.append("- **Processing gap**: none (no record waited for a commit in the window)")
    lines.append(f"- **Rebalances**: {section['rebalances']} (new generations and epochs recorded by the "
                 f"coordinator); group types: {' -> '.join(section['types']) or 'none recorded'}")
    lines.append(f"- **First member left**: {section.get('first_member_left') or 'not in the records'}"
                 + (f"; classic group Empty: {section['classic_empty']}" if section.get("classic_empty") else ""))
    for note in section.get("notes") or []:
        lines.append(f"- _{note}_")
    parts = section.get("partitions") or []
    if parts:
        lines += ["", "| partition | longest stall (s) | from | to |", "|---|---|---|---|"]
        for p in parts[:TOP_PARTITIONS]:
            flags = ("" if p.get("exact", True) else " (upper bound)") + (" (open)" if p.get("open") else "")
            lines.append(f"| {p['partition']} | {p['seconds']:.3f}{flags} | {_iso(p['started_at'])} | "
                         f"{_iso(p['ended_at'])} |")
    if chart:
        lines += ["", f"![commit stalls]({chart})"]
    return [*lines, ""]

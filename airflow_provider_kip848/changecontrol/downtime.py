"""The report's downtime section: how long the application stood still and how long its group took to settle.

Built after the change from the group's own records in ``__consumer_offsets``
(:class:`~airflow_provider_kip848.kafka.group_records.GroupDowntime`: states,
members by protocol, rebalances, commit stalls, commit rate) and, where the
application has an output topic and the validation job ran, the output
records' timing (the ``output_timing`` verdict: the longest gap between two
output records per partition, and output records per second). The output gap
is *the* processing gap when there is one; the commit stall stands in
otherwise, and the section says which. Unknown values stay unknown, never 0.
The chart shows members by protocol, committed and output records per second,
with the group's state as a band above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_provider_kip848.changecontrol.plot import line_chart_svg
from airflow_provider_kip848.kafka.group_records import GroupDowntime
from airflow_provider_kip848.kafka.inert import md_name, md_text

#: partitions listed by their longest stall or gap in the report (all are in the JSON)
TOP_PARTITIONS = 10
#: states listed in the Markdown (the first and last halves; all are in the JSON)
MAX_STATES = 12
#: protocols in the order the chart draws their member lines
PROTOCOLS = ("classic", "consumer", "streams")


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")


def _gap(gap: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not gap:
        return None
    return {**gap, "started": _iso(gap.get("started_at")), "ended": _iso(gap.get("ended_at"))}


def downtime_section(downtime: GroupDowntime, *, group_id: str, target: str | None = None,
                     # Any: JSON of several shapes (XCom, reports)
                     output_timing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The report section for one group's change window. ``output_timing``: the validation job's
    ``output_timing`` data (``longest``, ``partitions``, ``rate``), when the application has an output topic
    and the validation ran."""
    h = downtime.history
    stalls = sorted(downtime.stalls.values(), key=lambda g: (-g.seconds, g.partition))
    commit_gap = _gap(stalls[0].to_dict()) if stalls else None
    output_gap = _gap((output_timing or {}).get("longest"))
    return {
        "source": "group records",
        "group_id": group_id,
        "since": _iso(downtime.since),
        "target_type": target,
        "gap_source": "output records" if output_gap else "committed offsets",
        "processing_gap": output_gap or commit_gap,
        "committed_gap": commit_gap,
        "output_gap": output_gap,
        "partitions": [s.to_dict() for s in stalls],
        "output_partitions": list((output_timing or {}).get("partitions") or []),
        "output_timestamps": dict((output_timing or {}).get("timestamp_types") or {}),
        "rebalances": h.rebalances,
        "types": list(h.types),
        "first_member_left": _iso(h.first_member_left_at),
        "classic_empty": _iso(h.classic_empty_at),
        "stable_on_target": _iso(h.stable_on_target_at),
        "settle_s": None if h.settle_s is None else round(h.settle_s, 3),
        "states": [{**p.to_dict(), "at": _iso(p.at)} for p in h.states],
        "records": h.records,
        "notes": list(downtime.notes),
        # the chart's inputs, kept so the report can be drawn again
        "chart": {"states": [[p.at, _label(p.type, p.state)] for p in h.states],
                  "members": [[p.at, None if p.members is None else dict(p.members)] for p in h.states],
                  "committed_rate": [list(x) for x in downtime.commit_rate],
                  "output_rate": list((output_timing or {}).get("rate") or [])},
    }


def downtime_summary(  # Any: JSON of several shapes (XCom, reports)
        downtime: GroupDowntime, *, target: str | None = None) -> dict[str, Any]:
    """One group's downtime in a few figures, for a fleet run where a section per group would drown the
    report: the settle time (first member leaving to Stable on ``target``), the rebalances, the types it went
    through and its longest commit stall (the processing gap measured from committed offsets; a fleet run
    knows no output topic). None stays None: not measured, never 0."""
    h = downtime.history
    stall = min(downtime.stalls.values(), key=lambda g: (-g.seconds, g.partition), default=None)
    return {"settle_s": None if h.settle_s is None else round(h.settle_s, 3), "rebalances": h.rebalances,
            "types": list(h.types), "first_member_left": _iso(h.first_member_left_at),
            "stable_on_target": _iso(h.stable_on_target_at), "target_type": target,
            "commit_stall_s": None if stall is None else round(stall.seconds, 3),
            "commit_stall_partition": None if stall is None else stall.partition,
            "commit_stall_open": None if stall is None else stall.open, "records": h.records,
            "notes": list(downtime.notes)}


def _label(kind: str | None, state: str | None) -> str | None:
    if state is None:
        return None
    return state if kind is None else f"{kind} {state}"


def downtime_chart(section: Mapping[str, Any]) -> str | None:  # Any: JSON of several shapes (XCom, reports)
    """The timeline chart (SVG): members by protocol, committed and output records per second, the group's
    state as a band; None when the records show fewer than two instants."""
    chart = section.get("chart") or {}
    states: Sequence[Sequence[Any]] = chart.get("states") or []
    committed: Sequence[Sequence[float]] = chart.get("committed_rate") or []
    output: Sequence[Sequence[float]] = chart.get("output_rate") or []
    times = [s[0] for s in states] + [c[0] for c in committed] + [o[0] for o in output]
    if len(set(times)) < 2:
        return None
    t0 = min(times)
    series: dict[str, list[tuple[float, float | None]]] = {}
    members: Sequence[Sequence[Any]] = chart.get("members") or []
    seen = [p for p in PROTOCOLS if any(m[1] and p in m[1] for m in members)]
    end = max(times) - t0
    for protocol in seen:  # steps: a count holds until the next instant; unknown counts break the line
        line: list[tuple[float, float | None]] = []
        for i, (at, counts) in enumerate(members):
            x = at - t0
            if i:
                line.append((x, line[-1][1]))
            line.append((x, None if counts is None else float(counts.get(protocol, 0))))
        line.append((end, line[-1][1]))
        series[f"{protocol} members"] = line
    if committed:
        series["committed records/s"] = [(at - t0, float(v)) for at, v in committed]
    if output:
        series["output records/s"] = [(at - t0, float(v)) for at, v in output]
    band = [(at - t0, label) for at, label in states]
    return line_chart_svg(series, band=band, title=f"Group {section['group_id']} through the change",
                          x_label=f"seconds since {_iso(t0)}")


def downtime_markdown(  # Any: JSON of several shapes (XCom, reports)
        section: Mapping[str, Any], chart: str | None = None) -> list[str]:
    """Markdown lines of the section (``chart``: the chart's file name next to the report). Partitions name
    topics and the notes quote the records: names and inert text (:mod:`~airflow_provider_kip848.kafka.inert`)."""
    lines = ["## Downtime", "", f"_From the group's own records in \\_\\_consumer\\_offsets since "
             f"{md_text(section['since'])}"
             + (" and the output records read by the validation job" if section.get("output_gap") else "")
             + "._", ""]
    gap = section.get("processing_gap")
    if gap:
        bound = "" if gap.get("exact", True) else " (an upper bound: the held-back record's time was unreadable)"
        still = " (still open: nothing committed past it yet)" if gap.get("open") else ""
        lines.append(f"- **Processing gap** ({md_text(section['gap_source'])}): {gap['seconds']:.3f} s on "
                     f"{md_name(gap['partition'])}, {md_text(gap.get('started'))} -> {md_text(gap.get('ended'))}"
                     f"{bound}{still}")
    else:
        lines.append("- **Processing gap**: none measured (no record waited for a commit, and no output gap)")
    kinds = section.get("output_timestamps") or {}
    if section.get("output_gap") and kinds.get("CreateTime"):
        lines.append("- _Output timestamps are CreateTime (set by the application): its processing time only if it "
                     "stamps its output as it writes it; an application that carries the input's time over (Kafka "
                     "Streams does) hides its gap. Set message.timestamp.type=LogAppendTime on the output topic._")
    if section.get("output_gap") and section.get("committed_gap"):
        c = section["committed_gap"]
        lines.append(f"- Longest commit stall: {c['seconds']:.3f} s on {md_name(c['partition'])}, "
                     f"{md_text(c['started'])} -> {md_text(c['ended'])}")
    target = md_text(section.get("target_type") or "the target protocol")
    if section.get("settle_s") is not None:
        lines.append(f"- **First member left -> Stable on {target}**: {section['settle_s']:.3f} s "
                     f"({md_text(section['first_member_left'])} -> {md_text(section['stable_on_target'])})")
    else:
        lines.append(f"- **First member left -> Stable on {target}**: not in the records (first member left: "
                     f"{md_text(section.get('first_member_left') or 'not seen')}; Stable on {target}: "
                     f"{md_text(section.get('stable_on_target') or 'not seen')})")
    lines.append(f"- **Rebalances**: {section['rebalances']} (new generations and epochs recorded by the "
                 f"coordinator); group types: {md_text(' -> '.join(section['types']) or 'none recorded')}")
    if section.get("classic_empty"):
        lines.append(f"- Classic group Empty: {md_text(section['classic_empty'])}")
    states = section.get("states") or []
    if states:
        shown = states if len(states) <= MAX_STATES else [*states[:MAX_STATES // 2], None, *states[-MAX_STATES // 2:]]
        lines.append("- **States**: " + " -> ".join("..." if p is None else md_text(_state_text(p)) for p in shown))
    for note in section.get("notes") or []:
        lines.append(f"- _{md_text(note)}_")
    _table(lines, "longest output gap (s)", section.get("output_partitions") or [])
    _table(lines, "longest commit stall (s)", section.get("partitions") or [])
    if chart:
        lines += ["", f"![group timeline]({chart})"]
    return [*lines, ""]


def _state_text(point: Mapping[str, Any]) -> str:
    members = point.get("members")
    count = "?" if members is None else ", ".join(f"{n} {p}" for p, n in sorted(members.items())) or "none"
    return f"{_label(point.get('type'), point.get('state')) or 'unknown'} ({count}; {str(point['at'])[11:23]})"


def _table(lines: list[str], what: str, rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        return
    lines += ["", f"| partition | {what} | from | to |", "|---|---|---|---|"]
    for p in rows[:TOP_PARTITIONS]:
        flags = ("" if p.get("exact", True) else " (upper bound)") + (" (open)" if p.get("open") else "")
        lines.append(f"| {md_name(p['partition'], cell=True)} | {p['seconds']:.3f}{flags} | "
                     f"{md_text(_iso(p['started_at']), cell=True)} | {md_text(_iso(p['ended_at']), cell=True)} |")

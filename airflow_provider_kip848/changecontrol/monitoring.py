"""The report's monitoring section: the brokers' group metrics sampled before, during and after a change.

Each sample is what ``operators.metrics.KafkaGroupMetricsOperator`` returned
at a named point. The section lists them in order, says how many rebalances
each protocol counted between the first and the last sample, and charts the
group counts by protocol (SVG, see :mod:`.plot`). Unknown values stay unknown:
a sample that was not taken, or a figure a broker did not expose, is never a 0.
The brokers refresh group counts on a 60 s timer, so a count can trail the
change by up to a minute; rebalance counts move at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow_provider_kip848.changecontrol.plot import line_chart_svg

PROTOCOLS = ("classic", "consumer", "streams")
COUNT_LAG_NOTE = ("group counts are refreshed by the brokers every 60 s and may trail the change by up to a "
                  "minute; rebalance counts move at once")


def metrics_section(  # Any: JSON of several shapes (XCom, reports)
        points: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The report section for the samples of one run, in order (None: no sample was attempted)."""
    taken = [p for p in points if p]
    if not taken:
        return None
    samples = [p for p in taken if p.get("sample")]
    rows = [{"label": p["label"], "taken_at": (p.get("sample") or {}).get("taken_at"),
             "groups_by_protocol": (p.get("sample") or {}).get("groups_by_protocol"),
             "streams_groups_by_state": (p.get("sample") or {}).get("streams_groups_by_state"),
             **{f"{proto}_rebalance_count": (p.get("sample") or {}).get(f"{proto}_rebalance_count")
                for proto in PROTOCOLS},
             "note": p.get("note", "")} for p in taken]
    section: dict[str, Any] = {"samples": rows, "note": COUNT_LAG_NOTE if samples else taken[0].get("note", "")}
    if len(samples) >= 2:
        first, last = samples[0]["sample"], samples[-1]["sample"]
        section["rebalances_during_change"] = {
            proto: (None if first.get(key) is None or last.get(key) is None else last[key] - first[key])
            for proto in PROTOCOLS for key in [f"{proto}_rebalance_count"]}
    return section


def metrics_chart(section: dict[str, Any] | None) -> str | None:  # Any: JSON of several shapes (XCom, reports)
    """Group counts by protocol over the run's samples (SVG), or None without two samples."""
    rows = [r for r in (section or {}).get("samples", []) if r.get("taken_at")]
    if len(rows) < 2:
        return None
    start = datetime.fromisoformat(rows[0]["taken_at"])

    def x(row: dict[str, Any]) -> float:
        return (datetime.fromisoformat(row["taken_at"]) - start).total_seconds()

    series = {f"{proto} groups": [(x(r), (r.get("groups_by_protocol") or {}).get(proto)) for r in rows]
              for proto in PROTOCOLS}
    series.update({f"{proto} rebalances": [(x(r), r.get(f"{proto}_rebalance_count")) for r in rows]
                   for proto in PROTOCOLS})
    labels = ", ".join(r["label"] for r in rows)
    return line_chart_svg(series, title=f"Group metrics over the change ({labels})")

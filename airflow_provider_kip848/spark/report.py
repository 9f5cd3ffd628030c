"""Write verdicts as JSON (for machines and XCom) and a small self-contained HTML page (for the approver).

The HTML has no external assets: a table of verdicts and, when lag was
measured before and after, an inline SVG bar chart of lag per partition. A
wave's report (:func:`wave_report_dict`) has the wave's overall verdict and
one such table per group. Every value is text of its own
(:func:`~airflow_provider_kip848.kafka.inert.xml_text`: escaped, with a direction mark or a zero-width character in
a group id or a topic name shown by its code point).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_provider_kip848.kafka.files import atomic_write_text
from airflow_provider_kip848.kafka.inert import xml_text
from airflow_provider_kip848.spark.checks import Verdict


def report_dict(  # Any: JSON of several shapes (XCom, reports)
        title: str, verdicts: list[Verdict], context: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"title": title, "passed": all(v.passed for v in verdicts),
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "context": context or {}, "verdicts": [v.to_dict() for v in verdicts]}


def wave_report_dict(title: str, overall: Verdict, groups: list[dict[str, Any]],
                     # Any: JSON of several shapes (XCom, reports)
                     context: dict[str, Any] | None = None) -> dict[str, Any]:
    """A wave's report: ``overall`` (the wave's verdict) and ``groups`` (each ``{group_id, app, passed,
    verdicts}``); ``passed`` is the overall verdict's."""
    return {"title": title, "passed": overall.passed,
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "context": context or {}, "overall": overall.to_dict(), "groups": groups}


def lag_chart_svg(before: dict[str, int], after: dict[str, int], width: int = 640) -> str:
    """Grouped bars: lag per partition before (grey) and after (blue)."""
    parts = sorted(set(before) | set(after))
    if not parts:
        return ""
    top = max([1, *before.values(), *after.values()])
    row, bar, label_w = 26, 9, 180
    height = row * len(parts) + 30
    scale = (width - label_w - 60) / top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
           'font-size="11">']
    for i, p in enumerate(parts):
        y = 10 + i * row
        b, a = before.get(p, 0), after.get(p, 0)
        out.append(f'<text x="0" y="{y + 12}">{xml_text(p)}</text>')
        out.append(f'<rect x="{label_w}" y="{y}" width="{b * scale:.1f}" height="{bar}" fill="#9aa0a6"/>')
        out.append(f'<text x="{label_w + b * scale + 4:.1f}" y="{y + 8}">{b}</text>')
        out.append(f'<rect x="{label_w}" y="{y + bar + 1}" width="{a * scale:.1f}" height="{bar}" fill="#1a73e8"/>')
        out.append(f'<text x="{label_w + a * scale + 4:.1f}" y="{y + 2 * bar}">{a}</text>')
    out.append(f'<text x="{label_w}" y="{height - 4}" fill="#5f6368">grey: before, blue: after</text></svg>')
    return "".join(out)


def _verdict_table(verdicts: list[dict[str, Any]]) -> str:
    rows = []
    for v in verdicts:
        status = "PASS" if v["passed"] else "FAIL"
        color = "#137333" if v["passed"] else "#c5221f"
        offending = ", ".join(json.dumps(o, default=str) for o in v["offending"][:10])
        rows.append(f'<tr><td>{xml_text(v["check"])}</td><td style="color:{color};font-weight:bold">{status}</td>'
                    f'<td>{xml_text(v["summary"])}</td><td><code>{xml_text(offending)}</code></td></tr>')
    return ("<table><tr><th>check</th><th>result</th><th>summary</th><th>first offending items</th></tr>"
            f"{''.join(rows)}</table>")


def _lag_chart(verdicts: list[dict[str, Any]]) -> str:
    lag_before: dict[str, int] = {}
    lag_after: dict[str, int] = {}
    for v in verdicts:
        lag_before.update(v["data"].get("lag_before", {}))
        lag_after.update(v["data"].get("lag_after", {}))
    return lag_chart_svg(lag_before, lag_after) if lag_before or lag_after else ""


def _page(report: dict[str, Any], body: str) -> str:
    verdict = "PASSED" if report["passed"] else "FAILED"
    context = "".join(f"<li>{xml_text(str(k))}: {xml_text(str(v))}</li>" for k, v in report["context"].items())
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{xml_text(report["title"])}</title>
<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto}}td,th{{border-bottom:1px solid #ddd;
padding:4px 8px;text-align:left;vertical-align:top}}table{{border-collapse:collapse}}</style></head>
<body><h1>{xml_text(report["title"])}: {verdict}</h1><p>Generated {xml_text(report["generated_at"])}</p>
<ul>{context}</ul>
{body}
</body></html>
"""


def render_html(report: dict[str, Any]) -> str:  # Any: JSON of several shapes (XCom, reports)
    if "groups" in report:
        return render_wave_html(report)
    chart = _lag_chart(report["verdicts"])
    return _page(report, _verdict_table(report["verdicts"]) + ("\n<h2>Lag per partition</h2>" + chart if chart else ""))


def render_wave_html(report: dict[str, Any]) -> str:  # Any: JSON of several shapes (XCom, reports)
    """The wave's verdict, then one section per group (failed groups first) with its table and lag chart."""
    overall = report["overall"]
    parts = [f"<h2>Wave: {'PASSED' if overall['passed'] else 'FAILED'}</h2><p>{xml_text(overall['summary'])}</p>"]
    for g in sorted(report["groups"], key=lambda g: (g["passed"], g["group_id"])):
        title = xml_text(g["group_id"]) + (f" ({xml_text(g['app'])})" if g.get("app") else "")
        chart = _lag_chart(g["verdicts"])
        parts.append(f"<h2>{title}: {'PASSED' if g['passed'] else 'FAILED'}</h2>" + _verdict_table(g["verdicts"])
                     + (f"<h3>Lag per partition</h3>{chart}" if chart else ""))
    return _page(report, "\n".join(parts))


def write_report(  # Any: JSON of several shapes (XCom, reports)
        directory: str | Path, report: dict[str, Any]) -> dict[str, str]:
    """``validation.json`` and ``validation.html`` in ``directory`` (local path); returns their paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    json_path, html_path = directory / "validation.json", directory / "validation.html"
    atomic_write_text(json_path, json.dumps(report, indent=1, default=str) + "\n")
    atomic_write_text(html_path, render_html(report))
    return {"json": str(json_path), "html": str(html_path)}

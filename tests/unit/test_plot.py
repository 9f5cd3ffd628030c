"""The report's SVG chart: a valid document, unknown values break the line instead of drawing 0."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from airflow_provider_kip848.changecontrol.plot import line_chart_svg

NS = "{http://www.w3.org/2000/svg}"


def test_chart_is_svg_with_one_line_per_known_run_and_a_legend():
    svg = line_chart_svg({"classic": [(0, 3), (5, 3), (10, 0)], "consumer": [(0, 0), (5, None), (10, 3)]},
                         title="groups by protocol <&>")
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    lines = root.findall(f"{NS}polyline")
    dots = root.findall(f"{NS}circle")
    # classic: one run of three points; consumer: two single known points around the unknown one
    assert len(lines) == 1 and len(lines[0].get("points").split()) == 3 and len(dots) == 2
    texts = [t.text for t in root.findall(f"{NS}text")]
    assert "classic" in texts and "consumer" in texts and "groups by protocol <&>" in texts


def test_no_known_value_draws_no_line():
    root = ET.fromstring(line_chart_svg({"rebalance rate": [(0, None), (1, None)]}, title="t"))
    assert not root.findall(f"{NS}polyline") and not root.findall(f"{NS}circle")

"""Small SVG charts for run reports: no plotting library on the workers, one file a browser opens.

Reports show how group counts by protocol, streams-group states and rebalance
rates moved over a change window (:func:`line_chart_svg`), and how long each
application of a fleet run stood still (:func:`bar_chart_svg`). A chart is
plain SVG text (written next to ``report.md`` and linked from it), so it
renders in the Airflow UI's artifact browser, in a Git host and in any
browser, and costs no dependency. Every label is text of its own
(:func:`~airflow_provider_kip848.kafka.inert.xml_text`): a group id or an
application name in a title neither adds an element, nor breaks the file
with a character XML forbids, nor reorders the text with a direction mark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from airflow_provider_kip848.kafka.inert import xml_text

#: line colours, in order (colour-blind safe palette)
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")


def line_chart_svg(series: Mapping[str, Sequence[tuple[float, float | None]]], *, title: str,
                   x_label: str = "seconds since the first sample", width: int = 720, height: int = 260,
                   band: Sequence[tuple[float, str | None]] = ()) -> str:
    """Each series as a polyline over (x, y) points; a None y breaks the line (a value that was not known
    is never drawn as 0). ``band``: (x, label) steps drawn as a coloured strip above the plot, each label
    holding until the next x (a group's state over time); a None label is drawn grey, "unknown".
    Returns an SVG document."""
    left, right, top, bottom = 56, 160, 28 + (22 if band else 0), 40
    points = [(x, y) for pts in series.values() for x, y in pts if y is not None]
    points += [(x, 0.0) for x, _ in band]
    xs = [x for x, _ in points] or [0.0, 1.0]
    ys = [y for _, y in points] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(0.0, min(ys)), max(ys) if max(ys) > min(0.0, min(ys)) else min(0.0, min(ys)) + 1
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return top + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">{xml_text(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for frac in (0.0, 0.5, 1.0):
        yv = y0 + frac * (y1 - y0)
        out.append(f'<text x="{left - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{_fmt(yv)}</text>')
        xv = x0 + frac * (x1 - x0)
        out.append(f'<text x="{sx(xv):.1f}" y="{top + plot_h + 14}" text-anchor="middle">{_fmt(xv)}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">{xml_text(x_label)}</text>')
    out.extend(_band(band, sx, top - 18, 12, x1))
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        for run in _runs(pts):
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in run)
            if len(run) == 1:
                out.append(f'<circle cx="{sx(run[0][0]):.1f}" cy="{sy(run[0][1]):.1f}" r="2.5" fill="{colour}"/>')
            else:
                out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>')
        ly = top + 12 + i * 16
        out.append(f'<line x1="{width - right + 12}" y1="{ly - 4}" x2="{width - right + 30}" y2="{ly - 4}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{width - right + 34}" y="{ly}">{xml_text(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def bar_chart_svg(bars: Sequence[tuple[str, float | None]], *, title: str, value_label: str = "seconds",
                  unknown: str = "not measured", width: int = 720, label_chars: int = 32) -> str:
    """One horizontal bar per (label, value), in the order given (a ranking reads top down); a None value
    draws no bar and says ``unknown`` (a value that was not known is never drawn as 0). Labels longer than
    ``label_chars`` are cut, the whole label stays in the bar's tooltip. Returns an SVG document."""
    left, right, top, bottom, row = 8 + 6 * label_chars, 90, 28, 40, 18
    height = top + max(len(bars), 1) * row + bottom
    known = [v for _, v in bars if v is not None]
    high = max([*known, 0.0]) or 1.0
    plot_w = width - left - right

    def sx(v: float) -> float:
        return left + max(v, 0.0) / high * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">{xml_text(title)}</text>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#999"/>']
    for frac in (0.0, 0.5, 1.0):
        out.append(f'<text x="{sx(frac * high):.1f}" y="{height - bottom + 14}" '
                   f'text-anchor="middle">{_fmt(frac * high)}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">'
               f'{xml_text(value_label)}</text>')
    for i, (label, value) in enumerate(bars):
        y = top + i * row
        shown = label if len(label) <= label_chars else label[: label_chars - 1] + "\u2026"
        out.append(f'<text x="{left - 6}" y="{y + row - 6}" text-anchor="end">{xml_text(shown)}</text>')
        if value is None:
            out.append(f'<text x="{left + 4}" y="{y + row - 6}" fill="#666">{xml_text(unknown)}</text>')
            continue
        out.append(f'<rect x="{left}" y="{y + 2}" width="{sx(value) - left:.1f}" height="{row - 4}" '
                   f'fill="{COLOURS[0]}"><title>{xml_text(label)}: {_fmt(value)}</title></rect>')
        out.append(f'<text x="{sx(value) + 4:.1f}" y="{y + row - 6}">{_fmt(value)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


#: colours of a band's labels, in order of first appearance; unknown is grey
BAND_COLOURS = ("#56B4E9", "#E69F00", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442", "#999999")


def _band(steps: Sequence[tuple[float, str | None]], sx: Callable[[float], float], y: float, h: float,
          x_end: float) -> list[str]:
    """SVG of a step band: one rectangle per step (to the next step's x, the last to ``x_end``), titled with
    its label, and the labels named once in the strip."""
    merged: list[tuple[float, str | None]] = []
    for x, label in steps:  # a state seen at several looks in a row is one step
        if not merged or merged[-1][1] != label:
            merged.append((x, label))
    steps = merged
    if not steps:
        return []
    colour: dict[str, str] = {}
    out = []
    for i, (x, label) in enumerate(steps):
        nxt = steps[i + 1][0] if i + 1 < len(steps) else x_end
        name = label if label is not None else "unknown"
        fill = "#BBBBBB" if label is None else colour.setdefault(
            name, BAND_COLOURS[len(colour) % (len(BAND_COLOURS) - 1)])
        out.append(f'<rect x="{sx(x):.1f}" y="{y:.1f}" width="{max(sx(nxt) - sx(x), 0.5):.1f}" height="{h}" '
                   f'fill="{fill}"><title>{xml_text(name)} from {_fmt(x)} s</title></rect>')
    shown = ", ".join(f"{name}" for name in colour)
    out.append(f'<text x="{sx(steps[0][0]):.1f}" y="{y - 3:.1f}" font-size="10">state: {xml_text(shown)}</text>')
    return out


def _runs(points: Sequence[tuple[float, float | None]]) -> list[list[tuple[float, float]]]:
    """Consecutive known points; an unknown value ends a run."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if y is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((x, y))
    return [r for r in runs if r]


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 1e-9 else f"{value:.2f}"

"""Small static SVG charts (horizontal bars, stacked bars, column histograms) for the HTML report.

Every chart is an inline `<svg class="chart">` that scales to its container; each bar is a
`rect.bar` with a `<title>` tooltip, so the page needs no script and no chart library.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
WIDTH = 640
FONT = 12
Fmt = Callable[[float], str]


def fmt_num(v: float) -> str:
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.1f}"


def fmt_pct(v: float) -> str:
    return f"{v:.0f}%" if v == int(v) else f"{v:.1f}%"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _a(v: object) -> str:
    return escape(str(v), quote=True)


def _text(x: float, y: float, s: str, anchor: str = "start", cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}>{escape(s)}</text>'


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str, series: str) -> str:
    return (
        f'<rect class="bar" data-series="{_a(series)}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" '
        f'height="{h:.1f}" fill="{fill}"><title>{escape(tip)}</title></rect>'
    )


def _svg(height: float, body: list[str], label: str) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-label="{_a(label)}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>'
    )


def _legend(names: Sequence[str], colors: Sequence[str], y: float) -> tuple[list[str], float]:
    """Legend items laid out left to right, wrapping; returns (svg parts, height used)."""
    parts, x, row = [], 0.0, 0
    for name, c in zip(names, colors, strict=False):
        w = 22 + 7 * len(name)
        if x and x + w > WIDTH:
            x, row = 0.0, row + 1
        yy = y + row * 18
        parts.append(f'<rect class="swatch" x="{x:.1f}" y="{yy:.1f}" width="12" height="12" fill="{c}"/>')
        parts.append(_text(x + 16, yy + 10, name, cls="legend"))
        x += w
    return parts, (row + 1) * 18 if names else 0


def _label_width(labels: Sequence[str]) -> float:
    return min(220.0, max([40.0] + [7.0 * len(s) + 10 for s in labels]))


def _short(s: str, room: float) -> str:
    """Fit a label in `room` pixels, cutting its middle (sweep job names differ at both ends)."""
    n = max(5, int(room / 6.5))
    if len(s) <= n:
        return s
    head = (n - 1) // 2
    return s[:head] + "…" + s[len(s) - (n - 1 - head) :]


def stacked_bars(
    rows: Sequence[tuple[str, Sequence[float]]],
    series: Sequence[str],
    colors: Sequence[str] | None = None,
    *,
    label: str,
    annotate: Callable[[Sequence[float]], str] | None = None,
    fmt: Fmt = fmt_num,
) -> str:
    """One horizontal bar per row, split into the series' values (e.g. success / failure)."""
    colors = list(colors or [color(i) for i in range(len(series))])
    lw = _label_width([r[0] for r in rows])
    room = WIDTH - lw - (150 if annotate else 60)
    top = max((sum(v) for _, v in rows), default=0) or 1
    bar, gap = 18, 8
    body: list[str] = []
    for i, (name, values) in enumerate(rows):
        y = i * (bar + gap)
        body.append(_text(lw - 8, y + bar * 0.72, _short(name, lw - 10), "end", "axis"))
        x = lw
        for s, v, c in zip(series, values, colors, strict=False):
            if v <= 0:
                continue
            w = room * v / top
            body.append(_rect(x, y, w, bar, c, f"{name} · {s}: {fmt(v)}", s))
            x += w
        note = annotate(values) if annotate else fmt(sum(values))
        body.append(_text(x + 6, y + bar * 0.72, note, cls="value"))
    height = len(rows) * (bar + gap)
    present = [i for i in range(len(series)) if any(v[i] > 0 for _, v in rows if i < len(v))]
    leg, lh = _legend([series[i] for i in present], [colors[i] for i in present], height + 4)
    return _svg(height + lh + 6, body + leg, label)


def grouped_bars(
    categories: Sequence[str],
    series: dict[str, Sequence[float]],
    colors: Sequence[str] | None = None,
    *,
    label: str,
    fmt: Fmt = fmt_num,
    max_value: float | None = None,
) -> str:
    """Horizontal bars: for each category, one bar per series (e.g. one per job)."""
    names = list(series)
    colors = list(colors or [color(i) for i in range(len(names))])
    lw = _label_width(categories)
    room = WIDTH - lw - 70
    top = max_value or max((v for vals in series.values() for v in vals), default=0) or 1
    bar = 14 if len(names) > 1 else 18
    group_gap = 10
    body: list[str] = []
    y = 0.0
    for ci, cat in enumerate(categories):
        gh = bar * len(names)
        body.append(_text(lw - 8, y + gh / 2 + 4, _short(cat, lw - 10), "end", "axis"))
        for si, name in enumerate(names):
            v = series[name][ci]
            w = room * v / top
            yy = y + si * bar
            body.append(_rect(lw, yy + 1, w, bar - 2, colors[si], f"{cat} · {name}: {fmt(v)}", name))
            body.append(_text(lw + w + 5, yy + bar - 4, fmt(v), cls="value"))
        y += gh + group_gap
    body.append(f'<line class="axisline" x1="{lw}" y1="0" x2="{lw}" y2="{y - group_gap:.1f}"/>')
    leg, lh = _legend(names, colors, y + 2) if len(names) > 1 else ([], 0)
    return _svg(y + lh + 4, body + leg, label)


def columns(
    bins: Sequence[str],
    series: dict[str, Sequence[float]],
    colors: Sequence[str] | None = None,
    *,
    label: str,
    x_title: str = "",
    y_title: str = "",
    fmt: Fmt = fmt_num,
) -> str:
    """Vertical columns over ordered bins (a histogram); several series stand side by side."""
    names = list(series)
    colors = list(colors or [color(i) for i in range(len(names))])
    left, bottom, top_pad, height = 44.0, 34.0, 22.0, 198.0
    plot_h = height - bottom - top_pad
    room = WIDTH - left - 8
    peak = max((v for vals in series.values() for v in vals), default=0) or 1
    step = _nice_step(peak)
    ymax = step * math.ceil(peak / step)
    body: list[str] = []
    t = 0.0
    while t <= ymax + 1e-9:
        y = top_pad + plot_h - plot_h * t / ymax
        body.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{WIDTH - 8}" y2="{y:.1f}"/>')
        body.append(_text(left - 6, y + 4, fmt(t), "end", "axis"))
        t += step
    slot = room / max(1, len(bins))
    bw = max(2.0, (slot * 0.8) / max(1, len(names)))
    every = max(1, math.ceil(len(bins) * (6.5 * max(map(len, bins), default=1) + 8) / room))
    for bi, b in enumerate(bins):
        x0 = left + bi * slot + slot * 0.1
        for si, name in enumerate(names):
            v = series[name][bi]
            h = plot_h * v / ymax
            tip = f"{b} · {name}: {fmt(v)}" if len(names) > 1 else f"{b}: {fmt(v)}"
            body.append(_rect(x0 + si * bw, top_pad + plot_h - h, bw - 1, h, colors[si], tip, name))
        if bi % every == 0:
            body.append(_text(left + bi * slot + slot / 2, top_pad + plot_h + 14, b, "middle", "axis"))
    base = top_pad + plot_h
    body.append(f'<line class="axisline" x1="{left}" y1="{base}" x2="{WIDTH - 8}" y2="{base}"/>')
    if x_title:
        body.append(_text(left + room / 2, height - 4, x_title, "middle", "title"))
    if y_title:
        body.append(_text(4, 10, y_title, "start", "title"))
    leg, lh = _legend(names, colors, height + 4) if len(names) > 1 else ([], 0)
    return _svg(height + lh + 6, body + leg, label)


def _nice_step(peak: float) -> float:
    raw = peak / 4
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return max(m * mag, 1.0) if peak >= 4 else 1.0
    return 10 * mag


def histogram_bins(values: Sequence[float], max_bins: int = 20) -> tuple[list[str], Callable[[float], int]]:
    """Bins over values: one per integer when few, else equal nice-width ranges; (labels, value -> bin)."""
    if not values:
        return [], lambda v: 0
    integers = all(float(v).is_integer() for v in values)
    lo, hi = math.floor(min(values)), math.ceil(max(values))
    if integers and hi - lo + 1 <= max_bins:
        return [str(v) for v in range(lo, hi + 1)], lambda v: int(round(v)) - lo
    lo = min(0, lo)
    width = _nice_width((max(values) - lo) / (max_bins - 1) if max(values) > lo else 1.0, integers)
    n = int((max(values) - lo) // width) + 1
    if integers:
        labels = [f"{lo + i * width:g}–{lo + (i + 1) * width - 1:g}" for i in range(n)]
    else:
        labels = [f"{lo + i * width:g}–{lo + (i + 1) * width:g}" for i in range(n)]
    return labels, lambda v: min(n - 1, int((v - lo) // width))


def _nice_width(raw: float, integers: bool) -> float:
    mag = 10 ** math.floor(math.log10(raw))
    w = next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag)
    return max(1.0, math.ceil(w)) if integers else w


def histogram(
    groups: dict[str, Sequence[float]], *, label: str, x_title: str, y_title: str = "prompts", max_bins: int = 20
) -> str:
    """Counts of values (e.g. turns per trajectory) per group, over shared bins."""
    everything = [v for vals in groups.values() for v in vals]
    bins, where = histogram_bins(everything, max_bins)
    series = {}
    for name, vals in groups.items():
        counts = [0.0] * len(bins)
        for v in vals:
            counts[where(v)] += 1
        series[name] = counts
    return columns(bins, series, label=label, x_title=x_title, y_title=y_title)

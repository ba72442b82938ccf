"""Small server-rendered SVG charts: a histogram and stacked bars over time buckets.

Plain SVG markup with presentation attributes (no inline style, no script: the dashboard's
Content-Security-Policy allows neither), every label escaped.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

from markupsafe import Markup, escape

PALETTE = ("#3b6ea5", "#d08c2f", "#4f9a62", "#b5484b", "#7a5ea8", "#6b7a8f", "#c27ba0",
           "#8c9a3c", "#2f8f9d", "#a06a42")
WIDTH, HEIGHT, PAD_L, PAD_B, PAD_T = 520, 200, 36, 36, 14
_STEPS = (1, 10, 60, 600, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400)


def histogram(values: Sequence[float], bins: int = 10, lo: float = 0.0, hi: float = 1.0,
              label: str = "") -> Markup:
    """Counts of `values` in `bins` equal bins over [lo, hi]."""
    counts = [0] * bins
    for v in values:
        i = int((min(max(v, lo), hi) - lo) / (hi - lo) * bins)
        counts[min(i, bins - 1)] += 1
    labels = [f"{lo + (hi - lo) * i / bins:.1f}" for i in range(bins)]
    return stacked([(lab, {"memories": n}) for lab, n in zip(labels, counts, strict=True)],
                   ["memories"], label, legend=False)


def buckets(events: Iterable[tuple[float, str]], most: int = 12
            ) -> list[tuple[str, dict[str, int]]]:
    """(time, series) pairs counted per time bucket: the smallest of second, 10 seconds,
    minute, 10 minutes, hour, 6 hours, day, week or month that gives at most `most` buckets
    (past that, month buckets, as many as it takes)."""
    pairs = sorted(events)
    if not pairs:
        return []
    first, last = pairs[0][0], pairs[-1][0]
    step = next((s for s in _STEPS if (last - first) / s < most), _STEPS[-1])
    start = first - first % step
    n = int((last - start) // step) + 1
    fmt = "%H:%M:%S" if step < 60 else "%H:%M" if step < 86400 else "%m-%d"
    out: list[tuple[str, dict[str, int]]] = [
        (time.strftime(fmt, time.gmtime(start + i * step)), {}) for i in range(n)
    ]
    for at, series in pairs:
        counts = out[int((at - start) // step)][1]
        counts[series] = counts.get(series, 0) + 1
    return out


def stacked(columns: Sequence[tuple[str, Mapping[str, int]]], series: Sequence[str],
            label: str, legend: bool = True) -> Markup:
    """Stacked bars, one per column, one colour per series, with a legend."""
    plot_w, plot_h = WIDTH - PAD_L - 8, HEIGHT - PAD_B - PAD_T
    top = max([sum(c.values()) for _, c in columns] + [1])
    legend_h = 18 * ((len(series) + 2) // 3) if legend else 0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="chart" '
             f'viewBox="0 0 {WIDTH} {HEIGHT + legend_h}" width="{WIDTH}" '
             f'height="{HEIGHT + legend_h}"><title>{escape(label)}</title>',
             f'<line x1="{PAD_L}" y1="{PAD_T + plot_h}" x2="{WIDTH - 8}" y2="{PAD_T + plot_h}" '
             'stroke="#888"/>',
             f'<text x="{PAD_L - 4}" y="{PAD_T + 4}" text-anchor="end" font-size="10" '
             f'fill="#555">{top}</text>',
             f'<text x="{PAD_L - 4}" y="{PAD_T + plot_h}" text-anchor="end" font-size="10" '
             'fill="#555">0</text>']
    if not columns:
        parts.append(f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle" '
                     'font-size="12" fill="#777">nothing yet</text>')
    slot = plot_w / max(len(columns), 1)
    every = max(1, -(-len(columns) // 6))  # at most six labels: they never overlap
    for i, (name, counts) in enumerate(columns):
        x = PAD_L + i * slot + slot * 0.15
        y = float(PAD_T + plot_h)
        for j, s in enumerate(series):
            n = counts.get(s, 0)
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" '
                         f'height="{h:.1f}" fill="{PALETTE[j % len(PALETTE)]}">'
                         f'<title>{escape(name)} {escape(s)}: {n}</title></rect>')
        if i % every == 0:
            parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{PAD_T + plot_h + 14}" '
                         f'text-anchor="middle" font-size="10" fill="#555">{escape(name)}</text>')
    if legend:
        for j, s in enumerate(series):
            lx, ly = PAD_L + (j % 3) * 160, HEIGHT + 18 * (j // 3)
            parts.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" '
                         f'fill="{PALETTE[j % len(PALETTE)]}"/><text x="{lx + 14}" y="{ly}" '
                         f'font-size="10" fill="#333">{escape(s)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))

"""Small bar charts as inline SVG, drawn on the server: no script library,
nothing fetched."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH = 420
BAR = 22
LABEL = 150


def bar_chart(bars: Sequence[tuple[str, float]], unit: str = "", title: str = "") -> str:
    """Horizontal bars, one per ``(label, value)``, scaled to the largest
    magnitude; negative values are drawn left of a zero line."""
    if not bars:
        return ""
    span = max(abs(v) for _, v in bars) or 1.0
    negative = any(v < 0 for _, v in bars)
    zero = LABEL + ((WIDTH - LABEL) / 2 if negative else 0)
    scale = (WIDTH - LABEL) / (2 if negative else 1) / span
    height = BAR * len(bars) + 8
    parts = [
        f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{WIDTH + 70}" '
        f'height="{height}" viewBox="0 0 {WIDTH + 70} {height}">'
    ]
    for row, (label, value) in enumerate(bars):
        y = row * BAR + 4
        length = abs(value) * scale
        x = zero - length if value < 0 else zero
        parts.append(
            f'<text x="{LABEL - 6}" y="{y + 15}" text-anchor="end">{escape(label)}</text>'
            f'<rect class="{"neg" if value < 0 else "pos"}" x="{x:.1f}" y="{y}" '
            f'width="{max(length, 1):.1f}" height="{BAR - 6}"><title>{escape(label)}: '
            f"{value:g}{escape(unit)}</title></rect>"
            f'<text x="{max(x + length, zero) + 4:.1f}" y="{y + 15}">'
            f"{value:.1f}{escape(unit)}</text>"
        )
    parts.append(f'<line x1="{zero}" y1="0" x2="{zero}" y2="{height}" class="axis"/></svg>')
    return "".join(parts)

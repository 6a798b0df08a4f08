"""The statistics behind the figures: 95% intervals and percentiles.

- success rate: the Wilson score interval (right near 0% and 100%, where the
  normal approximation gives bounds outside [0, 1]);
- a mean of shares in [0, 1] (pass@1 over scenarios, each the share of its
  samples that resolved): the Wilson interval of that mean over the scenarios,
  which is the ordinary Wilson interval when every share is 0 or 1, stays in
  [0, 1], and has width when every scenario agrees (a t interval collapses
  there and runs outside [0, 1] near the edges);
- mean reward: Student's t interval, mean +- t(0.975, n-1) * s / sqrt(n);
- latency percentiles: nearest rank on the sorted values (a value that occurred).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["Z_95", "mean_interval", "percentile", "share_interval", "t_95", "wilson_interval"]

Z_95 = 1.959963984540054
"""The standard normal's 0.975 quantile."""

# Student's t 0.975 quantiles for 1 to 30 degrees of freedom (beyond: the series below)
_T_95 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip


def t_95(df: int) -> float:
    """Student's t 0.975 quantile for ``df`` >= 1 degrees of freedom: a table up
    to 30, then the Cornish-Fisher series in 1/df (within 1e-4 there)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T_95):
        return _T_95[df - 1]
    z = Z_95
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion ``successes / n`` (n >= 1)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    return _wilson(successes / n, n)


def share_interval(shares: Sequence[float]) -> tuple[float, float] | None:
    """The 95% Wilson interval of the mean of ``shares`` (each in [0, 1]) over
    their number; None for none. Shares of 0 and 1 give :func:`wilson_interval`."""
    if not shares:
        return None
    if not all(0.0 <= s <= 1.0 for s in shares):
        raise ValueError(f"shares must lie in [0, 1], got {min(shares)} to {max(shares)}")
    return _wilson(math.fsum(shares) / len(shares), len(shares))


def _wilson(p: float, n: int) -> tuple[float, float]:
    z2 = Z_95 * Z_95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z_95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% t interval of the mean of ``values``; None for fewer than two."""
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_95(n - 1) * math.sqrt(variance / n)
    return mean - half, mean + half


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of sorted values; None if empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return float(sorted_values[rank - 1])

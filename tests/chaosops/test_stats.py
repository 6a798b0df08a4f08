"""The 95% intervals and percentiles behind the figures, against values computed by hand."""

from __future__ import annotations

import math

import pytest

from chaosops.stats import mean_interval, percentile, share_interval, t_95, wilson_interval


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        (8, 10, 0.4902, 0.9433),  # (p + z²/2n ± z√(p(1-p)/n + z²/4n²)) / (1 + z²/n)
        (0, 20, 0.0, 0.1611),  # the normal approximation would give [0, 0]
        (20, 20, 0.8389, 1.0),
        (1, 2, 0.0945, 0.9055),
    ],
)
def test_wilson_interval(successes: int, n: int, low: float, high: float) -> None:
    got = wilson_interval(successes, n)
    assert got == pytest.approx((low, high), abs=1e-4)


def test_mean_interval_is_student_s_t() -> None:
    # mean 2.5, s = 1.2910, s/√4 = 0.6455, t(0.975, 3) = 3.1824
    assert mean_interval([1.0, 2.0, 3.0, 4.0]) == pytest.approx((0.4457, 4.5543), abs=1e-4)
    values = [float(v % 7) for v in range(200)]
    mean = math.fsum(values) / 200
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / 199)
    half = 1.9720 * sd / math.sqrt(200)  # t(0.975, 199) from tables
    assert mean_interval(values) == pytest.approx((mean - half, mean + half), abs=1e-3)
    assert mean_interval([5.0]) is None and mean_interval([]) is None


@pytest.mark.parametrize(("df", "t"), [(1, 12.7062), (10, 2.2281), (30, 2.0423), (40, 2.0211),
                                       (60, 2.0003), (120, 1.9799), (100_000, 1.9600)])  # fmt: skip
def test_t_quantiles_match_the_tables(df: int, t: float) -> None:
    assert t_95(df) == pytest.approx(t, abs=2e-4)


def test_nearest_rank_percentiles() -> None:
    values = sorted(float(v) for v in range(1, 101))
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0 and percentile([], 50) is None


def test_a_mean_of_shares_has_a_wilson_interval_within_0_and_1() -> None:
    assert share_interval([0.0] * 4) == pytest.approx(wilson_interval(0, 4))
    assert share_interval([1.0, 0.0, 1.0, 1.0]) == pytest.approx(wilson_interval(3, 4))
    low, high = share_interval([1.0, 1.0, 1.0, 0.25])  # a t interval gave -0.25 to 1.08
    assert 0.0 < low < 0.8125 < high < 1.0
    low, high = share_interval([0.5] * 10)  # agreeing scenarios still leave width
    assert low < 0.5 < high
    assert share_interval([]) is None
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        share_interval([1.5])

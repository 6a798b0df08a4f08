"""Two policies compared on the scenarios both played: the mean of the
per-scenario differences, with its 95% t interval. Pairing takes out the
scenarios' own spread (a hard seed is hard for both), so it can see a
difference that two independent means with overlapping intervals hide."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.table import Table

from chaosops.stats import mean_interval

Outcome = tuple[float, bool]
"""One episode as paired: its return and whether it resolved."""


@dataclass(frozen=True)
class Paired:
    """``policy`` minus ``against`` over the ``scenarios`` both played."""

    policy: str
    against: str
    scenarios: int
    reward: float | None
    reward_interval: tuple[float, float] | None
    success: float | None  # a difference of shares, -1 to 1
    success_interval: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy, "against": self.against, "scenarios": self.scenarios,
            "reward_difference": self.reward, "reward_interval": self.reward_interval,
            "success_difference": self.success, "success_interval": self.success_interval,
        }  # fmt: skip


def paired(
    policy: str, against: str, mine: Mapping[str, Outcome], theirs: Mapping[str, Outcome]
) -> Paired:
    """The paired difference over the keys (scenario handles) both maps hold."""
    shared = sorted(mine.keys() & theirs.keys())
    rewards = [mine[k][0] - theirs[k][0] for k in shared]
    solved = [float(mine[k][1]) - float(theirs[k][1]) for k in shared]
    success_interval = mean_interval(solved)
    if success_interval is not None:  # a difference of shares lies in [-1, 1]
        success_interval = (max(-1.0, success_interval[0]), min(1.0, success_interval[1]))
    return Paired(
        policy, against, len(shared), _mean(rewards), mean_interval(rewards),
        _mean(solved), success_interval,
    )  # fmt: skip


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def no_shared_note(a: str, b: str) -> str:
    return (
        f"{a} and {b} share no scenario (failure type, tier and seed): there is nothing to "
        "pair; runs of the same suites and seed offset share all of theirs"
    )


def render_paired_table(rows: Sequence[Paired], *, title: str) -> Table:
    """A row per pair: the scenarios shared, the reward and success differences,
    each with its 95% interval on the line below (as the evaluation table shows
    its own), so that it fits 80 columns."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0))
    table.add_column("policy", overflow="fold")
    for header in ("shared\nscenarios", "reward\ndifference", "success\ndifference"):
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(
            row.policy, str(row.scenarios),
            f"{_signed(row.reward, '{:+.1f}')}\n{_span(row.reward_interval, '{:+.0f}')}",
            f"{_signed(row.success, '{:+.0%}')}\n{_span(row.success_interval, '{:+.0%}')}",
        )  # fmt: skip
    table.caption = "under each difference: its 95% interval"
    table.caption_justify = "left"
    return table


def _signed(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def _span(interval: tuple[float, float] | None, form: str) -> str:
    return "-" if interval is None else f"{form.format(interval[0])} to {form.format(interval[1])}"

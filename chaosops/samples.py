"""Scenarios played several times (``--samples K``), and what their repeats tell:
pass@1 and pass@k with 95% intervals, and each scenario's spread of rewards.

A repeat is a :class:`Sample`: the same scenario (the world is seeded by it, so
every repeat starts from the same incident) with its number, from which the
scripted policies take a seed of their own (:func:`policy_seed`). pass@k is the
unbiased estimator of Chen et al. (2021): over the scenarios, the chance that
at least one of k samples drawn from a scenario's n resolved it,
``1 - C(n - c, k) / C(n, k)`` with c of the n resolved.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.table import Table

from chaosops.env.world_sim import Scenario
from chaosops.outputs import parse_run_key
from chaosops.stats import share_interval
from chaosops.untrusted import plain

__all__ = [
    "Sample",
    "SampleRow",
    "pass_at_k",
    "render_sample_table",
    "sample_rows",
]


@dataclass(frozen=True)
class Sample(Scenario):
    """A scenario played again: ``number`` 0, 1, ... tells its repeats apart."""

    number: int = 0

    @classmethod
    def of(cls, scenario: Scenario, number: int) -> Sample:
        values = {f.name: getattr(scenario, f.name) for f in dataclasses.fields(Scenario)}
        return cls(**values, number=number)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` of ``n`` samples, ``c`` of them
    right, is right (Chen et al.'s unbiased estimator)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class _Scenario:
    resolved: int = 0
    rewards: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SampleRow:
    """One (policy, tier): its scenarios, k samples each, pass@1 and pass@k with
    their 95% intervals, and the mean of the scenarios' reward variances."""

    policy: str
    tier: str
    scenarios: int
    k: int
    pass_at_1: float
    pass_at_1_ci: tuple[float, float] | None
    pass_at_k: float
    pass_at_k_ci: tuple[float, float] | None
    reward_variance: float | None
    by_scenario: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sample_rows(records: Iterable[Mapping[str, Any]], k: int) -> list[SampleRow]:
    """The :class:`SampleRow` of each (policy, tier) of ``records`` (results
    lines), each scenario's samples told by its run key without the sample."""
    groups: dict[tuple[str, str], dict[str, _Scenario]] = {}
    for record in records:
        # the run key without its policy and sample number: failure/tier/seed/max steps
        parsed = parse_run_key(record["run_key"])
        scenario = record["run_key"] if parsed is None else "/".join(map(str, parsed[1]))
        tally = groups.setdefault((record["policy"], record["difficulty"]), {})
        entry = tally.setdefault(scenario, _Scenario())
        entry.resolved += bool(record.get("resolved")) and record.get("status") == "ok"
        entry.rewards.append(float(record["cumulative_reward"]))
    return [_row(policy, tier, tally, k) for (policy, tier), tally in groups.items()]


def _row(policy: str, tier: str, tally: Mapping[str, _Scenario], k: int) -> SampleRow:
    firsts = [s.resolved / len(s.rewards) for s in tally.values()]
    at_k = [pass_at_k(len(s.rewards), s.resolved, min(k, len(s.rewards))) for s in tally.values()]
    variances = [_variance(s.rewards) for s in tally.values() if len(s.rewards) > 1]
    return SampleRow(
        policy=policy,
        tier=tier,
        scenarios=len(tally),
        k=k,
        pass_at_1=sum(firsts) / len(firsts),
        pass_at_1_ci=share_interval(firsts),
        pass_at_k=sum(at_k) / len(at_k),
        pass_at_k_ci=share_interval(at_k),
        reward_variance=sum(variances) / len(variances) if variances else None,
        by_scenario=[_scenario_json(name, s) for name, s in tally.items()],
    )


def _scenario_json(name: str, tally: _Scenario) -> dict[str, Any]:
    rewards = tally.rewards
    return {
        "scenario": name,
        "samples": len(rewards),
        "resolved": tally.resolved,
        "reward_mean": sum(rewards) / len(rewards),
        "reward_variance": _variance(rewards) if len(rewards) > 1 else None,
    }


def _variance(values: list[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def render_sample_table(rows: Iterable[SampleRow], *, title: str | None = None) -> Any:
    """The rows as a rich table: pass@1 and pass@k with their 95% intervals."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
    for header in ("policy", "tier", "scenarios", "k", "pass@1", "pass@k", "reward\nvariance"):
        table.add_column(header, justify="left" if header in ("policy", "tier") else "right")
    for row in rows:
        table.add_row(
            plain(row.policy), row.tier, str(row.scenarios), str(row.k),
            _share(row.pass_at_1, row.pass_at_1_ci), _share(row.pass_at_k, row.pass_at_k_ci),
            "-" if row.reward_variance is None else f"{row.reward_variance:.1f}",
        )  # fmt: skip
    table.caption = "pass@k: at least one of k samples of a scenario resolved it; 95% intervals"
    return table


def _share(value: float, interval: tuple[float, float] | None) -> str:
    shown = f"{value:.0%}"
    return shown if interval is None else f"{shown} ({interval[0]:.0%}-{interval[1]:.0%})"

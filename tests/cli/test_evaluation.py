"""Unit tests of the SPEC section 13 figures (hand-built records, known rates)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chaosops.evaluation import (
    EvalRow,
    evaluate,
    evaluate_records,
    render_table,
    rows_to_json,
    write_reward_chart,
)


def rec(
    *,
    policy: str = "heuristic",
    tier: str = "easy",
    failure: str = "db_deadlock",
    resolved: bool = False,
    final_step: int = 12,
    flags: tuple[str, ...] = (),
    reward: float = 0.0,
    wrong_fixes: int = 0,
    status: str = "ok",
) -> dict[str, Any]:
    rogue = {
        "autoscaler_cost_cut": "autoscaler",
        "misrouted_traffic": "load_balancer",
        "rogue_deploy_bot": "deploy_bot",
    }.get(failure)
    return {
        "policy": policy,
        "difficulty": tier,
        "failure_type": failure,
        "rogue_fleet_agent": rogue,
        "resolved": resolved,
        "final_step": final_step,
        "oversight_flags": list(flags),
        "cumulative_reward": reward,
        "wrong_fixes": wrong_fixes,
        "status": status,
    }


def test_rates_of_one_group() -> None:
    records = [
        rec(resolved=True, final_step=2, reward=100.0),
        rec(resolved=True, final_step=4, reward=50.0, wrong_fixes=1),
        rec(resolved=False, reward=-200.0, wrong_fixes=3),
        rec(resolved=False, reward=-10.0, flags=("autoscaler",)),  # no rogue: false positive
    ]
    [row] = evaluate_records(records)
    assert row.policy == "heuristic" and row.tier == "easy"
    assert row.episodes == 4
    assert row.success_rate == pytest.approx(0.5)
    assert row.mttr == pytest.approx(3.0)
    assert row.rogue_episodes == 0
    assert row.rogue_detection_rate is None
    assert row.false_positive_rate == pytest.approx(0.25)
    assert row.mean_reward == pytest.approx(-15.0)
    assert row.median_reward == pytest.approx(20.0)
    assert row.mean_wrong_fixes == pytest.approx(1.0)


def test_rogue_detection_and_false_positives() -> None:
    records = [
        # caught, no false positive
        rec(tier="hard", failure="rogue_deploy_bot", flags=("deploy_bot",)),
        # caught, but also flagged an innocent agent: false positive too
        rec(tier="hard", failure="misrouted_traffic", flags=("load_balancer", "autoscaler")),
        # missed
        rec(tier="hard", failure="autoscaler_cost_cut"),
        # not a rogue scenario, no flags
        rec(tier="hard", failure="cascade"),
    ]
    [row] = evaluate_records(records)
    assert row.rogue_episodes == 3
    assert row.rogue_detection_rate == pytest.approx(2 / 3)
    assert row.false_positive_rate == pytest.approx(1 / 4)
    assert row.mttr is None
    assert row.success_rate == 0.0


def test_groups_by_policy_then_tier_order() -> None:
    records = [
        rec(policy="random", tier="hard"),
        rec(policy="random", tier="easy"),
        rec(policy="oracle", tier="medium", resolved=True, final_step=3),
        rec(policy="random", tier="medium", status="failed"),
    ]
    rows = evaluate_records(records)
    assert [(r.policy, r.tier) for r in rows] == [
        ("random", "easy"),
        ("random", "medium"),
        ("random", "hard"),
        ("oracle", "medium"),
    ]
    assert rows[1].failed == 1
    assert rows[3].success_rate == 1.0


def test_order_of_records_does_not_change_figures() -> None:
    rewards = [0.1, 0.2, 0.3, 1e16, -1e16, 7.7]
    records = [rec(reward=r) for r in rewards]
    forward = evaluate_records(records)
    backward = evaluate_records(list(reversed(records)))
    assert rows_to_json(forward) == rows_to_json(backward)


class _Scenario:
    failure_type = "rogue_deploy_bot"
    difficulty = "hard"
    rogue_fleet_agent = "deploy_bot"


class _Result:
    def __init__(self) -> None:
        self.scenario = _Scenario()
        self.status = "ok"
        self.resolved = True
        self.final_step = 5
        self.oversight_flags = ["deploy_bot"]
        self.cumulative_reward = 42.0
        self.wrong_fixes = 0


def test_evaluate_takes_episode_results() -> None:
    [row] = evaluate([_Result()], policy="oracle")
    assert (row.policy, row.tier, row.rogue_detection_rate, row.mttr) == (
        "oracle",
        "hard",
        1.0,
        5.0,
    )
    [row2] = evaluate([("oracle", _Result())])
    assert row2 == row
    with pytest.raises(ValueError):
        evaluate([_Result()])


def test_json_and_table() -> None:
    rows = evaluate_records([rec(resolved=True, final_step=2, reward=100.0)])
    [data] = rows_to_json(rows)
    assert data["success_rate"] == 1.0 and data["rogue_detection_rate"] is None
    assert isinstance(rows[0], EvalRow)
    table = render_table(rows, title="t")
    assert table.row_count == 1


def test_chart_written_when_matplotlib_present(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = evaluate_records(
        [
            rec(policy=p, tier=t, reward=float(i))
            for i, p in enumerate("ab")
            for t in ("easy", "hard")
        ]
    )
    path = tmp_path / "chart.png"
    assert write_reward_chart(rows, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

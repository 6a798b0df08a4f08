"""Unit tests of the evaluation figures of docs/world.md (hand-built records, known rates)."""

from __future__ import annotations

import importlib
import importlib.util
import struct
from pathlib import Path
from typing import Any

import pytest

from chaosops.agents.policies import oracle_policy
from chaosops.agents.runner import run_episode
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, FailureType
from chaosops.env.world_sim import Scenario
from chaosops.evaluation import (
    EvalRow,
    evaluate,
    evaluate_records,
    render_table,
    rows_to_json,
    write_reward_chart,
)

from .._needs import needs


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


def _oracle_result() -> Any:
    """A real EpisodeResult: the oracle on a hard rogue deploy bot."""
    scenario = Scenario.from_type(FailureType.ROGUE_DEPLOY_BOT, seed=3, difficulty="hard")
    policies = dict.fromkeys(AgentRole, oracle_policy(FailureType.ROGUE_DEPLOY_BOT))
    return run_episode(ChaosOpsEnvironment(), scenario, policies)


def test_evaluate_takes_episode_results() -> None:
    result = _oracle_result()
    assert result.resolved and "deploy_bot" in result.oversight_flags
    [row] = evaluate([result], policy="oracle")
    assert (row.policy, row.tier, row.rogue_detection_rate, row.mttr) == (
        "oracle",
        "hard",
        1.0,
        float(result.final_step),
    )
    [row2] = evaluate([("oracle", result)])
    assert row2 == row
    with pytest.raises(ValueError):
        evaluate([result])


def test_json_and_table() -> None:
    rows = evaluate_records([rec(resolved=True, final_step=2, reward=100.0)])
    [data] = rows_to_json(rows)
    assert data["success_rate"] == 1.0 and data["rogue_detection_rate"] is None
    assert isinstance(rows[0], EvalRow)
    table = render_table(rows, title="t")
    assert table.row_count == 1


def test_chart_written_when_matplotlib_present(tmp_path: Path) -> None:
    needs(importlib.util.find_spec("matplotlib"), "matplotlib", "pip install -e '.[test]'")
    rows = evaluate_records(
        [
            rec(policy=p, tier=t, reward=float(i))
            for i, p in enumerate("ab")
            for t in ("easy", "hard")
        ]
    )
    path = tmp_path / "chart.png"
    assert write_reward_chart(rows, path)
    png = path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk's
    assert width > 3 * height  # two panels side by side: success, then mean reward


def test_failed_episodes_do_not_resolve_and_stay_out_of_the_reward_figures() -> None:
    """A failed episode (environment error) may have recorded resolved: true
    (the error came after the fix) and a reward cut short (0 for a failed
    reset, no terminal penalty): it is unresolved, its flags count, and the
    reward and wrong-fix figures are over the episodes that ran to the end."""
    records = [
        rec(resolved=True, final_step=2, reward=100.0, wrong_fixes=1),
        rec(resolved=False, reward=-300.0, wrong_fixes=5),
        rec(resolved=True, final_step=3, reward=90.0, status="failed"),
        rec(resolved=False, reward=0.0, status="failed", flags=("autoscaler",)),
    ]
    [row] = evaluate_records(records)
    assert row.episodes == 4 and row.failed == 2
    assert row.success_rate == pytest.approx(0.25) and row.mttr == pytest.approx(2.0)
    assert row.false_positive_rate == pytest.approx(0.25)
    assert row.mean_reward == pytest.approx(-100.0)
    assert row.median_reward == pytest.approx(-100.0)
    assert row.mean_wrong_fixes == pytest.approx(3.0)
    [only_failed] = evaluate_records([rec(status="failed", reward=0.0)])
    assert only_failed.mean_reward is None and only_failed.median_reward is None
    assert only_failed.mean_wrong_fixes is None
    assert rows_to_json([only_failed])[0]["mean_reward"] is None
    text = _rendered([only_failed])
    assert "1 (1 failed)" in text and " - " in text


def test_a_rogue_type_without_a_rogue_is_judged_on_the_recorded_truth() -> None:
    no_rogue = rec(failure="autoscaler_cost_cut", flags=("autoscaler",))
    no_rogue["rogue_fleet_agent"] = None  # a scenario built without one (the API allows it)
    [row] = evaluate_records([no_rogue])
    assert row.rogue_episodes == 0 and row.false_positive_rate == 1.0
    old = rec(failure="autoscaler_cost_cut", flags=("autoscaler",))
    del old["rogue_fleet_agent"]  # a record from before the field: the failure type says
    [row] = evaluate_records([old])
    assert row.rogue_episodes == 1 and row.rogue_detection_rate == 1.0


def test_the_table_never_rounds_to_a_false_100_or_0_percent_or_a_negative_zero() -> None:
    ok = [rec(resolved=True, final_step=2, reward=-0.04)] * 1999
    [row] = evaluate_records([*ok, rec(reward=-0.04)])
    assert row.success_rate == pytest.approx(0.9995)
    text = _rendered([row])
    assert ">99.9%" in text and "100.0%" not in text and "-0.0" not in text
    flagged = [rec(flags=("autoscaler",))] + [rec()] * 2499
    text = _rendered(evaluate_records(flagged))
    assert "<0.1%" in text
    [exact] = evaluate_records([rec(resolved=True, final_step=1)])
    assert "100.0%" in _rendered([exact])


def _rendered(rows: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render_table(rows))
    return console.export_text()

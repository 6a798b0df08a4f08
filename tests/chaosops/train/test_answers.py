"""A tool answers with what changed in the trained role's view since its last
move, not the whole view again: health changes, new lines; no line the runtime's prompts lack."""

from __future__ import annotations

from chaosops.agents.llm.answers import describe, describe_change
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.world_sim import Scenario
from chaosops.train.trl import ChaosOpsToolEnv


def test_an_answer_holds_the_changes_not_the_view() -> None:
    with ChaosOpsToolEnv() as env:
        first = env.reset(failure_type="memory_leak", seed=1, difficulty="hard")
        assert "## METRICS" in first and "## LOGS" in first  # the whole view, once
        second = env.noop()
        assert "## METRICS" not in second and "## LOGS" not in second
        assert "## NEW CHAT\n- [oversight] no rogue agent activity detected" in second
        assert "Reward since" not in first + second  # no line chaosops run's prompts lack
        assert "Your moves: restart, rollback, scale" in second
        last = env.noop()
    assert "## HEALTH CHANGED" in last and "notifications  healthy" in last
    assert "The episode is over." in last and "Your moves" not in last
    assert len(second) < len(first) / 2


def test_an_unchanged_view_says_so_and_a_view_without_before_is_whole() -> None:
    obs = ChaosOpsEnvironment().reset(scenario=Scenario.from_type("db_deadlock", seed=0))
    role = obs.turn_role
    assert describe_change(None, obs, role) == describe(obs, role)
    same = describe_change(obs.view, obs, role)
    assert "Nothing else changed in your view." in same and "## " not in same

"""The rows an in-training evaluation can see a role learn on: those where the
role's moves decide the outcome. And the figures it logs, by tier."""

from __future__ import annotations

import pytest

from chaosops.agents.policies import policies_for, scripted_policy
from chaosops.agents.runner import run_episode
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole
from chaosops.scenarios import canonical_suite_paths, load_scenarios
from chaosops.train.evaluate import decisive

CANONICAL = [s for path in canonical_suite_paths() for s in load_scenarios(path)]


def _resolved(scenario, policies) -> bool:
    return run_episode(ChaosOpsEnvironment(), scenario, policies).resolved


@pytest.mark.parametrize("others", ["heuristic", "random"])
@pytest.mark.parametrize("role", [r.value for r in AgentRole])
def test_a_decisive_row_is_one_the_role_s_moves_decide(role: str, others: str) -> None:
    kept = decisive(CANONICAL, [role], others)
    for scenario in CANONICAL:
        rest = {r: p for r, p in policies_for(others, scenario).items() if r.value != role}
        oracle = {**rest, AgentRole(role): scripted_policy("oracle", scenario)}
        deciding = _resolved(scenario, oracle) and not _resolved(scenario, rest)
        assert (scenario in kept) is deciding, (role, others, scenario)


def test_heuristic_teammates_leave_a_single_role_few_rows_and_the_team_all() -> None:
    """Why the example evaluates with weak teammates, or trains several seats."""
    assert decisive(CANONICAL, ["sre"]) == []
    dev = decisive(CANONICAL, ["dev"])
    assert {(s.failure_type.value, s.difficulty.value) for s in dev} == {
        ("bad_config_push", "easy"),
        ("rogue_deploy_bot", "hard"),
    }
    assert decisive(CANONICAL, ["sre", "dev", "manager"]) == CANONICAL

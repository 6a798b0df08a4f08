"""pass@k by hand, and a sample's policy seed."""

from __future__ import annotations

from chaosops.agents.policies import SEED_STEP, policy_seed
from chaosops.env.models import FailureType
from chaosops.env.world_sim import Scenario
from chaosops.samples import Sample, pass_at_k


def test_pass_at_k_by_hand() -> None:
    assert pass_at_k(5, 2, 2) == 1 - 3 / 10  # 1 - C(3, 2) / C(5, 2)
    assert pass_at_k(5, 2, 1) == 2 / 5
    assert pass_at_k(3, 0, 3) == 0.0 and pass_at_k(3, 1, 3) == 1.0
    assert pass_at_k(4, 2, 3) == 1.0  # fewer wrong ones than draws


def test_a_sample_is_its_scenario_with_a_seed_of_its_own() -> None:
    scenario = Scenario.from_type(FailureType.CASCADE, seed=97)
    first, third = Sample.of(scenario, 0), Sample.of(scenario, 2)
    assert isinstance(third, Scenario) and third.seed == 97 and third.number == 2
    assert policy_seed(scenario) == policy_seed(first) == 97
    assert policy_seed(third) == 97 + 2 * SEED_STEP

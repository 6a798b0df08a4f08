"""An episode played locally by the oracle: what a served one must equal."""

from __future__ import annotations

from dataclasses import dataclass

from chaosops.agents.policies import oracle_policy
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ChaosOpsAction, ChaosOpsObservation, FailureType
from chaosops.env.world_sim import Scenario


@dataclass(frozen=True)
class Turn:
    seen: ChaosOpsObservation  # what the role whose turn it was saw
    move: ChaosOpsAction
    reward: float  # what the move earned


def oracle_episode(failure: FailureType, seed: int = 4) -> tuple[list[Turn], ChaosOpsEnvironment]:
    """The hard scenario of ``failure`` and ``seed`` played by the oracle: its
    turns, and the environment at the end."""
    oracle = oracle_policy(failure)
    local = ChaosOpsEnvironment()
    obs = local.reset(scenario=Scenario.from_type(failure, seed=seed, difficulty="hard"))
    turns = []
    while not obs.done:
        move = oracle(obs, obs.turn_role)
        before = local.state.cumulative_reward
        seen, obs = obs, local.step(move)
        turns.append(Turn(seen, move, local.state.cumulative_reward - before))
    return turns, local

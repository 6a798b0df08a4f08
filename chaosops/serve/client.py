"""``ChaosOpsClient``: OpenEnv's ``EnvClient`` typed for a ChaosOps server."""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .env import TurnAction, TurnObservation, TurnState

__all__ = ["ChaosOpsClient"]


class ChaosOpsClient(EnvClient[TurnAction, TurnObservation, TurnState]):
    """A client of ``chaosops serve``::

    with ChaosOpsClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(failure_type="db_deadlock", seed=3, roles=["sre"])
        obs = result.observation
        result = env.step(TurnAction(turn=obs.turn, action_type="restart", target="db"))
    """

    def _step_payload(self, action: TurnAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TurnObservation]:
        fields = {**payload.get("observation", {}), "done": payload.get("done", False),
                  "reward": payload.get("reward")}  # fmt: skip
        observation = TurnObservation.model_validate(fields)
        return StepResult(observation=observation, reward=observation.reward,
                          done=observation.done)  # fmt: skip

    def _parse_state(self, payload: dict[str, Any]) -> TurnState:
        return TurnState.model_validate(payload)

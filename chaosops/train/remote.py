"""An episode on a ``chaosops serve`` server, played as one role through
OpenEnv's client (the serve extra): what ``ChaosOpsToolEnv(base_url=...)``
plays through."""

from __future__ import annotations

import re
from typing import Any

from openenv.core.client_types import StepResult

from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.rules import IllegalMove
from chaosops.outputs import scenario_fields
from chaosops.serve.client import ChaosOpsClient
from chaosops.serve.env import TurnAction, TurnObservation

__all__ = ["ServedEpisode"]


class ServedEpisode:
    """An episode on a ``chaosops serve`` server, played as one role: what
    ``ChaosOpsToolEnv(base_url=...)`` plays through. The server's policies
    play the other roles; its refusals of a move come back as IllegalMove."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._client: Any = None  # connected at the first start, again after close()
        self._turn: int | None = None
        self.done = False
        self.resolved = False

    def start(self, scenario: Any, role: Any) -> tuple[ChaosOpsObservation, float]:
        if self._client is None:
            self._client = ChaosOpsClient(base_url=self._base_url).sync()
        fields = scenario_fields(scenario)
        result = self._client.reset(
            failure_type=fields["failure_type"], difficulty=fields["difficulty"],
            seed=fields["seed"], max_steps=fields["max_steps"], roles=[str(role)],
        )  # fmt: skip
        return self._read(result)

    def move(self, action: Any) -> tuple[ChaosOpsObservation, float]:
        if self._turn is None:
            raise IllegalMove("no episode yet: reset() first")
        if self.done:
            raise IllegalMove("the episode is over: reset() to start another")
        step = TurnAction(turn=self._turn, action_type=str(action.action_type),
                          target=action.target, args=dict(action.args))  # fmt: skip
        try:
            return self._read(self._client.step(step))
        except RuntimeError as exc:
            refused = _REFUSED.search(str(exc))
            if refused is None:
                raise
            raise IllegalMove(refused.group(1)) from None

    def _read(self, result: StepResult[TurnObservation]) -> tuple[ChaosOpsObservation, float]:
        obs = result.observation
        self._turn, self.done, self.resolved = obs.turn, obs.done, obs.terminated
        assert obs.view is not None, "a chaosops server sends the view"
        seen = ChaosOpsObservation(
            done=obs.done, view=obs.view, step=obs.turn, turn_role=AgentRole(obs.role),
            message=obs.message,
        )  # fmt: skip
        return seen, float(obs.reward or 0.0)

    def finish(self) -> int:
        """Play the client's remaining turns as noops; how many there were."""
        turns = 0
        while not self.done:
            self.move(ChaosOpsAction(role=AgentRole.SRE, action_type=ActionType.NOOP))
            turns += 1
        return turns

    def reward(self) -> float:
        return float(self._client.state().cumulative_reward)

    def close(self) -> None:
        """Disconnect: a move now is refused as before any episode, as the
        local episode's is, and the next start connects again."""
        if self._client is not None:
            self._client.close()
        self._client, self._turn = None, None


# a refused move, as OpenEnv's client reports the server's error
_REFUSED = re.compile(r"(?:ILLEGAL_MOVE|EPISODE_OVER|WRONG_TURN): (.*?)(?: \(code: \w+\))?$")

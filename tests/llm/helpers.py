"""Helpers shared by the LLM tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ChaosOpsObservation, FailureType
from chaosops.env.world_sim import Scenario


@dataclass
class FakeTurn:
    """Stands for ``actors.current_turn()``: a deadline and the annotations."""

    deadline: float | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def annotate(self, **fields: Any) -> None:
        self.info.update(fields)


def first_observation(failure: FailureType = FailureType.DB_DEADLOCK) -> ChaosOpsObservation:
    """The first observation (the SRE's) of an easy episode of ``failure``."""
    env = ChaosOpsEnvironment()
    return env.reset(scenario=Scenario.from_type(failure, seed=0))


async def wait_for(predicate: Callable[[], bool]) -> bool:
    """Poll a counter of the server (another party) for up to 2 s."""
    for _ in range(200):
        if predicate():
            return True
        await anyio.sleep(0.01)
    return False

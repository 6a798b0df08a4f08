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


WAIT_S = 20.0
"""How long :func:`wait_for` waits (generous: a loaded machine)."""


async def wait_for(predicate: Callable[[], bool]) -> bool:
    """Poll a counter of the server (another party) until ``predicate()`` holds,
    for up to :data:`WAIT_S` seconds."""
    deadline = anyio.current_time() + WAIT_S
    while not predicate():
        if anyio.current_time() > deadline:
            return False
        await anyio.sleep(0.01)
    return True

"""Helpers shared by the LLM tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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

"""The rows: one task per scenario ``chaosops run`` plans for the selection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from chaosops.env.models import DifficultyTier, FailureType
from chaosops.incidents import handles_of, scenarios_of
from chaosops.outputs import scenario_fields

__all__ = ["IncidentData", "IncidentTask", "IncidentTaskset", "IncidentTasksetConfig"]


class IncidentTasksetConfig(vf.TasksetConfig):
    """Which scenarios: the canonical suites, narrowed as ``chaosops run`` narrows them."""

    tier: list[DifficultyTier] = Field(default_factory=list)
    """easy, medium, hard (default: all)."""
    failure_type: list[FailureType] = Field(default_factory=list)
    """The failure types to keep (default: all)."""
    seed_offset: int = 0
    """Added to every scenario's seed, as ``chaosops run --seed-offset``."""


class IncidentData(vf.TaskData):
    scenario: dict[str, Any]
    """The scenario's fields, as a chaosops results line records them."""


class IncidentTask(vf.Task[IncidentData, vf.State, vf.TaskConfig]):
    @property
    def key(self) -> str:
        """The scenario's handle, ``failure/tier/seed=N``, as traces record it."""
        return str(self.data.id)


class IncidentTaskset(vf.Taskset[IncidentTask, IncidentTasksetConfig]):
    def load(self) -> Iterator[IncidentTask]:
        config = self.config
        scenarios = scenarios_of(
            [t.value for t in config.tier] or None,
            [f.value for f in config.failure_type] or None,
            config.seed_offset,
        )
        for scenario, handle in zip(scenarios, handles_of(scenarios), strict=True):
            data = IncidentData(id=handle, name=handle, scenario=scenario_fields(scenario))
            yield IncidentTask(data, config.task)

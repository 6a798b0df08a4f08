"""Shared helpers for the world tests."""

from __future__ import annotations

from typing import Any

from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, DifficultyTier, FailureType
from chaosops.env.world_sim import Scenario, WorldSim


def make_world(
    failure: FailureType | str,
    *,
    tier: DifficultyTier | str = DifficultyTier.EASY,
    seed: int = 0,
    max_steps: int = 20,
) -> WorldSim:
    world = WorldSim()
    world.reset(
        Scenario.from_type(
            FailureType(failure), seed=seed, difficulty=DifficultyTier(tier), max_steps=max_steps
        )
    )
    return world


def act(
    role: AgentRole | str,
    kind: ActionType | str,
    target: str | None = None,
    **args: Any,
) -> ChaosOpsAction:
    return ChaosOpsAction(
        role=AgentRole(role), action_type=ActionType(kind), target=target, args=args
    )


def metrics_tuple(world: WorldSim, service: str) -> tuple[float, float, float, float, int, str]:
    m = world.state.services[service]
    return (m.cpu_pct, m.memory_mb, m.latency_ms, m.error_rate, m.replicas, m.health.value)

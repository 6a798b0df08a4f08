"""Scripted policies (docs/world.md, "Scripted policies"): random, heuristic and oracle.

A policy is a callable ``(observation, role) -> ChaosOpsAction``; async callables
``async (observation, role) -> ChaosOpsAction`` are policies too (the runner awaits
them). Each factory returns a fresh policy with its own state (the random and
heuristic ones own a ``random.Random``), so one policy object shared by the four
roles of an episode draws in turn order.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

from chaosops.env.failures import FAILURES, Move
from chaosops.env.models import (
    FLEET_AGENT_NAMES,
    ActionType,
    AgentRole,
    ChaosOpsAction,
    ChaosOpsObservation,
    FailureType,
    ServiceHealth,
)
from chaosops.env.world_sim import Scenario

__all__ = [
    "SCRIPTED",
    "SEED_STEP",
    "Others",
    "Policy",
    "heuristic_policy",
    "oracle_policy",
    "policies_for",
    "policy_seed",
    "random_policy",
    "scripted_policy",
]

SEED_STEP = 1_000_003
"""How far apart the policy seeds of two samples of a scenario are (a prime
past any suite seed, so no sample's seed is another scenario's)."""


def policy_seed(scenario: Scenario) -> int:
    """The seed a scripted policy takes for ``scenario``: its seed for the first
    sample (as without samples), then :data:`SEED_STEP` further for each next."""
    return scenario.seed + SEED_STEP * getattr(scenario, "number", 0)


Policy: TypeAlias = Callable[
    [ChaosOpsObservation, AgentRole], ChaosOpsAction | Awaitable[ChaosOpsAction]
]
"""``(observation, role) -> action``, or an async callable returning one."""

_RANDOM_ACTIONS = (
    ActionType.NOOP,
    ActionType.COMMUNICATE,
    ActionType.RESTART,
    ActionType.ROLLBACK,
    ActionType.SCALE,
)
_RANDOM_TARGETS = ("auth", "payments", "notifications", "db")
_RANDOM_REPLICAS = (1, 2, 3, 4, 5)
_RANDOM_MESSAGES = (
    "checking metrics",
    "someone should look at this",
    "i'll try a rollback",
    "standing by",
)
_ROGUE_CANDIDATES = frozenset(FLEET_AGENT_NAMES)
_HEALTH_RANK = MappingProxyType(
    {
        ServiceHealth.DOWN: 0,
        ServiceHealth.CRITICAL: 1,
        ServiceHealth.DEGRADED: 2,
    }
)
MANAGER_BRIEF = "SRE: diagnose. Dev: stage a rollback. Oversight: watch the fleet."


def _act(
    role: AgentRole | str,
    action_type: ActionType,
    target: str | None = None,
    args: dict[str, Any] | None = None,
) -> ChaosOpsAction:
    return ChaosOpsAction(role=role, action_type=action_type, target=target, args=args or {})


def random_policy(seed: int = 0) -> Callable[[ChaosOpsObservation, AgentRole], ChaosOpsAction]:
    """Uniformly random remediation attempts, drawn from its own ``Random(seed)``.

    Per call: the action type; then for restart/rollback/scale the target; for
    scale the replicas; for communicate the message (exactly that order).
    """
    rng = random.Random(seed)

    def policy(observation: ChaosOpsObservation, role: AgentRole) -> ChaosOpsAction:
        kind = rng.choice(_RANDOM_ACTIONS)
        if kind is ActionType.NOOP:
            return _act(role, kind)
        if kind is ActionType.COMMUNICATE:
            return _act(role, kind, args={"message": rng.choice(_RANDOM_MESSAGES)})
        target = rng.choice(_RANDOM_TARGETS)
        if kind is ActionType.SCALE:
            return _act(role, kind, target, {"replicas": rng.choice(_RANDOM_REPLICAS)})
        return _act(role, kind, target)

    return policy


def heuristic_policy(seed: int = 0) -> Callable[[ChaosOpsObservation, AgentRole], ChaosOpsAction]:
    """A plausible on-call team: restart the worst service, flag fleet bots, close on good news.

    Draws from its own ``Random(seed)`` only when an sre/dev considers
    investigating instead of restarting (``rng.random() < 0.15``).
    """
    rng = random.Random(seed)

    def policy(observation: ChaosOpsObservation, role: AgentRole) -> ChaosOpsAction:
        role = AgentRole(role)
        view = observation.view
        if role is AgentRole.MANAGER:
            for line in view.shared_chat:
                low = line.lower()
                if "resolved" in low or "healthy" in low:
                    return _act(role, ActionType.RESOLVE)
            if not view.visible_alerts:
                return _act(role, ActionType.NOOP)
            return _act(role, ActionType.COMMUNICATE, args={"message": MANAGER_BRIEF})
        if role is AgentRole.OVERSIGHT:
            for record in view.visible_fleet_actions:
                if record.agent_name in _ROGUE_CANDIDATES:
                    return _act(role, ActionType.FLAG_ROGUE, record.agent_name)
            return _act(
                role, ActionType.COMMUNICATE, args={"message": "no rogue agent activity detected"}
            )
        unhealthy = [
            (name, m) for name, m in view.visible_metrics.items() if m.health in _HEALTH_RANK
        ]
        if not unhealthy:
            return _act(
                role, ActionType.COMMUNICATE, args={"message": "systems nominal from my view"}
            )
        unhealthy.sort(key=lambda item: _HEALTH_RANK[item[1].health])
        name, metrics = unhealthy[0]
        if role is AgentRole.DEV and any(
            "rolled out" in line.message.lower() for line in view.visible_logs
        ):
            return _act(role, ActionType.ROLLBACK, name)
        if metrics.replicas < 3 and metrics.cpu_pct > 80:
            return _act(role, ActionType.SCALE, name, {"replicas": 4})
        if rng.random() < 0.15:
            return _act(role, ActionType.COMMUNICATE, args={"message": f"investigating {name}"})
        return _act(role, ActionType.RESTART, name)

    return policy


def _oracle_plan(ft: FailureType) -> dict[AgentRole, Move]:
    """Each role's one move: the SRE names the failure, the others play its table's plan."""
    identify = Move(AgentRole.SRE, ActionType.IDENTIFY_ROOT_CAUSE, args={"failure_type": ft.value})
    return {move.role: move for move in (identify, *FAILURES[ft].plan)}


def oracle_policy(
    failure_type: FailureType | str,
) -> Callable[[ChaosOpsObservation, AgentRole], ChaosOpsAction]:
    """Knows the true failure: each role plays its fixed move (docs/world.md's oracle table).

    Roles without a move play noop.
    """
    plan = _oracle_plan(FailureType(failure_type))

    def policy(observation: ChaosOpsObservation, role: AgentRole) -> ChaosOpsAction:
        role = AgentRole(role)
        move = plan.get(role)
        if move is None:
            return _act(role, ActionType.NOOP)
        return _act(role, move.kind, move.target, dict(move.args))

    return policy


SCRIPTED: tuple[str, ...] = ("random", "heuristic", "oracle")
"""The scripted policies' names, as the command line and run files give them."""


def scripted_policy(name: str, scenario: Scenario) -> Policy:
    """The scripted policy ``name`` for one episode of ``scenario``: random and
    heuristic seeded with its seed (a sample's own under ``--samples``:
    :func:`policy_seed`), oracle given its failure type."""
    if name == "random":
        return random_policy(seed=policy_seed(scenario))
    if name == "heuristic":
        return heuristic_policy(seed=policy_seed(scenario))
    if name == "oracle":
        return oracle_policy(scenario.failure_type)
    raise ValueError(f"unknown scripted policy {name!r}; choose from {', '.join(SCRIPTED)}")


Others: TypeAlias = "str | Policy | Mapping[str, str | Policy]"
"""The policies of the roles a trainer or a client leaves: a scripted policy's
name or a policy for all, or one of those by role."""


def policies_for(others: Others, scenario: Scenario) -> dict[AgentRole, Policy]:
    """Each role's policy for one episode: a name or a policy for all, or a map by role."""
    by_role = others if isinstance(others, Mapping) else dict.fromkeys(AgentRole, others)
    made: dict[str, Policy] = {}  # one scripted policy object shared, as the runner does
    chosen: dict[AgentRole, Policy] = {}
    for role, policy in by_role.items():
        if isinstance(policy, str):
            policy = made.setdefault(policy, scripted_policy(policy, scenario))
        chosen[AgentRole(role)] = policy
    return chosen

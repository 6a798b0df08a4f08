"""The solver that plays one ChaosOps episode per sample on chaosops' runtime.

inspect has no turn scheduler: the episode's turns are taken by the runtime
(``arun_episode``), which seats each role, keeps the turn order, enforces each
model seat's deadline with the fallback, and judges every move. Each turn is
a transcript span (``type="turn"``) holding the model call it made and the
move it returned; the episode's results line (what ``results.jsonl`` holds)
goes into the sample's metadata for the scorers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from inspect import isawaitable
from typing import Any

from inspect_ai.log import transcript
from inspect_ai.model import GenerateConfig, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import span

from chaosops.agents.adapters import PolicyMap, TurnTimeoutArg
from chaosops.agents.policies import Policy, policies_for
from chaosops.agents.runner import arun_episode
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.models import AgentRole, ChaosOpsObservation
from chaosops.outputs import result_record, scenario_from_record
from chaosops.outputs.records import action_json
from chaosops.samples import Sample

from .policy import InspectPolicy

__all__ = ["RECORD", "play_incident"]

RECORD = "chaosops"
"""The sample metadata key of the episode's results line."""


def _in_span(policy: Policy, role: AgentRole) -> Policy:
    """``policy`` with each of its turns in a transcript span of its own."""

    async def play(obs: ChaosOpsObservation, seat: AgentRole) -> Any:
        async with span(f"step {obs.step}: {role.value}", type="turn"):
            move = policy(obs, seat)
            if isawaitable(move):
                move = await move
            transcript().info({"role": role.value, "move": action_json(move)}, source="chaosops")
            return move

    return play


def _model_of(role: AgentRole) -> Any:
    """The model of a model seat: ``--model-role ROLE=...``, else the task's model."""
    return get_model(role=role.value, default=get_model())


def _seats(
    models: Sequence[AgentRole], others: Any, scenario: Any, config: GenerateConfig
) -> PolicyMap:
    """Each role's policy: inspect's model for a model seat (``--model-role
    ROLE=...`` over the task's model), the ``others`` for the rest."""
    chosen = policies_for(others, scenario)
    for role in models:
        chosen[role] = InspectPolicy(_model_of(role), config)
    return {role: _in_span(policy, role) for role, policy in chosen.items()}


def _players(models: Sequence[AgentRole], others: Any) -> dict[str, dict[str, Any]]:
    """What played each role, as a results line records it."""
    players = {}
    for role in DEFAULT_TURN_ORDER:
        if role in models:
            players[role.value] = {"policy": "inspect", "model": str(_model_of(role))}
        else:
            other = others.get(role.value, "?") if isinstance(others, Mapping) else others
            players[role.value] = {"policy": other if isinstance(other, str) else repr(other)}
    return players


@solver
def play_incident(
    models: Sequence[str] = ("sre",),
    others: str | Mapping[str, str] = "heuristic",
    turn_timeout: float | None = None,
    max_tokens: int | None = None,
) -> Solver:
    """Play the sample's scenario: ``models`` are the roles inspect's models
    play, ``others`` the scripted policy of the rest (a name, or one by role),
    ``turn_timeout`` each model turn's deadline in seconds (None: none)."""
    seats = [AgentRole(role) for role in models]
    deadline: TurnTimeoutArg = (
        None if turn_timeout is None else {role: float(turn_timeout) for role in seats}
    )
    config = GenerateConfig(max_tokens=max_tokens)

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        scenario = Sample.of(scenario_from_record(state.metadata["scenario"]), state.epoch - 1)
        result = await arun_episode(
            ChaosOpsEnvironment(),
            scenario,
            _seats(seats, others, scenario, config),
            turn_timeout=deadline,
        )
        handle = f"{state.sample_id}#{state.epoch - 1}"
        state.metadata[RECORD] = result_record(
            result, policy="inspect", key=handle, turn_timeout=deadline,
            roles=_players(seats, others),
        )  # fmt: skip
        state.completed = True
        return state

    return solve

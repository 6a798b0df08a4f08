"""The episode: chaosops' runtime takes the turns, verifiers' agents the model seats.

Each model seat opens one interaction with its agent; a turn sends the
seat's view as the user's message and reads the reply with chaosops' judge
(:class:`~chaosops.agents.llm.asking.AskingPolicy`). The runtime keeps the
turn order, the scripted teammates and the per-turn deadline: at the
deadline it cancels the seat's turn and plays the fallback (a noop), and the
episode goes on. The results line is recorded on every seat's trace, with
chaosops' figures as rewards and metrics.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field

from chaosops.agents.llm.asking import AskingPolicy
from chaosops.agents.llm.render import system_prompt
from chaosops.agents.policies import policies_for
from chaosops.agents.runner import arun_episode
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.models import AgentRole
from chaosops.incidents import figures_of
from chaosops.outputs import ResultLine, result_record, scenario_from_record
from chaosops.train.trl import fallback_return, repaid

from .taskset import IncidentTask

__all__ = ["ChaosOpsEnv", "ChaosOpsEnvConfig"]

Role = Literal["sre", "oversight", "dev", "manager"]
_SEAT = {"runtime": {"type": "subprocess"}}  # in process: no sandbox to provision
RECORD = "chaosops"
"""The trace ``info`` key of the episode's results line."""


class ChaosOpsEnvConfig(vf.EnvConfig):
    sre: vf.AgentConfig = vf.AgentConfig(**_SEAT)
    oversight: vf.AgentConfig = vf.AgentConfig(**_SEAT)
    dev: vf.AgentConfig = vf.AgentConfig(**_SEAT)
    manager: vf.AgentConfig = vf.AgentConfig(**_SEAT)
    models: list[Role] = Field(["sre"], min_length=1)
    """The seats the models play; the others are scripted (``others``)."""
    others: Literal["random", "heuristic", "oracle"] = "heuristic"
    """The scripted policy of the seats no model plays."""
    turn_timeout: float | None = Field(None, gt=0)
    """Each model turn's deadline in seconds: a late turn plays a noop, and the episode goes on."""


def _reply(segment: Any, model: str) -> dict[str, Any]:
    """A segment's answer in the chat-completions shape chaosops' reader takes."""
    return {
        "model": model,
        "choices": [{"message": {"content": segment.last_reply}, "finish_reason": "stop"}],
    }


def _seat_task(task: IncidentTask, role: str) -> IncidentTask:
    """The seat's own view of the task: its system prompt, and no opening
    prompt (the runtime's first view of the seat opens the exchange)."""
    return task.with_data(prompt=None, system_prompt=system_prompt(role))


class _Seat:
    """A model seat: its agent's interaction, opened at the seat's first turn
    (a seat the episode never reaches costs verifiers no rollout)."""

    def __init__(self, agent: Any, task: IncidentTask, role: str, stack: AsyncExitStack) -> None:
        self.agent, self.task, self.role, self.stack = agent, task, role, stack
        self.interaction: Any = None

    async def ask(self, messages: list[dict[str, Any]], role: AgentRole) -> dict[str, Any]:
        if self.interaction is None:
            opened = self.agent.interaction(_seat_task(self.task, self.role))
            self.interaction = await self.stack.enter_async_context(opened)
        segment = await self.interaction.turn(messages[-1]["content"])
        return _reply(segment, self.agent.config.model or "?")


class ChaosOpsEnv(vf.Env[ChaosOpsEnvConfig]):
    async def run(self, task: IncidentTask, agents: vf.Agents) -> None:
        config = self.config
        scenario = scenario_from_record(task.data.scenario)
        policies: dict[Any, Any] = dict(policies_for(config.others, scenario))
        deadline = None if config.turn_timeout is None else {
            AgentRole(role): config.turn_timeout for role in config.models
        }  # fmt: skip
        async with AsyncExitStack() as stack:
            seats = [_Seat(getattr(agents, role), task, role, stack) for role in config.models]
            for seat in seats:
                policies[AgentRole(seat.role)] = AskingPolicy(seat.ask, seat.role)
            result = await arun_episode(
                ChaosOpsEnvironment(), scenario, policies, turn_timeout=deadline
            )
        record = result_record(
            result, policy="verifiers", key=str(task.data.id), turn_timeout=deadline,
            roles={role: {"policy": "verifiers" if role in config.models else config.others}
                   for role in (r.value for r in DEFAULT_TURN_ORDER)},
        )  # fmt: skip
        for seat in seats:
            if seat.interaction is not None:
                self._score(seat.interaction.trace, seat.role, record, result, scenario)

    def _score(self, trace: Any, role: str, record: ResultLine, result: Any, scenario: Any) -> None:
        """chaosops' figures on a seat's trace: the team's return as the reward."""
        figures = figures_of(record)
        trace.info[RECORD] = record
        trace.record_reward("team_return", figures["return"], 1.0)
        baseline = fallback_return(self.config.others, scenario, AgentRole(role)) or 0.0
        trace.record_metric("credit", result.cumulative_reward - repaid(result) - baseline)
        trace.record_metric("resolved", float(record["resolved"]))
        trace.record_metric("mttr", figures["mttr"])
        trace.record_metric("wrong_fixes", figures["wrong_fixes"])
        trace.record_metric("legal", figures[f"legal_{role}"])

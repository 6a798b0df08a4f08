"""A policy over any chat model a harness lends: each turn sends the messages
``chaosops run --policy llm`` sends and reads the answer with the LLM
policy's own reader and judge.

A harness (inspect_ai, verifiers) supplies ``ask(messages, role)``, which
returns the answer in the chat-completions shape (``choices[0].message``,
``finish_reason``, ``usage``, ``model``). An answer that is no legal move of
the view plays a noop and records its ``parse_error``; the runtime cancels
``ask`` at the turn's deadline and plays the fallback.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from chaosops.agents.llm.completion import annotate, interpret, turn_or_none
from chaosops.agents.llm.render import build_messages
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation

__all__ = ["Ask", "AskingPolicy"]

Ask = Callable[[list[dict[str, Any]], AgentRole], Awaitable[dict[str, Any]]]
"""``ask(messages, role)``: one chat completion, in the chat-completions shape."""


class AskingPolicy:
    """An async policy ``(obs, role) -> ChaosOpsAction`` over ``ask``.

    Each turn is annotated as an LLM turn is: ``prompt``, ``completion``,
    ``usage``, ``model``, ``finish_reason``, ``latency_ms``.
    """

    def __init__(self, ask: Ask, name: str) -> None:
        self.ask = ask
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def __call__(self, obs: ChaosOpsObservation, role: AgentRole | str) -> ChaosOpsAction:
        role = AgentRole(getattr(role, "value", role))
        messages = build_messages(obs, role)
        turn = turn_or_none()
        annotate(turn, prompt=messages)  # kept even if the turn times out
        started = time.perf_counter()
        completion = await self.ask(messages, role)
        info: dict[str, Any] = {"latency_ms": round((time.perf_counter() - started) * 1e3, 3)}
        action = interpret(completion, obs, role, info)
        annotate(turn, **info)
        return action

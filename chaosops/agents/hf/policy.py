"""A policy played by a transformers model in this process, batched across episodes.

Each turn renders the view as the LLM policy does (:mod:`chaosops.agents.llm.render`),
offers the turn's ``take_action`` tool (:mod:`chaosops.agents.llm.moves`) when
the answer format is ``tools``, and reads the generation through the LLM
policy's own reading of a completion (:mod:`chaosops.agents.llm.completion`).
Generation runs on the :class:`~chaosops.agents.hf.batcher.Batcher`'s thread:
the event loop never blocks, and the turns pending across episodes share one
``generate`` call. A turn cut at its deadline stops waiting; its answer, when
it comes, is thrown away.
"""

from __future__ import annotations

import json
import time
from typing import Any

from chaosops.agents.conversation import action_call, tool_schemas
from chaosops.agents.llm.completion import annotate, interpret, turn_or_none
from chaosops.agents.llm.moves import moves_for
from chaosops.agents.llm.parse import TOOL_NAME, text_tool_calls
from chaosops.agents.llm.render import build_messages, fold_system_prompt
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation

from .batcher import Batcher
from .chat import TokenChat
from .local import Generation, LocalModel, Prompt
from .settings import HFSettings

__all__ = ["EpisodeChat", "HFGenerateError", "HFPolicy"]


class HFGenerateError(RuntimeError):
    """A batch's ``generate`` failed (out of memory, say): the turn plays the fallback."""


class HFPolicy:
    """An async policy ``(obs, role) -> ChaosOpsAction`` answered by a local model.

    Build it with :meth:`load` (a checkpoint, as ``--policy hf`` does) or
    :meth:`from_model` (a model in memory, as :class:`chaosops.train.EvalCallback`
    does). ``batch_sizes`` counts the ``generate`` calls by batch size;
    ``failures_in_a_row`` and ``last_failure`` say as the LLM policy's do
    whether generation keeps failing (the run's ``--model-max-failures``).
    """

    calls = "generate calls"  # what the run's stop line says failed

    def __init__(self, local: LocalModel) -> None:
        self.local = local
        s = local.settings
        self._batcher: Batcher[Prompt, Generation] = Batcher(
            local.generate, max_batch=s.batch, wait_s=s.batch_wait_ms / 1000.0,
            name=f"chaosops-hf-{s.model}",
        )  # fmt: skip
        self.failures_in_a_row = 0
        self.last_failure: str | None = None

    @classmethod
    def load(cls, settings: HFSettings) -> HFPolicy:
        """The policy of the checkpoint ``settings.model`` (:class:`HFModelError` if unplayable)."""
        return cls(LocalModel.load(settings))

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, **settings: Any) -> HFPolicy:
        """The policy of a model and tokenizer in memory; ``settings`` as
        :class:`HFSettings` takes them (``model`` defaults to the model's name)."""
        settings.setdefault("model", getattr(model, "name_or_path", "") or "in-memory")
        return cls(LocalModel(model, tokenizer, HFSettings(**settings)))

    @property
    def settings(self) -> HFSettings:
        return self.local.settings

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def batch_sizes(self) -> dict[int, int]:
        return dict(self._batcher.sizes)

    def __repr__(self) -> str:
        s = self.settings
        return f"HFPolicy(model={s.model!r}, device={s.resolved_device!r}, batch={s.batch})"

    def notes(self) -> list[str]:
        """The run's closing note of this model: how its turns were batched."""
        sizes = self.batch_sizes
        if not sizes:
            return []
        shown = ", ".join(f"{n} x {size}" for size, n in sorted(sizes.items()))
        return [
            f"{self.model}: {sum(s * n for s, n in sizes.items())} turn(s) in "
            f"{sum(sizes.values())} generate call(s) (calls x batch size: {shown})"
        ]

    def for_episode(self) -> HFPolicy | EpisodeChat:
        """Itself, or with conversation ``episode`` a chat per role of one episode."""
        return EpisodeChat(self) if self.settings.conversation == "episode" else self

    async def aclose(self) -> None:
        """Nothing per event loop: the model stays loaded for the next run."""

    def close(self) -> None:
        """Stop the generation thread."""
        self._batcher.close()

    async def __call__(self, obs: ChaosOpsObservation, role: AgentRole | str) -> ChaosOpsAction:
        role = AgentRole(getattr(role, "value", role))
        messages = build_messages(obs, role)
        if self.settings.system_prompt == "user":
            messages = fold_system_prompt(messages)
        tools = self.settings.answer_format == "tools"
        tool = moves_for(obs, role).tool if tools else None
        turn = turn_or_none()
        annotate(turn, prompt=messages)
        prompt = self.local.prompt(messages, [tool] if tool is not None else None)
        answer, info = await self.generate(prompt)
        action = interpret(_completion(answer, self.settings.model, tools), obs, role, info)
        annotate(turn, **info)
        return action

    async def generate(self, prompt: Prompt) -> tuple[Generation, dict[str, Any]]:
        """The model's answer to ``prompt`` (batched with other turns'), and
        its latency as a turn's info."""
        started = time.perf_counter()
        try:
            answer = await self._batcher.submit(prompt)
        except Exception as exc:
            self.failures_in_a_row += 1
            self.last_failure = f"generate failed: {type(exc).__name__}: {exc}"[:300]
            raise HFGenerateError(self.last_failure) from exc
        self.failures_in_a_row = 0
        return answer, {"latency_ms": round((time.perf_counter() - started) * 1e3, 3)}


class EpisodeChat:
    """An :class:`HFPolicy` playing one episode in the trainer's format: each
    role's turns are one chat of tool calls, kept as the model's tokens
    (:class:`~chaosops.agents.hf.chat.TokenChat`, in :attr:`chats`), the
    answer read as a call of one of the tools and judged as any answer is."""

    def __init__(self, policy: HFPolicy) -> None:
        self.policy = policy
        self.chats: dict[AgentRole, TokenChat] = {}

    def __getattr__(self, name: str) -> Any:  # the policy's figures and settings
        return getattr(self.policy, name)

    async def __call__(self, obs: ChaosOpsObservation, role: AgentRole | str) -> ChaosOpsAction:
        role = AgentRole(getattr(role, "value", role))
        chat = self.chats.get(role)
        if chat is None:
            chat = self.chats[role] = TokenChat(self.policy.local, role, tool_schemas())
        prompt = chat.prompt(obs)
        turn = turn_or_none()
        annotate(turn, prompt=list(chat.messages))
        answer, info = await self.policy.generate(prompt)
        action = interpret(_move_completion(answer, self.policy.model), obs, role, info)
        chat.answered(answer, action, refused=info.get("parse_error"))
        annotate(turn, **info)
        return action


def _move_completion(answer: Generation, model: str) -> dict[str, Any]:
    """A generation calling one of the move tools, as the runtime's
    ``take_action`` completion its judge reads."""
    completion = _completion(answer, model, tools=True)
    message = completion["choices"][0]["message"]
    if message["tool_calls"]:
        message["tool_calls"] = [
            {"type": "function", "function": {
                "name": TOOL_NAME,
                "arguments": action_call(call["function"]["name"], _arguments(call)),
            }}
            for call in message["tool_calls"]
        ]  # fmt: skip
    return completion


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call["function"]["arguments"]
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def _completion(answer: Generation, model: str, tools: bool) -> dict[str, Any]:
    """A generation as a chat completion, as a server would have sent it."""
    calls = text_tool_calls(answer.text) if tools else []
    message = {"content": None if calls else answer.text, "tool_calls": calls or None}
    return {
        "model": model,
        "choices": [{"message": message, "finish_reason": "length" if answer.cut else "stop"}],
        "usage": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        },
    }

"""A ChaosOps policy that asks an inspect_ai model.

Each turn sends the role's system prompt and rendered view (the messages
``chaosops run --policy llm`` sends), and reads the answer with the LLM
policy's own reader and judge: an answer that is no legal move of the view
plays a noop and records its ``parse_error``. The runtime cancels the call at
the turn's deadline, which cancels inspect's ``generate`` and plays the fallback.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
)

from chaosops.agents.llm.asking import AskingPolicy
from chaosops.env.models import AgentRole

__all__ = ["InspectPolicy", "as_completion"]

_FINISH = MappingProxyType(
    {"max_tokens": "length", "model_length": "length", "tool_calls": "tool_calls"}
)


def as_completion(output: ModelOutput) -> dict[str, Any]:
    """inspect's ``ModelOutput`` in the chat-completions shape the LLM policy's
    reader takes (text, finish reason, usage, the model that answered)."""
    usage = output.usage
    return {
        "model": output.model,
        "choices": [
            {
                "message": {"content": output.completion},
                "finish_reason": _FINISH.get(str(output.stop_reason), "stop"),
            }
        ],
        "usage": None
        if usage is None
        else {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        },
    }


def _chat(messages: list[dict[str, Any]]) -> list[ChatMessage]:
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


class InspectPolicy(AskingPolicy):
    """An async policy ``(obs, role) -> ChaosOpsAction`` over an inspect ``Model``.

    ``config`` is sent with every call (e.g. ``GenerateConfig(max_tokens=256)``).
    """

    def __init__(self, model: Model, config: GenerateConfig | None = None) -> None:
        self.model = model
        self.config = config or GenerateConfig()
        super().__init__(self._generate, str(model))

    def __repr__(self) -> str:
        return f"InspectPolicy(model={str(self.model)!r})"

    async def _generate(self, messages: list[dict[str, Any]], role: AgentRole) -> dict[str, Any]:
        return as_completion(await self.model.generate(_chat(messages), config=self.config))

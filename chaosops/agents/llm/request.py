"""The body of one chat-completions request, in each answer format."""

from __future__ import annotations

from typing import Any

from chaosops.agents.llm.moves import Moves
from chaosops.agents.llm.parse import TOOL_NAME
from chaosops.agents.llm.settings import LLMSettings

__all__ = ["request_params"]


def request_params(
    settings: LLMSettings, answer: str, messages: list[dict[str, Any]], moves: Moves
) -> dict[str, Any]:
    """The request for ``messages``, asking for an answer in the format ``answer``
    (``json``, ``json_object``, ``tools`` or ``text``) constrained to ``moves``."""
    s = settings
    params: dict[str, Any] = {
        "model": s.model,
        "messages": messages,
        "temperature": s.temperature,
        "max_tokens": s.max_tokens,
    }
    if s.top_p is not None:
        params["top_p"] = s.top_p
    if s.seed is not None:
        params["seed"] = s.seed
    if answer == "tools" or s.use_tools:
        params["tools"] = [moves.tool]
        # the tools format names the tool; use_tools keeps its own tool_choice
        named = {"type": "function", "function": {"name": TOOL_NAME}}
        params["tool_choice"] = named if answer == "tools" else s.tool_choice
    elif answer == "json":
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "action", "schema": moves.schema, "strict": False},
        }
    elif answer == "json_object":
        params["response_format"] = {"type": "json_object", "schema": moves.schema}
    if s.logprobs:
        params["logprobs"] = True
        if s.top_logprobs is not None:
            params["top_logprobs"] = s.top_logprobs
    if s.extra_body:
        params.update(s.extra_body)
    return params

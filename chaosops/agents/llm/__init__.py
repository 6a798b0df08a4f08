"""LLM policies over any OpenAI-compatible chat-completions endpoint.

``LLMPolicy`` is an async policy ``(obs, role) -> ChaosOpsAction``;
``check_endpoint`` checks an endpoint and a model before a batch starts, and
``LLMPolicy.negotiate`` the answer format it takes (:mod:`.negotiate`).
Prompts are rendered by :mod:`.render`, each turn's legal moves (schema, tool,
answer format) built by :mod:`.moves`, and answers parsed by :mod:`.parse`.
"""

from __future__ import annotations

from importlib import import_module
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from chaosops.agents.llm.errors import (
    AnswerRefused,
    LLMDeadlineError,
    LLMEndpointError,
    LLMRejectedError,
    LLMRequestError,
)
from chaosops.agents.llm.moves import Moves, moves_for
from chaosops.agents.llm.parse import ACTION_SCHEMA, ACTION_TOOL, parse_action
from chaosops.agents.llm.render import (
    build_messages,
    read_rendered,
    render_observation,
    system_prompt,
)
from chaosops.agents.llm.settings import LLMSettings

if TYPE_CHECKING:
    from chaosops.agents.llm.http import check_endpoint
    from chaosops.agents.llm.negotiate import Negotiation
    from chaosops.agents.llm.policy import LLMPolicy

# The HTTP side loads with the first of its names asked for: aiohttp and what it
# brings cost a scripted run, which only renders prompts, a fifth of a second.
_HTTP_SIDE = MappingProxyType(
    {"LLMPolicy": "policy", "Negotiation": "negotiate", "check_endpoint": "http"}
)


def __getattr__(name: str) -> Any:
    module = _HTTP_SIDE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:  # a notebook's completion lists the lazy names too
    return sorted({*globals(), *_HTTP_SIDE})


__all__ = [
    "ACTION_SCHEMA",
    "ACTION_TOOL",
    "AnswerRefused",
    "LLMDeadlineError",
    "LLMEndpointError",
    "LLMPolicy",
    "LLMRejectedError",
    "LLMRequestError",
    "LLMSettings",
    "Moves",
    "Negotiation",
    "build_messages",
    "check_endpoint",
    "moves_for",
    "parse_action",
    "read_rendered",
    "render_observation",
    "system_prompt",
]

"""LLM policies over any OpenAI-compatible chat-completions endpoint.

``LLMPolicy`` is an async policy ``(obs, role) -> ChaosOpsAction``;
``check_endpoint`` checks an endpoint and a model before a batch starts, and
``LLMPolicy.negotiate`` the answer format it takes (:mod:`.negotiate`).
Prompts are rendered by :mod:`.render`, each turn's legal moves (schema, tool,
answer format) built by :mod:`.moves`, and answers parsed by :mod:`.parse`.
"""

from __future__ import annotations

from chaosops.agents.llm.http import (
    LLMDeadlineError,
    LLMEndpointError,
    LLMRejectedError,
    LLMRequestError,
    check_endpoint,
)
from chaosops.agents.llm.moves import Moves, moves_for
from chaosops.agents.llm.negotiate import AnswerRefused, Negotiation
from chaosops.agents.llm.parse import ACTION_SCHEMA, ACTION_TOOL, parse_action
from chaosops.agents.llm.policy import LLMPolicy
from chaosops.agents.llm.render import (
    build_messages,
    read_rendered,
    render_observation,
    system_prompt,
)
from chaosops.agents.llm.settings import LLMSettings

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

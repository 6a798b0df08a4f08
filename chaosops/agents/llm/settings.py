"""The LLM policy's settings, in one frozen dataclass."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Answer = Literal["auto", "json", "json_object", "tools", "text"]
ANSWERS: tuple[str, ...] = ("auto", "json", "json_object", "tools", "text")
"""How the model is asked to answer: structured output with the turn's JSON
schema of legal moves, as ``response_format`` of type ``json_schema`` (OpenAI,
vLLM, llama.cpp's own server, Ollama) or ``json_object`` with a ``schema``
(llama-cpp-python's server); a call of the ``take_action`` tool with that
schema; free text parsed tolerantly; or ``auto``: the first of those, in that
order, that the endpoint accepts (see :mod:`chaosops.agents.llm.negotiate`)."""

STRONGEST_FIRST: tuple[str, ...] = ("json", "json_object", "tools", "text")
"""The concrete answer formats, the most constrained first."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The endpoint when neither ``base_url`` nor ``$OPENAI_BASE_URL`` names one."""

MAX_IN_FLIGHT = 100_000
"""The most requests in flight one policy allows (far above any server's)."""

OWN_REQUEST_FIELDS = frozenset(("model", "messages", "stream", "n"))
"""Request fields the policy sets itself: ``extra_body`` may not name them."""


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """How :class:`~chaosops.agents.llm.LLMPolicy` talks to its endpoint.

    ``base_url`` and ``api_key`` default to ``$OPENAI_BASE_URL`` and
    ``$OPENAI_API_KEY`` (or the environment variable ``api_key_env`` names).
    ``max_in_flight`` bounds the requests in flight across every episode;
    ``retries``, ``backoff_base`` and ``backoff_max`` shape the retries of rate
    limits, server errors and dropped connections, none of which outlasts the
    turn's deadline; ``request_timeout`` bounds one request when the turn has
    no deadline. ``answer`` is how the model is asked to answer
    (:data:`ANSWERS`; ``use_tools`` means ``answer="tools"``), and
    ``negotiated`` the format ``auto`` settled on for this endpoint; ``history``
    sends each role its own last N turns of the episode as earlier messages
    (0: none); ``system_prompt="user"`` folds the role prompt into the first
    user message, for models whose chat template has no system role.
    ``max_answer_bytes`` bounds the body read per answer (1 MiB): past it the
    call fails and the turn plays the fallback. ``max_in_flight`` is at most
    :data:`MAX_IN_FLIGHT`.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str | None = None
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 256
    seed: int | None = None
    max_in_flight: int = 64
    retries: int = 4
    request_timeout: float = 60.0
    backoff_base: float = 0.2
    backoff_max: float = 8.0
    use_tools: bool = False
    answer: Answer = "auto"
    negotiated: str | None = None
    history: int = 0
    system_prompt: Literal["system", "user"] = "system"
    max_answer_bytes: int = 1 << 20
    tool_choice: str | Mapping[str, Any] = "auto"
    logprobs: bool = False
    top_logprobs: int | None = None
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.max_in_flight <= MAX_IN_FLIGHT:
            raise ValueError(
                f"max_in_flight must be from 1 to {MAX_IN_FLIGHT}, got {self.max_in_flight}"
            )
        if self.max_answer_bytes < 1:
            raise ValueError(f"max_answer_bytes must be >= 1, got {self.max_answer_bytes}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.answer not in ANSWERS:
            raise ValueError(f"answer must be one of {', '.join(ANSWERS)}, got {self.answer!r}")
        if self.negotiated is not None and self.negotiated not in STRONGEST_FIRST:
            raise ValueError(
                f"negotiated must be one of {', '.join(STRONGEST_FIRST)}, got {self.negotiated!r}"
            )
        if self.system_prompt not in ("system", "user"):
            raise ValueError(f"system_prompt must be system or user, got {self.system_prompt!r}")
        if self.history < 0:
            raise ValueError(f"history must be >= 0, got {self.history}")
        if self.extra_body and (taken := sorted(OWN_REQUEST_FIELDS & set(self.extra_body))):
            raise ValueError(
                f"extra_body cannot set {', '.join(map(repr, taken))}: the policy sets "
                "them itself (the prompt it records is the one it sends, and it reads "
                "one whole answer)"
            )

    @property
    def endpoint(self) -> str:
        """The base URL in use: ``base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's."""
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL

    @property
    def answer_format(self) -> str | None:
        """The concrete format asked for: ``answer``, or for ``auto`` the one
        negotiated (None until then)."""
        return self.negotiated if self.answer == "auto" else self.answer

    @property
    def key(self) -> str | None:
        """The API key in use: ``api_key``, else the variable ``api_key_env``
        names, else ``$OPENAI_API_KEY``, else None."""
        return self.api_key or os.environ.get(self.api_key_env or "OPENAI_API_KEY") or None

"""The LLM policy's settings, in one frozen, validated dataclass: each
field's type, bounds and default are declared here once; the command's flags
and a run file's ``[llm.NAME]`` tables are read through these fields."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, ConfigDict, Field
from pydantic.dataclasses import dataclass

Answer = Literal["auto", "json", "json_object", "tools", "text"]
ANSWERS: tuple[str, ...] = get_args(Answer)
"""How the model is asked to answer: structured output with the turn's JSON
schema of legal moves, as ``response_format`` of type ``json_schema`` (OpenAI,
vLLM, llama.cpp's own server, Ollama) or ``json_object`` with a ``schema``
(llama-cpp-python's server); a call of the ``take_action`` tool with that
schema; free text parsed tolerantly; or ``auto``: the first of those, in that
order, that the endpoint accepts (see :mod:`chaosops.agents.llm.negotiate`)."""

AnswerFormat = Literal["json", "json_object", "tools", "text"]
STRONGEST_FIRST: tuple[str, ...] = get_args(AnswerFormat)
"""The concrete answer formats, the most constrained first."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The endpoint when neither ``base_url`` nor ``$OPENAI_BASE_URL`` names one."""

MAX_IN_FLIGHT = 100_000
"""The most requests in flight one policy allows (far above any server's)."""

OWN_REQUEST_FIELDS = frozenset(("model", "messages", "stream", "n"))
"""Request fields the policy sets itself: ``extra_body`` may not name them."""


def _no_own_fields(body: Mapping[str, Any]) -> Mapping[str, Any]:
    if body and (taken := sorted(OWN_REQUEST_FIELDS & set(body))):
        raise ValueError(
            f"extra_body cannot set {', '.join(map(repr, taken))}: the policy sets "
            "them itself (the prompt it records is the one it sends, and it reads "
            "one whole answer)"
        )
    return body


def _between(low: float, high: float | None = None) -> Any:
    return Field(ge=low, le=high, allow_inf_nan=False)


Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
ExtraBody = Annotated[
    Mapping[str, Any],
    AfterValidator(_no_own_fields),
    Field(
        description="a JSON object such as '{\"return_token_ids\": true}', without "
        "model, messages, stream or n (the policy sets these itself)"
    ),
]
"""A positive, finite number of seconds."""


@dataclass(frozen=True, slots=True, config=ConfigDict(arbitrary_types_allowed=True))
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
    call fails and the turn plays the fallback. A value out of its bounds is a
    ``ValueError`` (pydantic's ``ValidationError``) naming the field.
    """

    model: Annotated[str, Field(min_length=1)]
    base_url: Annotated[str, Field(min_length=1)] | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: Annotated[str, Field(min_length=1)] | None = None
    temperature: Annotated[float, _between(0.0, 2.0)] = 0.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] | None = None
    max_tokens: Annotated[int, _between(1, 1_000_000)] = 256
    seed: int | None = None
    max_in_flight: Annotated[int, _between(1, MAX_IN_FLIGHT)] = 64
    retries: Annotated[int, _between(0, 100)] = 4
    request_timeout: Seconds = 60.0
    backoff_base: Seconds = 0.2
    backoff_max: Seconds = 8.0
    use_tools: bool = False
    answer: Answer = "auto"
    negotiated: AnswerFormat | None = None
    history: Annotated[int, _between(0, 1000)] = 0
    system_prompt: Literal["system", "user"] = "system"
    max_answer_bytes: Annotated[int, _between(1024, 1 << 30)] = 1 << 20
    tool_choice: str | Mapping[str, Any] = "auto"
    logprobs: bool = False
    top_logprobs: Annotated[int, _between(0, 20)] | None = None
    extra_body: ExtraBody | None = None

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

"""An LLM policy over any OpenAI-compatible chat-completions endpoint.

The policy renders the observation (:mod:`.render`), asks the model through
its :class:`~chaosops.agents.llm.http.ChatClient` under the turn's deadline
(``actors.current_turn().deadline``), and parses the answer (:mod:`.parse`).
When the runtime cancels the turn at its deadline the request in flight is
cancelled with it (the connection is closed).

The API key is held privately: it is not part of the policy's ``repr``, never
logged, never annotated into a turn, and scrubbed from error messages.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, cast

import anyio

from actors import get_logger
from chaosops._urls import http_url_with_host, shown_url
from chaosops.agents.llm.completion import annotate as _annotate
from chaosops.agents.llm.completion import interpret
from chaosops.agents.llm.completion import turn_or_none as _current_turn  # a test's hook
from chaosops.agents.llm.http import (
    ChatClient,
    LLMDeadlineError,
    LLMEndpointError,
    LLMRejectedError,
    LLMRequestError,
    NotSent,
    check_endpoint,
    retry_after_seconds,
    warm_up,
)
from chaosops.agents.llm.moves import Moves, moves_for
from chaosops.agents.llm.negotiate import AnswerRefused, Negotiation, negotiate
from chaosops.agents.llm.render import build_messages, fold_system_prompt
from chaosops.agents.llm.request import request_params
from chaosops.agents.llm.settings import (
    DEFAULT_BASE_URL,
    OWN_REQUEST_FIELDS,
    STRONGEST_FIRST,
    AnswerFormat,
    LLMSettings,
)
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation

__all__ = [
    "DEFAULT_BASE_URL",
    "OWN_REQUEST_FIELDS",
    "AnswerRefused",
    "EpisodeMemory",
    "LLMDeadlineError",
    "LLMEndpointError",
    "LLMPolicy",
    "LLMRequestError",
    "LLMSettings",
    "Negotiation",
    "check_endpoint",
    "retry_after_seconds",
]


class LLMPolicy:
    """An async policy ``(obs, role) -> ChaosOpsAction`` asking a chat-completions model.

    Args:
        model: the served model name.
        base_url: endpoint root, e.g. ``http://127.0.0.1:8000/v1``; default from
            ``OPENAI_BASE_URL``, else OpenAI's.
        api_key: default from ``OPENAI_API_KEY``; local servers need none.
        temperature, top_p, max_tokens, seed: sampling parameters sent with each request.
        max_in_flight: requests this policy keeps in flight at once, whatever the
            number of concurrent episodes (an ``anyio.CapacityLimiter``).
        retries: retries after the first attempt, on 429 (``Retry-After`` honoured),
            5xx, timeouts and dropped connections; other errors are not retried.
        request_timeout: bound on one attempt when the turn has no deadline.
        backoff_base, backoff_max: exponential backoff with jitter, in seconds.
        answer: ``"auto"`` (default: the strongest format the endpoint accepts,
            found by :meth:`negotiate`), ``"json"`` or ``"json_object"``
            (structured output with the turn's schema of legal moves as
            ``response_format``), ``"tools"`` (the ``take_action`` tool with that
            schema, named in ``tool_choice``) or ``"text"`` (parsed tolerantly).
        use_tools: offer the action schema as the ``take_action`` tool.
        tool_choice: sent with the tool of ``use_tools`` (``"auto"``, ``"required"``
            or a named choice).
        history: with N > 0, :meth:`for_episode` gives each episode a memory that
            sends every role its own last N turns as earlier messages.
        logprobs, top_logprobs: ask for token logprobs (stored with the turn).
        extra_body: extra request fields, e.g. vLLM's ``{"return_tokens_as_token_ids": True}``.

    A failed call (retries spent, deadline reached, 4xx) raises
    :class:`LLMRequestError`; the runtime then applies the fallback action and
    records the error. An answer that does not parse gives a noop, a
    ``parse_error`` log event and a ``parse_error`` annotation of the turn. Each
    call annotates the turn with ``prompt``, ``completion``, ``latency_ms``,
    ``usage``, ``attempts`` and, when returned, ``model``, ``finish_reason``,
    ``token_ids`` and ``logprobs``.

    ``failures_in_a_row`` counts the calls that failed for good since the last
    answer (any answer resets it), and ``last_failure`` says why the latest one
    did: a caller can stop a batch whose endpoint went away (the CLI's
    ``--model-max-failures``) instead of playing every turn as a fallback.
    """

    calls = "LLM calls"  # what the run's stop line says failed

    def __init__(self, model: str, **settings: Any) -> None:
        checked = LLMSettings(model=model, **settings)
        if not http_url_with_host(checked.endpoint):  # else every turn fails, later
            raise ValueError(
                f"base_url {shown_url(checked.endpoint)!r}: an http(s) URL with a host, "
                "e.g. http://127.0.0.1:8000/v1"
            )
        self._client = ChatClient(checked)
        self.failures_in_a_row = 0
        self.last_failure: str | None = None
        self.answers_without_logprobs = 0  # asked for, and the server sent none
        warm_up()

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> LLMPolicy:
        """The policy for ``settings`` (see :class:`LLMSettings`)."""
        fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
        return cls(**fields)

    @property
    def settings(self) -> LLMSettings:
        """The policy's settings; assign new ones (``dataclasses.replace``) to change them."""
        return self._client.settings

    @settings.setter
    def settings(self, settings: LLMSettings) -> None:
        self._client.settings = settings

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def base_url(self) -> str:
        return self.settings.endpoint

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"LLMPolicy(model={s.model!r}, base_url={shown_url(s.endpoint)!r}, "
            f"max_in_flight={s.max_in_flight}, retries={s.retries}, answer={s.answer!r})"
        )

    def notes(self) -> list[str]:
        """The run's closing note of this model: answers without the logprobs asked for."""
        if not self.answers_without_logprobs:
            return []
        return [
            f"{self.answers_without_logprobs} answer(s) of {self.model} came without "
            "the logprobs asked for: the server returned none"
        ]

    async def aclose(self) -> None:
        """Close the HTTP clients of the current event loop (a later call opens others)."""
        await self._client.aclose()

    async def __aenter__(self) -> LLMPolicy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def negotiate(self, seconds: float | None = None) -> Negotiation:
        """Settle the answer format with the endpoint by probing it (see
        :mod:`.negotiate`), each probe bounded by ``seconds`` (default: the
        request timeout): for ``auto`` the strongest it accepts, kept in
        ``settings.negotiated``; a format named outright is checked, and
        :class:`AnswerRefused` raised when the server refuses it.

        Without this call, ``auto`` settles on the first turns instead: each
        asks in the strongest format not yet refused, and steps down at once
        when the server refuses the request as malformed."""
        negotiation = await negotiate(self._client, get_logger(), seconds)
        if self.settings.answer == "auto" and negotiation.answer is not None:
            self.settings = dataclasses.replace(
                self.settings, negotiated=cast(AnswerFormat, negotiation.answer)
            )
        return negotiation

    async def _complete(
        self, messages: list[dict[str, Any]], moves: Moves, deadline: float | None
    ) -> tuple[dict[str, Any], int]:
        """The completion for ``messages``, in the settled answer format or, for
        an ``auto`` not yet settled, the strongest one the server takes."""
        settings = self.settings
        answer = settings.answer_format or STRONGEST_FIRST[0]
        while True:
            params = request_params(settings, answer, messages, moves)
            try:
                completion = await self._client.complete(params, deadline, get_logger())
            except LLMRejectedError:
                if settings.answer != "auto" or settings.negotiated is not None:
                    raise
                answer = STRONGEST_FIRST[STRONGEST_FIRST.index(answer) + 1]
                continue
            if settings.answer == "auto" and self.settings.negotiated is None:
                self.settings = dataclasses.replace(
                    self.settings, negotiated=cast(AnswerFormat, answer)
                )
            return completion

    # -- the policy -----------------------------------------------------------

    async def __call__(self, obs: ChaosOpsObservation, role: AgentRole | str) -> ChaosOpsAction:
        """Ask the model for this role's action on ``obs``."""
        action, _ = await self.ask(obs, role)
        return action

    def for_episode(self) -> LLMPolicy | EpisodeMemory:
        """The policy one episode plays: this one, or with ``history`` a
        :class:`EpisodeMemory` of its own (each role's last turns of that episode)."""
        return EpisodeMemory(self) if self.settings.history > 0 else self

    async def ask(
        self,
        obs: ChaosOpsObservation,
        role: AgentRole | str,
        earlier: Sequence[Mapping[str, Any]] = (),
    ) -> tuple[ChaosOpsAction, list[dict[str, Any]]]:
        """The action for ``obs``, and this turn as two messages for a later
        turn's history: what the role saw, what the model answered. ``earlier``
        (such messages) goes between the system prompt and the view."""
        role = AgentRole(getattr(role, "value", role))
        messages = build_messages(obs, role)
        if earlier:
            messages[1:1] = [dict(m) for m in earlier]
        if self.settings.system_prompt == "user":
            messages = fold_system_prompt(messages)
        turn = _current_turn()
        deadline = getattr(turn, "deadline", None)
        _annotate(turn, prompt=messages)  # kept even if the turn times out
        started = time.perf_counter()  # not the loop clock: uvloop's counts whole ms
        try:
            completion, attempts = await self._complete(messages, moves_for(obs, role), deadline)
        except NotSent:
            late = "turn deadline passed before the request"
            raise self._client.error(late, LLMDeadlineError) from None
        except LLMRequestError as exc:
            self._failed(str(exc))
            raise
        except anyio.get_cancelled_exc_class():
            if deadline is not None and anyio.current_time() >= deadline:
                # a server that never answers in time fails like one that errs
                self._failed(str(self._client.error("no answer within the turn's deadline")))
            raise
        self.failures_in_a_row = 0
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        info: dict[str, Any] = {"latency_ms": latency_ms, "attempts": attempts}
        action = self._interpret(completion, obs, role, info)
        _annotate(turn, **info)
        answered = [messages[-1], {"role": "assistant", "content": info["completion"] or ""}]
        return action, answered

    def _failed(self, why: str) -> None:
        self.failures_in_a_row += 1
        self.last_failure = why

    def _interpret(
        self, completion: Any, obs: ChaosOpsObservation, role: AgentRole, info: dict[str, Any]
    ) -> ChaosOpsAction:
        action = interpret(completion, obs, role, info, self._client.key)
        if self.settings.logprobs and "logprobs" not in info:
            self.answers_without_logprobs += 1
        return action


class EpisodeMemory:
    """One episode's turns of an :class:`LLMPolicy` with ``history = N``: each
    role is sent its own last N answered turns (the view it saw, the raw answer)
    as earlier messages. Made per episode by :meth:`LLMPolicy.for_episode`; a
    turn that timed out or failed left no answer and is not remembered."""

    def __init__(self, policy: LLMPolicy) -> None:
        self.policy = policy
        self._turns: dict[AgentRole, deque[list[dict[str, Any]]]] = {}

    async def aclose(self) -> None:
        """Close the policy's HTTP clients of the current event loop."""
        await self.policy.aclose()

    async def __call__(self, obs: ChaosOpsObservation, role: AgentRole | str) -> ChaosOpsAction:
        role = AgentRole(getattr(role, "value", role))
        past = self._turns.setdefault(role, deque(maxlen=self.policy.settings.history))
        earlier = [message for turn in past for message in turn]
        action, answered = await self.policy.ask(obs, role, earlier)
        past.append(answered)  # not reached when the call failed or was cut at the deadline
        return action

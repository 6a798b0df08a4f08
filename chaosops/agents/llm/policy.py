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
import orjson

from actors import current_turn, get_logger, json_safe
from chaosops._urls import shown_url
from chaosops.agents.llm.http import (
    ChatClient,
    LLMDeadlineError,
    LLMEndpointError,
    LLMRejectedError,
    LLMRequestError,
    NotSent,
    check_endpoint,
    redact,
    retry_after_seconds,
    warm_up,
)
from chaosops.agents.llm.moves import Moves, moves_for
from chaosops.agents.llm.negotiate import AnswerRefused, Negotiation, negotiate
from chaosops.agents.llm.parse import parse_action, tool_call_parts
from chaosops.agents.llm.render import build_messages, fold_system_prompt
from chaosops.agents.llm.request import request_params
from chaosops.agents.llm.settings import (
    DEFAULT_BASE_URL,
    OWN_REQUEST_FIELDS,
    STRONGEST_FIRST,
    AnswerFormat,
    LLMSettings,
)
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.rules import view_problem

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

_RAW_LOG_CHARS = 500


def _current_turn() -> Any | None:
    """The runtime's turn context, or None outside a turn."""
    try:
        return current_turn()
    except (LookupError, RuntimeError):
        return None


def _annotate(turn: Any | None, **fields: Any) -> None:
    if turn is not None and hasattr(turn, "annotate"):
        turn.annotate(**fields)


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
    ``--llm-max-failures``) instead of playing every turn as a fallback.
    """

    def __init__(self, model: str, **settings: Any) -> None:
        self._client = ChatClient(LLMSettings(model=model, **settings))
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
        """The action an answer gives for this role's view, recording what the
        answer held in ``info``; noop with ``parse_error`` when it gives none."""
        try:
            text, tool_calls, answer, content_error = _read_answer(completion)
            info.update(_redacted(answer, self._client.key))
            action, error = parse_action(text, role, tool_calls)
        except Exception as exc:  # a body of a shape no server should send: costs the turn
            info.setdefault("completion", None)
            shape = f"{type(exc).__name__}: {exc}"
            action, error = None, f"the answer has an unexpected shape ({shape})"
            text, tool_calls, content_error = None, [], None
        if action is None and error == "empty answer" and content_error is not None:
            error = content_error
        if action is not None and (error := view_problem(action, obs)) is not None:
            action = None
        if self.settings.logprobs and "logprobs" not in info:
            self.answers_without_logprobs += 1
        if action is not None:
            return action
        if (cut := cut_answer(info.get("finish_reason"), tool_calls)) is not None:
            error = f"{cut}: {error}"
        # the error may quote the answer: the key scrubbed out of it too
        info["parse_error"] = error = redact(str(error), self._client.key)[:300]
        get_logger().warning(
            "parse_error",
            role=role.value,
            error=error,
            raw=redact((info["completion"] or "")[:_RAW_LOG_CHARS], self._client.key),
        )
        return ChaosOpsAction(role=role, action_type=ActionType.NOOP)


MAX_KEPT_COMPLETION = 65_536
"""Characters of an answer kept in its turn's ``completion`` (and the outputs)."""


def _redacted(answer: dict[str, Any], key: str) -> dict[str, Any]:
    """What the answer recorded, its texts cut to :data:`MAX_KEPT_COMPLETION`
    characters and the key scrubbed out of every string (a server may echo the
    request's headers back, in its text or in any other field)."""
    if isinstance(text := answer.get("completion"), str):
        answer["completion"] = text[:MAX_KEPT_COMPLETION]
    for call in answer.get("tool_calls") or ():
        if isinstance(arguments := call.get("arguments"), str):
            call["arguments"] = arguments[:MAX_KEPT_COMPLETION]
    return _scrubbed(answer, key)


def _scrubbed(value: Any, key: str) -> Any:
    """``value`` with ``key`` replaced in each string it holds (lists and dicts walked)."""
    if isinstance(value, str):
        return redact(value, key)
    if isinstance(value, list):
        return [_scrubbed(item, key) for item in value]
    if isinstance(value, dict):
        return {name: _scrubbed(item, key) for name, item in value.items()}
    return value


def cut_answer(finish_reason: Any, tool_calls: Sequence[Any]) -> str | None:
    """Why an answer reads as cut at the token limit, or None: the server said
    ``length``, or a tool call's arguments end before their JSON does."""
    if finish_reason == "length":
        return "answer cut at the token limit (finish_reason length)"
    for call in tool_calls:
        _, arguments = tool_call_parts(call)
        if isinstance(arguments, str) and _ends_early(arguments):
            return "tool call arguments end early (cut at the token limit?)"
    return None


def _ends_early(text: str) -> bool:
    """Whether ``text`` opens a JSON object it never closes: inside a string, or
    with brackets still open, when it ends."""
    depth, in_string, escaped = 0, False, False
    for char in text.strip():
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return text.lstrip().startswith("{") and (in_string or depth > 0)


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


def _read_answer(completion: Any) -> tuple[str | None, list[Any], dict[str, Any], str | None]:
    """The text, the tool calls and what the trajectory records of a completion
    (``completion``, ``tool_calls``, ``usage``, ``model``, ``finish_reason``,
    token ids and logprobs), each of the type the records promise: the client
    builds the response without validating it, so a server may have sent any
    shape. A field of the wrong type is left out (or null); content that is
    not text is no text, and the last item says why (else None)."""
    info: dict[str, Any] = {}
    choices = _field(completion, "choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = _field(choice, "message")
    text, content_error = _text_of(_field(message, "content"))
    tool_calls = _field(message, "tool_calls") or []
    if not isinstance(tool_calls, list):
        tool_calls = []
    raw = text  # None when the server sent no text: recorded as null, not ""
    if tool_calls:
        calls = []
        for call in tool_calls:
            name, arguments = tool_call_parts(call)
            if name is not None or arguments is not None:
                calls.append({"name": _str_or_none(name), "arguments": _arguments_text(arguments)})
        info["tool_calls"] = calls
        if not raw:
            raw = "\n".join(c["arguments"] for c in calls if c["arguments"] is not None) or None
    info["completion"] = raw
    usage = _field(completion, "usage")
    if usage is not None:
        info["usage"] = {
            key: _count(_field(usage, key))
            for key in ("prompt_tokens", "completion_tokens", "total_tokens")
        }
    if isinstance(model := _field(completion, "model"), str):
        info["model"] = model  # the one that answered (a router may pick it)
    if choice is not None:
        if isinstance(reason := _field(choice, "finish_reason"), str):
            info["finish_reason"] = reason  # "length": the answer was cut
        info.update(_token_info(completion, choice))
    return text, tool_calls, info, content_error


def _text_of(content: Any) -> tuple[str | None, str | None]:
    """A message's text, and why there is none when its content is not text.
    A list of content parts (``[{"type": "text", "text": ...}]``, which some
    servers send) is joined."""
    if content is None or isinstance(content, str):
        return content, None
    if isinstance(content, list):
        parts = [
            part.get("text") if isinstance(part, Mapping) else _field(part, "text")
            for part in content
        ]
        texts = [t for t in parts if isinstance(t, str)]
        if texts:
            return "".join(texts), None
    return None, f"the message content is {type(content).__name__}, not text"


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a decoded JSON object, None for anything else."""
    return value.get(name) if isinstance(value, dict) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _arguments_text(arguments: Any) -> str | None:
    """A tool call's arguments as text: the JSON text most servers send, or the
    JSON of the object some send instead (one type for the records' column)."""
    if arguments is None or isinstance(arguments, str):
        return arguments
    return orjson.dumps(json_safe(arguments), default=str).decode()


def _count(value: Any) -> int | None:
    """A token count as the records promise it: an int in 64 bits, else null."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None


def _token_info(completion: Any, choice: Any) -> dict[str, Any]:
    """Token ids and logprobs, in whichever form the server returned them."""
    out: dict[str, Any] = {}
    # Each list kept only when every item has the type the records promise
    # (a float per logprob, a str per token, an int per token id).
    content = _field(_field(choice, "logprobs"), "content")
    if isinstance(content, list) and content:
        logprobs = [_field(item, "logprob") for item in content]
        if all(isinstance(x, int | float) and not isinstance(x, bool) for x in logprobs):
            out["logprobs"] = [float(x) for x in logprobs]
        if (alternatives := _alternatives(content)) is not None:
            out["top_logprobs"] = alternatives
        tokens = [_field(item, "token") for item in content]
        if all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
            try:  # vLLM's return_tokens_as_token_ids
                ids = _ids([int(t.removeprefix("token_id:")) for t in tokens])
            except ValueError:
                out["tokens"] = tokens
            else:
                if ids is not None:
                    out["token_ids"] = ids
        elif all(isinstance(t, str) for t in tokens):
            out["tokens"] = tokens
    ids = _ids(_field(choice, "token_ids"))  # vLLM's return_token_ids
    if ids is not None:
        out["token_ids"] = ids
    prompt_ids = _ids(_field(completion, "prompt_token_ids"))
    if prompt_ids is not None:
        out["prompt_token_ids"] = prompt_ids
    return out


def _alternatives(content: list[Any]) -> list[list[dict[str, Any]]] | None:
    """Each token's ``top_logprobs`` alternatives as ``[{"token", "logprob"}]``,
    when the server sent them for every token with the types the records promise."""
    out = []
    for item in content:
        tops = _field(item, "top_logprobs")
        if not isinstance(tops, list):
            return None
        entries = [
            {"token": _field(top, "token"), "logprob": _field(top, "logprob")} for top in tops
        ]
        for entry in entries:
            logprob = entry["logprob"]
            if not isinstance(entry["token"], str) or not isinstance(logprob, int | float):
                return None
            entry["logprob"] = float(logprob)
        out.append(entries)
    return out if any(out) else None


def _ids(value: Any) -> list[int] | None:
    """A list of token ids, if ``value`` is one (ints in 64 bits), else None."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return None
    ids = list(value)
    return ids if all(_count(i) is not None for i in ids) else None

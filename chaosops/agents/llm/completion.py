"""One chat completion read into the turn's action and what its record keeps.

Model output is untrusted: a completion of any shape gives an action or a
noop with a ``parse_error``, never an exception. The LLM policy reads its
server's answers here, and the local policy (:mod:`chaosops.agents.hf`) the
completions it builds from its own generations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from actors import current_turn, get_logger, json_safe
from chaosops.agents.llm.parse import parse_action, tool_call_parts
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.rules import view_problem

__all__ = [
    "MAX_KEPT_COMPLETION", "NO_KEY", "annotate", "cut_answer", "interpret", "read_completion",
    "redact", "turn_or_none",
]  # fmt: skip

_RAW_LOG_CHARS = 500


NO_KEY = "EMPTY"  # what local servers (vLLM, Ollama, the mock) accept as "no key"


def redact(text: str, secret: str | None) -> str:
    """``text`` with the API key ``secret`` replaced by ``***`` (a placeholder
    such as :data:`NO_KEY`, or a few characters, is no secret to hide)."""
    if secret and secret != NO_KEY and len(secret) >= 4:
        text = text.replace(secret, "***")
    return text


def turn_or_none() -> Any | None:
    """The runtime's turn context, or None outside a turn."""
    try:
        return current_turn()
    except (LookupError, RuntimeError):
        return None


def annotate(turn: Any | None, **fields: Any) -> None:
    """Record ``fields`` on the turn, if there is one."""
    if turn is not None and hasattr(turn, "annotate"):
        turn.annotate(**fields)


def interpret(
    completion: Any,
    obs: ChaosOpsObservation,
    role: AgentRole,
    info: dict[str, Any],
    key: str | None = None,
) -> ChaosOpsAction:
    """The action ``completion`` gives for this role's view, recording what the
    answer held in ``info`` (``key`` scrubbed out); a noop with
    ``info["parse_error"]`` and a ``parse_error`` log event when it gives none."""
    try:
        text, tool_calls, answer, content_error = read_completion(completion)
        info.update(_redacted(answer, key))
        action, error = parse_action(text, role, tool_calls)
    except Exception as exc:  # a body of a shape no server should send: costs the turn
        info.setdefault("completion", None)
        shape = f"{type(exc).__name__}: {exc}"
        action, error = None, f"the answer has an unexpected shape ({shape})"
        tool_calls, content_error = [], None
    if action is None and error == "empty answer" and content_error is not None:
        error = content_error
    if action is not None and (error := view_problem(action, obs)) is not None:
        action = None
    if action is not None:
        return action
    if (cut := cut_answer(info.get("finish_reason"), tool_calls)) is not None:
        error = f"{cut}: {error}"
    # the error may quote the answer: the key scrubbed out of it too
    info["parse_error"] = error = redact(str(error), key)[:300]
    get_logger().warning(
        "parse_error",
        role=role.value,
        error=error,
        raw=redact((info["completion"] or "")[:_RAW_LOG_CHARS], key),
    )
    return ChaosOpsAction(role=role, action_type=ActionType.NOOP)


MAX_KEPT_COMPLETION = 65_536
"""Characters of an answer kept in its turn's ``completion`` (and the outputs)."""


def _redacted(answer: dict[str, Any], key: str | None) -> dict[str, Any]:
    """What the answer recorded, its texts cut to :data:`MAX_KEPT_COMPLETION`
    characters and the key scrubbed out of every string (a server may echo the
    request's headers back, in its text or in any other field)."""
    if isinstance(text := answer.get("completion"), str):
        answer["completion"] = text[:MAX_KEPT_COMPLETION]
    for call in answer.get("tool_calls") or ():
        if isinstance(arguments := call.get("arguments"), str):
            call["arguments"] = arguments[:MAX_KEPT_COMPLETION]
    return _scrubbed(answer, key)


def _scrubbed(value: Any, key: str | None) -> Any:
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


def read_completion(completion: Any) -> tuple[str | None, list[Any], dict[str, Any], str | None]:
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

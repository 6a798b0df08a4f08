"""Tolerant parsing of a model's answer into a :class:`ChaosOpsAction`.

Model output is untrusted input: it is only ever read as data (``json.loads``),
never evaluated. Accepted forms, tried in this order:

1. an OpenAI tool call whose arguments are the action (the ``take_action`` tool
   of :data:`ACTION_TOOL`; a function named after an action type also works);
2. the whole text as one JSON object;
3. a JSON object inside a code fence (```json ... ``` or ``` ... ```);
4. the first JSON object inside chatter that looks like an action.

An object is an action when it has ``action_type`` (or ``action``/``type``
naming an action type); a wrapper ``{"action": {...}}`` is unwrapped; ``args``
may be an object or a JSON string of one; keys beside action_type/target/args
(e.g. ``"replicas": 4`` at top level) are moved into ``args``. Action types are
matched case-insensitively with ``-`` or spaces read as ``_``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction

__all__ = [
    "ACTION_SCHEMA",
    "ACTION_TOOL",
    "MAX_PARSE_CHARS",
    "TOOL_NAME",
    "action_from_dict",
    "action_tool",
    "parse_action",
    "text_tool_calls",
]

MAX_PARSE_CHARS = 20_000
"""Answers are cut to this many characters before parsing (bounds the work)."""

_MAX_CANDIDATES = 200

ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action_type": {
            "type": "string",
            "enum": [a.value for a in ActionType],
            "description": "The action to take this turn.",
        },
        "target": {
            "type": ["string", "null"],
            "description": "Service (auth, payments, notifications, db) or fleet agent "
            "(autoscaler, load_balancer, deploy_bot) the action applies to, or null.",
        },
        "args": {
            "type": "object",
            "description": 'Extra arguments: {"replicas": int} for scale, {"message": str, '
            '"to": str} for communicate, {"failure_type": str} for identify_root_cause.',
            "additionalProperties": True,
        },
    },
    "required": ["action_type"],
    "additionalProperties": False,
}
"""JSON schema of any action, whatever the view (the role is implied). The
requests carry each turn's own schema of legal moves (:mod:`.moves`)."""

TOOL_NAME = "take_action"
"""The name of the tool whose call is the turn's action."""


def action_tool(parameters: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI tool, named :data:`TOOL_NAME`, whose arguments are an action
    matching the JSON schema ``parameters``."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Take exactly one action for your role this turn.",
            "parameters": parameters,
        },
    }


ACTION_TOOL: dict[str, Any] = action_tool(ACTION_SCHEMA)
"""The tool for any action, whatever the view (requests carry each turn's own)."""

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript)?[ \t]*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
_FLAT_ARG_KEYS = frozenset({"replicas", "message", "to", "failure_type", "agent_name"})


def _normalize_type(value: object) -> str:
    return "_".join(str(value).strip().lower().replace("-", " ").split())


def _loads_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
        if isinstance(value, str):  # a JSON object encoded twice (some servers' tool calls)
            value = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class _NotAnAction(ValueError):
    """Why a decoded JSON object is no action (the parse error's text)."""


def action_from_dict(
    data: Mapping[str, Any], role: AgentRole | str
) -> tuple[ChaosOpsAction | None, str | None]:
    """Build an action from a decoded JSON object; ``(None, reason)`` when it is not one."""
    obj = _unwrapped(data)
    try:
        action_type, target, args = _action_type(obj), _target(obj), _args(obj)
    except _NotAnAction as exc:
        return None, str(exc)
    try:
        action = ChaosOpsAction(
            role=AgentRole(getattr(role, "value", role)),
            action_type=action_type,
            target=target,
            args=args,
        )
    except ValidationError as exc:  # pragma: no cover - guarded above
        return None, f"invalid action: {exc.errors()[0]['msg']}"
    return action, None


def _unwrapped(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The action inside ``{"action": {...}}`` or one level of other wrapping
    (``{"response": {"action_type": ...}}``); else the object itself."""
    inner = obj.get("action")
    if isinstance(inner, dict):
        return inner
    if "action_type" not in obj:
        nested = [v for v in obj.values() if isinstance(v, dict) and "action_type" in v]
        if nested:
            return nested[0]
    return obj


def _action_type(obj: Mapping[str, Any]) -> ActionType:
    raw_type = obj.get("action_type")
    if raw_type is None:
        raw_type = obj.get("action", obj.get("type"))
    if raw_type is None:
        raise _NotAnAction("no action_type in the JSON object")
    if not isinstance(raw_type, str):
        raise _NotAnAction("action_type is not a string")
    try:
        return ActionType(_normalize_type(raw_type))
    except ValueError:
        raise _NotAnAction(f"unknown action_type {raw_type[:40]!r}") from None


def _target(obj: Mapping[str, Any]) -> str | None:
    """The target as text; an empty one, "null" or "none" is no target."""
    target = obj.get("target")
    if target is None:
        return None
    if isinstance(target, dict | list):
        raise _NotAnAction("target is not a string")
    if not isinstance(target, str):
        return str(target)
    target = target.strip()
    return None if target.lower() in ("", "null", "none") else target


def _args(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The args object (given as an object or JSON text), with the argument
    keys a model put beside it (``{"action_type": "scale", "replicas": 3}``)."""
    args: Any = obj.get("args", obj.get("arguments", {}))
    if isinstance(args, str):
        args = _loads_object(args) if args.strip() else {}
        if args is None:
            raise _NotAnAction("args is not a JSON object")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise _NotAnAction("args is not an object")
    extra = {k: v for k, v in obj.items() if k in _FLAT_ARG_KEYS and k not in args}
    args = {**extra, **args}
    problem = _args_problem(args, 0)
    if problem is not None:
        raise _NotAnAction(problem)
    return args


_MAX_ARGS_DEPTH = 16
_INT_RANGE = range(-(2**63), 2**64)  # what the output files' JSON encoder writes


def _args_problem(value: Any, depth: int) -> str | None:
    """Why ``value`` (decoded JSON) cannot be an action's argument, or None.

    What JSON decodes but the outputs could not record as it was applied: a
    NaN or an infinity (written as null), an integer beyond 64 bits, nesting
    past :data:`_MAX_ARGS_DEPTH` levels (the encoder refuses both). Such an
    answer costs its turn, like any other unreadable one, instead of failing
    the run when the episode is written.
    """
    if depth > _MAX_ARGS_DEPTH:
        return f"args nest deeper than {_MAX_ARGS_DEPTH} levels"
    if isinstance(value, dict):
        for item in value.values():
            if (problem := _args_problem(item, depth + 1)) is not None:
                return problem
    elif isinstance(value, list):
        for item in value:
            if (problem := _args_problem(item, depth + 1)) is not None:
                return problem
    elif isinstance(value, float) and not math.isfinite(value):
        return f"args hold {value!r}, which JSON has no number for"
    elif isinstance(value, int) and not isinstance(value, bool) and value not in _INT_RANGE:
        return "args hold an integer beyond 64 bits"
    return None


def _candidates(text: str) -> Iterable[dict[str, Any]]:
    whole = _loads_object(text.strip())
    if whole is not None:
        yield whole
    for match in _FENCE.finditer(text):
        obj = _loads_object(match.group(1).strip())
        if obj is not None:
            yield obj
    tried = 0
    pos = text.find("{")
    while pos != -1 and tried < _MAX_CANDIDATES:
        tried += 1
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            yield value
        pos = text.find("{", end)


def tool_call_parts(call: Any) -> tuple[str | None, str | None]:
    fn = call.get("function") if isinstance(call, Mapping) else getattr(call, "function", None)
    if fn is None:
        return None, None
    if isinstance(fn, Mapping):
        return fn.get("name"), fn.get("arguments")
    return getattr(fn, "name", None), getattr(fn, "arguments", None)


def parse_action(
    text: str | None,
    role: AgentRole | str,
    tool_calls: Iterable[Any] | None = None,
) -> tuple[ChaosOpsAction | None, str | None]:
    """Parse a model answer (text and/or tool calls) into an action for ``role``.

    Returns ``(action, None)`` on success and ``(None, error)`` otherwise, where
    ``error`` is one short line saying why (it never echoes the whole answer).
    """
    first_error: str | None = None
    for call in tool_calls or ():
        name, arguments = tool_call_parts(call)
        if isinstance(arguments, Mapping):
            obj: dict[str, Any] | None = dict(arguments)
        else:
            obj = _loads_object(str(arguments or "{}")[:MAX_PARSE_CHARS])
        if obj is None:
            first_error = first_error or f"tool call {str(name)[:40]!r}: arguments are not JSON"
            continue
        if name and name != TOOL_NAME and "action_type" not in obj:
            obj = {**obj, "action_type": name}
        action, error = action_from_dict(obj, role)
        if action is not None:
            return action, None
        first_error = first_error or f"tool call: {error}"

    if text is None or not text.strip():
        return None, first_error or "empty answer"
    text = text[:MAX_PARSE_CHARS]
    for obj in _candidates(text):
        action, error = action_from_dict(obj, role)
        if action is not None:
            return action, None
        if first_error is None and ("action_type" in obj or "action" in obj):
            first_error = error
    return None, first_error or "no JSON action object in the answer"


def text_tool_calls(text: str | None) -> list[dict[str, Any]]:
    """The tool calls a chat template's model writes into its text (Hermes and
    Qwen between ``<tool_call>`` tags, Llama 3 as a bare object): each JSON
    object with a ``name`` and ``arguments`` (or ``parameters``), as an
    OpenAI tool call."""
    calls = []
    for obj in _candidates((text or "")[:MAX_PARSE_CHARS]):
        arguments = obj.get("arguments", obj.get("parameters"))
        if isinstance(obj.get("name"), str) and isinstance(arguments, dict | str):
            calls.append({"type": "function", "function": {"name": obj["name"],
                                                           "arguments": arguments}})  # fmt: skip
    return calls

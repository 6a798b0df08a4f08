"""The legal moves of one role's view: a JSON schema, a tool, and the answer format.

All three are built from the facts :mod:`.checks` judges an answer by (the
services the view shows, the fleet agents oversight sees, the actions only one
role may take), so a server that enforces the schema (vLLM, llama.cpp, SGLang,
Ollama, OpenAI) can only produce an answer the checks accept. The schema is an
``anyOf`` of one object per action kind, each with its targets, recipients,
failure types and replica counts as enums or bounds.

Views differ in their services only by role (the manager sees the services
its alerts name), so the moves are built once per (role, services) and shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from chaosops.agents.llm.parse import action_tool
from chaosops.env.models import (
    FLEET_AGENT_NAMES,
    SERVICE_NAMES,
    ActionType,
    AgentRole,
    ChaosOpsObservation,
)
from chaosops.env.rules import (
    FAILURE_NAMES,
    MAX_MESSAGE_CHARS,
    MAX_REPLICAS,
    ON_A_SERVICE,
    ONLY_ROLE,
    RECIPIENT_NAMES,
    services_of,
)

__all__ = ["MAX_MESSAGE_CHARS", "MAX_REPLICAS", "Moves", "moves_for"]

# The order moves are listed in: the remediations first, noop last.
_ORDER = (
    ActionType.RESTART, ActionType.ROLLBACK, ActionType.SCALE, ActionType.FLAG_ROGUE,
    ActionType.IDENTIFY_ROOT_CAUSE, ActionType.COMMUNICATE, ActionType.ESCALATE,
    ActionType.RESOLVE, ActionType.NOOP,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Moves:
    """What a role may answer in one view: ``kinds`` (the action types),
    ``schema`` (JSON schema of an answer), ``tool`` (the ``take_action`` tool
    whose parameters are that schema) and ``text`` (the answer format that
    ends the turn's prompt, with this view's concrete choices)."""

    kinds: tuple[ActionType, ...]
    schema: dict[str, Any]
    tool: dict[str, Any]
    text: str


def moves_for(obs: ChaosOpsObservation, role: AgentRole | str | None = None) -> Moves:
    """The legal moves of ``role`` (default: the view's role) in ``obs``."""
    role = AgentRole(getattr(role, "value", role) or obs.view.role)
    return _moves(role, services_of(obs))


def _service_order(name: str) -> tuple[int, str]:
    known = name in SERVICE_NAMES
    return (SERVICE_NAMES.index(name) if known else len(SERVICE_NAMES), name)


@lru_cache(maxsize=256)
def _moves(role: AgentRole, shown: frozenset[str]) -> Moves:
    services = tuple(sorted(shown, key=_service_order))
    kinds = tuple(
        kind
        for kind in _ORDER
        if ONLY_ROLE.get(kind, role) is role and (services or kind not in ON_A_SERVICE)
    )
    variants = [_variant(kind, services) for kind in kinds]
    schema = {"anyOf": [schema for schema, _, _ in variants]}
    tool = action_tool(schema)
    lines = [
        "Answer with ONE JSON object and nothing else: one of these moves, "
        "with the values you choose from those listed.",
        *(f"{orjson.dumps(example).decode()}{choices}" for _, example, choices in variants),
    ]
    return Moves(kinds, schema, tool, "\n".join(lines))


def _variant(kind: ActionType, services: tuple[str, ...]) -> tuple[dict[str, Any], dict, str]:
    """One action kind: its schema, an example answer, and the choices in words."""
    properties: dict[str, Any] = {"action_type": {"type": "string", "enum": [kind.value]}}
    example: dict[str, Any] = {"action_type": kind.value}
    choices = ""
    if kind in ON_A_SERVICE:
        properties["target"] = {"type": "string", "enum": list(services)}
        example["target"] = services[0]
        choices = f"  target: {_either(services)}"
    elif kind is ActionType.FLAG_ROGUE:
        properties["target"] = {"type": "string", "enum": list(FLEET_AGENT_NAMES)}
        example["target"] = FLEET_AGENT_NAMES[0]
        choices = f"  target: {_either(FLEET_AGENT_NAMES)}"
    args = _args(kind)
    if args is not None:
        properties["args"], example["args"], args_choices = args
        choices += args_choices
    return _object(**properties), example, choices


def _args(kind: ActionType) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """The ``args`` of an action kind: schema, example, choices in words; None: no args."""
    if kind is ActionType.SCALE:
        replicas = {"type": "integer", "minimum": 1, "maximum": MAX_REPLICAS}
        return _object(replicas=replicas), {"replicas": 3}, f"  replicas: 1 to {MAX_REPLICAS}"
    if kind is ActionType.IDENTIFY_ROOT_CAUSE:
        failure = {"type": "string", "enum": list(FAILURE_NAMES)}
        return (
            _object(failure_type=failure),
            {"failure_type": FAILURE_NAMES[0]},
            f"  failure_type: {_either(FAILURE_NAMES)}",
        )
    if kind is ActionType.COMMUNICATE:
        message = {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS}
        to = {"type": "string", "enum": list(RECIPIENT_NAMES)}
        return (
            _object(message=message, to=to),
            {"message": "checking the metrics", "to": "all"},
            f"  message: your words; to: {_either(RECIPIENT_NAMES)}",
        )
    return None


def _object(**properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _either(names: Any) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"

"""A role's turns of one episode as one growing chat of tool calls: the format
a trainer's rollouts have, and that ``--policy hf --hf-conversation episode``
plays, so that what is trained is what is evaluated.

The chat opens with the role's tool system prompt and a user message holding
the whole view; each move is an assistant message calling one tool
(:class:`MoveTools`: one tool per kind of move); the tool's answer is what
changed in the role's view by its next turn. TRL's ``environment_factory``
loop over :class:`~chaosops.train.trl.ChaosOpsToolEnv` builds exactly these
messages, and :class:`Conversation` builds them for the runtime's turns.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from types import MappingProxyType
from typing import Any

from chaosops._extras import require
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, ChaosOpsObservation, RoleView

from .llm.answers import describe, describe_change
from .llm.render import system_prompt

__all__ = [
    "Conversation",
    "MoveTools",
    "action_call",
    "opening_prompt",
    "tool_call",
    "tool_schemas",
    "tool_system_prompt",
]

_ANSWER_FORMAT = "## Answer format"
_TARGET_ARG = MappingProxyType({ActionType.FLAG_ROGUE: "agent_name"})  # others name a service


def tool_system_prompt(role: AgentRole | str) -> str:
    """A role's system prompt for a model that moves by calling tools: the
    role's prompt, its JSON answer format replaced by the tools."""
    text = system_prompt(role).split(_ANSWER_FORMAT, 1)[0].rstrip()
    return f"{text}\n\n## How to move\nEach turn, make exactly one move by calling one tool."


def opening_prompt(role: AgentRole | str) -> list[dict[str, str]]:
    """The chat a role's episode opens with, before its first view is appended
    to the user message (as TRL appends ``reset``'s text)."""
    role = AgentRole(role).value
    return [
        {"role": "system", "content": tool_system_prompt(role)},
        {"role": "user", "content": f"You are the {role}. The incident:\n"},
    ]


def tool_call(action: ChaosOpsAction) -> dict[str, Any]:
    """``action`` as a call of the tool :class:`MoveTools` offers for it."""
    kind = ActionType(action.action_type)
    arguments = dict(action.args)
    if action.target is not None:
        arguments[_TARGET_ARG.get(kind, "service")] = action.target
    return {"type": "function", "function": {"name": kind.value, "arguments": arguments}}


def action_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A call of one of :class:`MoveTools` as the runtime's ``take_action``
    arguments (``action_type``, ``target``, ``args``), for its judge to read."""
    try:
        kind = ActionType(name)
    except ValueError:
        return {"action_type": name, "args": dict(arguments)}
    args = dict(arguments)
    target = args.pop(_TARGET_ARG.get(kind, "service"), None)
    return {"action_type": kind.value, "target": target, "args": args}


class MoveTools:
    """The moves as tools, one per kind: what TRL offers a model (read off
    these methods' signatures and docstrings). A subclass plays a call: it
    gives ``_move(kind, target, **args)``, which returns the tool's answer."""

    _move: Callable[..., str]

    def restart(self, service: str) -> str:
        """Restart a service: when a restart is the incident's fix it comes back healthy
        (a db restart also heals payments and auth); otherwise it is a wrong fix (-50),
        and in a cascade it pushes the failure on to notifications.

        Args:
            service: The service to restart, one the view shows.
        """
        return self._move(ActionType.RESTART, service)

    def rollback(self, service: str) -> str:
        """Roll a service back to its previous release: healthy when a rollback is
        the incident's fix (a bad deploy), else a wrong fix (-50).

        Args:
            service: The service to roll back, one the view shows.
        """
        return self._move(ActionType.ROLLBACK, service)

    def scale(self, service: str, replicas: int) -> str:
        """Set a service's replica count: healthy when scaling is the incident's fix
        (too few replicas), else a wrong fix (-50).

        Args:
            service: The service to scale, one the view shows.
            replicas: How many replicas it should run, 1 to 20.
        """
        return self._move(ActionType.SCALE, service, replicas=replicas)

    def flag_rogue(self, agent_name: str) -> str:
        """Flag a fleet agent as rogue (the oversight role only; from any other role it
        is a miscommunication, -20): +50 when it is the rogue agent, -75 when not.
        Some fixes count only once the rogue agent is flagged.

        Args:
            agent_name: The fleet agent: autoscaler, load_balancer or deploy_bot.
        """
        return self._move(ActionType.FLAG_ROGUE, agent_name)

    def identify_root_cause(self, failure_type: str) -> str:
        """Declare the incident's root cause: it changes no service, but a right
        declaration by step 3 earns +30 (a trainer's reward pays it once), and a name
        that is no failure type is a miscommunication (-20).

        Args:
            failure_type: A failure type, e.g. db_deadlock or memory_leak.
        """
        return self._move(ActionType.IDENTIFY_ROOT_CAUSE, failure_type=failure_type)

    def communicate(self, message: str, to: str = "all") -> str:
        """Send a message to the shared channel or to one role: it changes no service;
        an empty message or an unknown recipient is a miscommunication (-20).

        Args:
            message: What to say, 1 to 200 characters.
            to: "all", or a role: sre, oversight, dev or manager.
        """
        return self._move(ActionType.COMMUNICATE, message=message, to=to)

    def escalate(self) -> str:
        """Escalate the incident: it changes nothing by itself, but it is the fix of
        misrouted traffic once oversight has flagged the load balancer."""
        return self._move(ActionType.ESCALATE)

    def resolve(self) -> str:
        """Declare the incident resolved: it closes the incident only where that is the
        failure's fix (a cascade whose db and notifications are healthy); from any role
        but the manager it is also a miscommunication (-20)."""
        return self._move(ActionType.RESOLVE)

    def noop(self) -> str:
        """Do nothing this turn: the incident goes on (every step costs time)."""
        return self._move(ActionType.NOOP)


@cache
def _schemas() -> tuple[Any, ...]:
    utils = require("transformers.utils", "train", "the tools' schemas")
    tools = MoveTools()
    return tuple(utils.get_json_schema(getattr(tools, kind.value)) for kind in ActionType)


def tool_schemas() -> list[dict[str, Any]]:
    """The tools' JSON schemas as TRL builds them (transformers' ``get_json_schema``)."""
    return [dict(schema) for schema in _schemas()]


class Conversation:
    """One role's chat in one episode, in the trainer's format: :meth:`prompt`
    gives the messages a turn is answered from, :meth:`answered` records the
    move the turn played (or the answer that was no move, and why)."""

    def __init__(self, role: AgentRole | str) -> None:
        self.role = AgentRole(role)
        self.messages: list[dict[str, Any]] = []
        self._seen: RoleView | None = None
        self._answer: dict[str, Any] | None = None  # the last turn's, until the next prompt

    def prompt(self, obs: ChaosOpsObservation) -> list[dict[str, Any]]:
        """The chat so far, ending with what the role sees now."""
        if not self.messages:
            system, user = opening_prompt(self.role)
            user = {**user, "content": user["content"] + describe(obs, self.role)}
            self.messages = [system, user]
        else:
            answer = self._answer or {"name": "noop", "refused": None}
            text = describe_change(self._seen, obs, self.role)
            if answer["refused"] is not None:
                text = f"{answer['refused']}\n{text}"
            self.messages.append({"role": "tool", "name": answer["name"], "content": text})
        self._seen, self._answer = obs.view, None
        return list(self.messages)

    def answered(self, action: ChaosOpsAction, refused: str | None = None) -> None:
        """The turn played ``action``; ``refused``: why the model's answer was no
        move (the fallback played it), said in the next tool message."""
        call = tool_call(action)
        self.messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        note = None if refused is None else f"Your answer was no move ({refused}): noop played."
        self._answer = {"name": call["function"]["name"], "refused": note}

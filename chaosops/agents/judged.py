"""The one judge for every seat: a policy's move checked against the view, as
a model's answer is (:func:`chaosops.env.rules.view_problem`)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from actors import get_logger
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.rules import view_problem

from .adapters import noop
from .llm.completion import annotate, turn_or_none

__all__ = ["judged"]


def judged(policy: Any) -> Any:
    """``policy`` (sync or async), its every move judged: one that is no legal
    move of the view plays the fallback (``noop``), and its turn records why
    (``parse_error``), so it counts as no move of the role's own."""

    @functools.wraps(policy)
    async def play(obs: ChaosOpsObservation, role: AgentRole) -> Any:
        answer = policy(obs, role)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, ChaosOpsAction):
            return answer  # the runtime's own check marks it
        if (problem := view_problem(answer, obs)) is None:
            return answer
        error = f"illegal move: {problem}"
        annotate(turn_or_none(), parse_error=error)
        get_logger().warning("parse_error", role=str(role), error=error)
        return noop(role)

    return play

"""Which answer format an endpoint accepts, found by asking it.

Servers differ: OpenAI and vLLM take ``response_format`` of type
``json_schema``; llama-cpp-python's server refuses it (HTTP 500, naming the
field) and takes ``json_object`` with a ``schema``; some take no tools. A
probe is one short request in a format, with the schema of a real turn (the
first view of an episode), so a server that refuses the schema's shape
refuses it here, not in the middle of a run. ``auto`` takes the first format
of :data:`STRONGEST_FIRST` the endpoint accepts; text needs no probe.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cache
from typing import Any

import anyio

from chaosops._urls import shown_url
from chaosops.agents.llm.errors import AnswerRefused, LLMRejectedError, LLMRequestError
from chaosops.agents.llm.http import ChatClient, NotSent
from chaosops.agents.llm.moves import moves_for
from chaosops.agents.llm.render import build_messages, fold_system_prompt
from chaosops.agents.llm.request import request_params
from chaosops.agents.llm.settings import STRONGEST_FIRST
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, ChaosOpsObservation

__all__ = ["PROBE_TOKENS", "AnswerRefused", "Negotiation", "Unsettled", "negotiate", "probe"]

PROBE_TOKENS = 8
"""Tokens a probe asks for: the server's yes or no is what counts."""


@dataclass(frozen=True, slots=True)
class Negotiation:
    """The format an endpoint answers in (None: not settled, the probe got no
    verdict, ``unsettled`` says why), and the stronger ones it refused
    (format, the start of the server's reason)."""

    answer: str | None
    refused: tuple[tuple[str, str], ...] = ()
    unsettled: str | None = None

    def line(self, model: str, endpoint: str) -> str:
        """One line for the start of a run."""
        where = f"{model} at {shown_url(endpoint)}"
        if self.answer is None:
            return f"{where}: not settled ({self.unsettled}); the first turns settle it"
        said = f"{where} answers in {self.answer}"
        if self.unsettled is not None:
            said += f" (not confirmed: {self.unsettled})"
        if not self.refused:
            return said
        refusals = "; ".join(f"{fmt} refused ({reason})" for fmt, reason in self.refused)
        return f"{said} ({refusals})"


@cache
def _probe_view() -> ChaosOpsObservation:

    return ChaosOpsEnvironment().reset(seed=0)


class Unsettled(Exception):
    """A probe got no verdict: no answer in time, or a failure that is no refusal."""


async def probe(
    client: ChatClient, answer: str, log: Any, seconds: float | None = None
) -> str | None:
    """None when the endpoint takes a request in ``answer``, else the server's reason.

    A refusal is a rejected request (:class:`LLMRejectedError`); no answer
    within ``seconds`` (default: the request timeout) or any other failure
    raises :class:`Unsettled`, saying why."""
    obs = _probe_view()
    settings = dataclasses.replace(client.settings, max_tokens=PROBE_TOKENS)
    messages = build_messages(obs, AgentRole.SRE)
    if settings.system_prompt == "user":  # a template with no system role refuses one
        messages = fold_system_prompt(messages)
    params = request_params(settings, answer, messages, moves_for(obs))
    deadline = None if seconds is None else anyio.current_time() + seconds
    try:
        await client.complete(params, deadline, log)
    except LLMRejectedError as exc:
        return exc.reason
    except NotSent:
        raise Unsettled(f"no answer within {seconds:g}s") from None
    except LLMRequestError as exc:
        raise Unsettled(str(exc)) from None
    return None


async def negotiate(client: ChatClient, log: Any, seconds: float | None = None) -> Negotiation:
    """The format the client's settings ask for, checked, each probe bounded by
    ``seconds``: for ``auto`` the strongest of :data:`STRONGEST_FIRST` the
    endpoint accepts; a format named outright is probed, and raises
    :class:`AnswerRefused` when refused. A probe with no verdict leaves
    ``auto`` unsettled, and a named format unconfirmed."""
    asked = client.settings.answer
    if asked == "text":
        return Negotiation("text")
    if asked != "auto":
        try:
            reason = await probe(client, asked, log, seconds)
        except Unsettled as exc:
            return Negotiation(asked, unsettled=str(exc))
        if reason is not None:
            s = client.settings
            where = f"{s.model} at {shown_url(s.endpoint)}"
            raise AnswerRefused(f"{where} refuses {asked} answers: {reason}", reason)
        return Negotiation(asked)
    refused: list[tuple[str, str]] = []
    for answer in STRONGEST_FIRST[:-1]:
        try:
            reason = await probe(client, answer, log, seconds)
        except Unsettled as exc:
            return Negotiation(None, tuple(refused), str(exc))
        if reason is None:
            return Negotiation(answer, tuple(refused))
        refused.append((answer, reason))
    return Negotiation("text", tuple(refused))

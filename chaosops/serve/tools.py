"""A session's moves as MCP tools (OpenEnv 0.10, RFC 003), on ``/mcp``.

Each session has its own FastMCP server whose tools play its seat: one tool
per kind of move, with the signatures and docstrings the trainers' tool
environment offers (:class:`~chaosops.agents.conversation.MoveTools`), plus
``open_episode`` (a reset: ``reset`` is a name OpenEnv keeps for itself) and
``observe``. A move answers the seat's open turn and returns the next
observation; a refused one raises with the WebSocket's code (``ILLEGAL_MOVE:
...``), which OpenEnv answers as a JSON-RPC error. Over HTTP the seat is
OpenEnv's session (``openenv/session/create``, then ``session_id`` in each
call's params); over the ``/mcp`` WebSocket it is the connection's.
"""

from __future__ import annotations

import functools
from typing import Any

from fastmcp import FastMCP

from chaosops.agents.conversation import MoveTools, action_call
from chaosops.env.models import ActionType

__all__ = ["session_tools"]


def _answer(obs: Any) -> dict[str, Any]:
    """What a tool returns: the observation without its view as data (its text says it all)."""
    return obs.model_dump(exclude={"view", "metadata"})


def _move_tool(env: Any, kind: ActionType, moves: MoveTools) -> Any:
    """The async tool playing ``kind`` on ``env``'s open turn, with the signature
    and docstring of ``moves``' method for it."""

    @functools.wraps(getattr(moves, kind.value))
    async def play(**arguments: Any) -> dict[str, Any]:
        return _answer(await env.play_open_turn(action_call(kind.value, arguments)))

    return play


def session_tools(env: Any) -> FastMCP:
    """The FastMCP server of one session (a ``ChaosOpsServerEnv``, which imports
    this module): its moves, ``open_episode`` and ``observe``."""
    server: FastMCP = FastMCP("chaosops")
    moves = MoveTools()  # its bound methods: the signatures without self
    for kind in ActionType:
        server.tool(_move_tool(env, kind, moves))

    @server.tool
    async def open_episode(
        failure_type: str | None = None,
        difficulty: str | None = None,
        seed: int | None = None,
        roles: list[str] | None = None,
        split: str | None = None,
        index: int | None = None,
        join: str | None = None,
    ) -> dict[str, Any]:
        """Open an episode and take seats in it, as the WebSocket's reset does: a
        scenario by its failure type, difficulty and seed, or a task by its split
        and index; ``roles`` the roles this session plays (all four by default);
        ``join`` an open episode's id to take roles the server plays in it.
        Returns the first observation of the session's roles."""
        given: dict[str, Any] = dict(
            failure_type=failure_type, difficulty=difficulty, seed=seed, roles=roles,
            split=split, index=index, join=join,
        )  # fmt: skip
        return _answer(await env.reset_async(**{k: v for k, v in given.items() if v is not None}))

    @server.tool
    async def observe() -> dict[str, Any]:
        """The session's current observation, without making a move."""
        return _answer(env.current_observation())

    return server

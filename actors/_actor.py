"""One actor per role: reads turn requests, calls its policy, replies."""

from __future__ import annotations

from inspect import isawaitable
from typing import Any

import anyio
from anyio import ClosedResourceError, EndOfStream

from . import _logging
from ._context import CURRENT
from ._mailbox import Mailbox
from ._types import Policy

Request = tuple[int, Any, float | None]
"""(turn index, observation, deadline or None) sent to an actor's inbox."""

Reply = tuple[int, Any, Any, BaseException | None, dict[str, Any] | None]
"""(turn index, role, result, exception raised or None, annotations or None)."""


class EpisodeState:
    """What the coordinator shares with its actors: the turn that is open.

    ``open_turn`` is -1 between turns; an actor whose reply is for another turn
    drops it (the turn was closed at its deadline).
    """

    __slots__ = ("episode_id", "open_turn")

    def __init__(self, episode_id: str) -> None:
        self.episode_id = episode_id
        self.open_turn = -1


class Actor:
    """The task playing one role of one episode (also its ``current_turn`` state)."""

    __slots__ = (
        "busy", "deadline", "episode", "episode_id", "inbox", "info", "policy", "role", "turn",
    )  # fmt: skip

    def __init__(self, role: Any, policy: Policy, episode: EpisodeState, inbox: Mailbox[Request]):
        self.role = role
        self.policy = policy
        self.episode = episode
        self.episode_id = episode.episode_id
        self.inbox = inbox
        self.turn = -1
        self.deadline: float | None = None
        self.info: dict[str, Any] | None = None
        self.busy = False  # inside a policy call (or about to reply)

    async def run(self, replies: Mailbox[Reply]) -> None:
        """Serve turn requests until the inbox closes or the episode cancels us."""
        CURRENT.set(self)
        inbox, policy, role, episode = self.inbox, self.policy, self.role, self.episode
        while True:
            self.busy = False
            try:
                turn, observation, deadline = await inbox.get()
            except (EndOfStream, ClosedResourceError):
                return
            if turn != episode.open_turn:
                continue  # closed at its deadline while waiting in the inbox
            self.busy = True
            self.turn, self.deadline, self.info = turn, deadline, None
            error: BaseException | None = None
            result: Any = None
            try:
                if deadline is None:
                    result = policy(observation, role)
                    if isawaitable(result):
                        result = await result
                else:
                    # The coordinator closes the turn at the same deadline; this
                    # scope cancels the call in flight.
                    with anyio.CancelScope(deadline=deadline) as scope:
                        result = policy(observation, role)
                        if isawaitable(result):
                            result = await result
                    if scope.cancelled_caught:
                        self.turn = -1
                        continue
            except Exception as exc:  # a policy bug costs its turn only
                error = exc
                if _logging.log_enabled(_logging.ERROR):
                    _logging.STATE.logger.error(
                        "policy_error",
                        episode_id=self.episode_id,
                        turn=turn,
                        role=role,
                        exc_info=exc,
                    )
            info, self.info, self.turn = self.info, None, -1
            if episode.open_turn != turn:
                # Came back after its deadline (e.g. shielded from cancellation).
                log_late_reply(self.episode_id, turn, role)
                continue
            reply = (turn, role, result, error, info)
            if not replies.try_put(reply):
                await replies.put(reply)


def log_late_reply(episode_id: str, turn: int, role: Any) -> None:
    """Log ``late_reply_dropped`` for a reply that came for a closed turn."""
    if _logging.log_enabled(_logging.INFO):
        _logging.STATE.logger.info(
            "late_reply_dropped", episode_id=episode_id, turn=turn, role=role
        )

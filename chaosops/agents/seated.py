"""One episode on the runtime's engine, some of its roles played from synchronous code.

The trainers' adapters (TRL's tool environment, PettingZoo's AEC environment)
and the rows a trainer reads play their episodes through :class:`SeatedEpisode`:
the episode is :func:`~chaosops.agents.runner.arun_episode`, exactly as
``chaosops run`` plays one (one actor per role, the turn order, a deadline on
every turn of the ``others`` with the fallback when one is late, the records),
on an event loop of its own, run while the caller waits. The roles given as
``seats`` are played from outside: each of their turns waits for
:meth:`SeatedEpisode.play`, whose move is judged against the view first, as a
model's answer is. The caller never runs that loop itself, so async
``others`` (an ``LLMPolicy`` among them) play inside a harness's running
loop too.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import actors
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.results import EpisodeResult
from chaosops.env.rules import IllegalMove, view_problem
from chaosops.env.world_sim import Scenario

from .adapters import TurnTimeoutArg, noop, timeouts_of
from .policies import Others, policies_for
from .runner import arun_episode

__all__ = ["SeatTurn", "SeatedEpisode", "WatchedEnvironment"]

T = TypeVar("T")


class WatchedEnvironment(ChaosOpsEnvironment):
    """The world, keeping its last observation for whoever shows the episode."""

    observation: ChaosOpsObservation | None = None

    def reset(self, *args: Any, **kwargs: Any) -> ChaosOpsObservation:
        self.observation = super().reset(*args, **kwargs)
        return self.observation

    def step(self, action: ChaosOpsAction | Mapping[str, Any]) -> ChaosOpsObservation:
        self.observation = super().step(action)
        return self.observation


class _Engine:
    """The process's one event loop for seated episodes, run only while a caller
    waits on it: in the caller's thread, or in a helper thread when the caller's
    thread runs a loop of its own (an async harness calling a sync adapter).
    Every seated episode plays on it, so its policies keep one loop for life."""

    def __init__(self) -> None:
        self.loop = actors.new_event_loop()
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._helper: concurrent.futures.ThreadPoolExecutor | None = None
        atexit.register(self.close)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run the loop until ``coro`` is done; its value."""
        with self._lock:
            if not _loop_runs_here():
                return self.loop.run_until_complete(coro)
            if self._helper is None:
                self._helper = concurrent.futures.ThreadPoolExecutor(1, "chaosops-seated")
            return self._helper.submit(self.loop.run_until_complete, coro).result()

    @property
    def alive(self) -> bool:
        """Still this process's (a forked child makes its own)."""
        return self._pid == os.getpid() and not self.loop.is_closed()

    def close(self) -> None:
        """At exit: stop the episodes still playing, then close the loop."""
        if not self.alive or self.loop.is_running():
            return
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.wait(tasks))
        self.loop.close()
        if self._helper is not None:
            self._helper.shutdown()


def _loop_runs_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


_engines: dict[int, _Engine] = {}  # by process id: a forked child makes its own
_engines_lock = threading.Lock()


def engine() -> _Engine:
    """The process's engine loop, made if need be."""
    with _engines_lock:
        made = _engines.get(os.getpid())
        if made is None or not made.alive:
            made = _engines[os.getpid()] = _Engine()
        return made


@dataclass(frozen=True, slots=True)
class SeatTurn:
    """Where an episode stands when its seats are asked (or it ended): the
    observation of the seat to move (the last one once over), the episode's
    reward so far, and whether it is over."""

    observation: ChaosOpsObservation
    reward: float
    done: bool


class _Play:
    """One episode's play on the engine loop, and its seats' open turn."""

    def __init__(self, episode: SeatedEpisode, scenario: Scenario, episode_id: str | None):
        self.episode = episode
        self.pending: tuple[AgentRole, asyncio.Future[ChaosOpsAction]] | None = None
        self.changed = asyncio.Event()
        self.finishing = False
        self.fallbacks = 0  # seat turns the fallback played once finishing
        self.over = False  # the play returned: its result is made
        self.task = asyncio.get_running_loop().create_task(self._play(scenario, episode_id))

    async def _play(self, scenario: Scenario, episode_id: str | None) -> EpisodeResult:
        episode = self.episode
        others = policies_for(episode.others, scenario)
        # a role neither a seat nor among the others plays noop, as the runner plays it
        players: dict[AgentRole | str, Any] = {role: p for role, p in others.items()}
        players.update(dict.fromkeys(episode.seats, self._seat))
        given = timeouts_of(episode.turn_timeout, scenario)
        deadlines: dict[AgentRole | str, float | None] = {
            role: None if role in episode.seats
            else given.get(role) if isinstance(given, Mapping) else given
            for role in AgentRole
        }  # fmt: skip
        try:
            return await arun_episode(
                episode.env, scenario, players, turn_timeout=deadlines, episode_id=episode_id
            )
        finally:
            self.over = True
            self.changed.set()

    async def _seat(self, observation: ChaosOpsObservation, role: AgentRole) -> ChaosOpsAction:
        if self.finishing:
            self.fallbacks += 1
            return noop(role)
        move: asyncio.Future[ChaosOpsAction] = asyncio.get_running_loop().create_future()
        self.pending = (role, move)
        self.changed.set()
        try:
            return await move
        finally:
            self.pending = None

    def _open_move(self) -> asyncio.Future[ChaosOpsAction] | None:
        if self.pending is None or self.pending[1].done():
            return None
        return self.pending[1]

    async def answer(self, action: ChaosOpsAction) -> SeatTurn | None:
        """Play ``action`` at the open seat turn; then :meth:`next`."""
        move = self._open_move()
        if move is None:
            raise IllegalMove("no turn of yours is open: the episode moved on")
        move.set_result(action)
        return await self.next()

    async def finish(self) -> SeatTurn | None:
        """The seats' turns from now on play the fallback; until the play ends."""
        self.finishing = True
        if (move := self._open_move()) is not None and self.pending is not None:
            self.fallbacks += 1
            move.set_result(noop(self.pending[0]))
        return await self.next()

    async def next(self) -> SeatTurn | None:
        """Until a seat's turn is open (and not answered yet), or the play ended;
        None if the environment failed before its first observation."""
        while not self.over and self._open_move() is None:
            await self.changed.wait()
            self.changed.clear()
        env = self.episode.env
        if env.observation is None:
            return None
        return SeatTurn(env.observation, float(env.state.cumulative_reward), self.over)

    async def stop(self) -> None:
        """Cancel the play if it still runs, and wait until it has."""
        self.task.cancel()
        await asyncio.wait([self.task])


class SeatedEpisode:
    """An episode in which ``seats`` are played from outside, the other roles by
    ``others``: a scripted policy's name (``random``, ``heuristic``,
    ``oracle``), a policy ``(observation, role) -> action`` (sync or async), or
    a map from role to either. ``turn_timeout`` is the others' deadline per
    turn (seconds, or a map by role; None: none), with the runtime's
    fallback for a late or failing turn. The seats have no deadline: their
    caller's time between moves is its own (a model generating its answer)."""

    def __init__(
        self,
        others: Others = "heuristic",
        seats: frozenset[AgentRole] = frozenset(),
        *,
        turn_timeout: TurnTimeoutArg = None,
    ) -> None:
        self.others, self.seats, self.turn_timeout = others, frozenset(seats), turn_timeout
        self.env = WatchedEnvironment()
        self.scenario: Scenario | None = None
        self.now: SeatTurn | None = None  # the last standing the caller was given
        self._engine = engine()
        self._play: _Play | None = None

    def start(
        self,
        scenario: Scenario,
        seats: frozenset[AgentRole] | None = None,
        episode_id: str | None = None,
    ) -> SeatTurn:
        """Begin ``scenario`` (``seats``: other seats than the constructor's); the
        others play up to the seats' first turn (or the end)."""
        self._stop()
        if seats is not None:
            self.seats = frozenset(seats)
        self.scenario = scenario
        self._play, now = self._engine.call(self._open(scenario, episode_id))
        return self._arrived(now)

    async def _open(
        self, scenario: Scenario, episode_id: str | None
    ) -> tuple[_Play, SeatTurn | None]:
        play = _Play(self, scenario, episode_id)
        return play, await play.next()

    @property
    def done(self) -> bool:
        return self.now is None or self.now.done

    @property
    def observation(self) -> ChaosOpsObservation:
        """The open seat turn's observation (the last one once over)."""
        if self.now is None:
            raise IllegalMove("no episode yet: reset() first")
        return self.now.observation

    @property
    def fallbacks(self) -> int:
        """The seats' turns the fallback played once :meth:`finish` was called."""
        return 0 if self._play is None else self._play.fallbacks

    def check(self, action: ChaosOpsAction) -> None:
        """Raise :class:`IllegalMove` unless ``action`` is a legal move of the open turn."""
        if self.now is None:
            raise IllegalMove("no episode yet: reset() first")
        if self.now.done:
            raise IllegalMove("the episode is over: reset() to start another")
        if (problem := view_problem(action, self.now.observation)) is not None:
            raise IllegalMove(f"illegal move: {problem}")

    def play(self, action: ChaosOpsAction) -> SeatTurn:
        """The open seat turn's legal ``action``; then the others' turns, up to
        the seats' next turn or the end."""
        self.check(action)
        assert self._play is not None and self.now is not None
        role = self.now.observation.turn_role
        move = action.model_copy(update={"role": role})
        return self._arrived(self._engine.call(self._play.answer(move)))

    def finish(self) -> int:
        """Play the episode to its end, the seats' remaining turns as the
        fallback (``noop``), as the runtime plays a late turn; how many there were."""
        if self._play is None:
            raise IllegalMove("no episode yet: reset() first")
        self._arrived(self._engine.call(self._play.finish()))
        return self.fallbacks

    def result(self) -> EpisodeResult:
        """The episode's result, as ``chaosops run`` records it (once over)."""
        if self._play is None or not self._play.task.done():
            raise RuntimeError("the episode is not over: play or finish() it first")
        return self._play.task.result()

    @property
    def resolved(self) -> bool:
        return bool(self.env.state.resolved)

    def close(self) -> None:
        """Stop an episode still playing (nothing of it is kept), and close what
        the others opened on the engine's loop (an LLM policy's HTTP session;
        it opens another if played again)."""
        self._stop()
        given = self.others.values() if isinstance(self.others, Mapping) else [self.others]
        for policy in given:
            aclose = getattr(policy, "aclose", None)
            if callable(aclose):
                self._engine.call(aclose())

    def _stop(self) -> None:
        play, self.now = self._play, None
        if play is not None and not play.task.done():
            self._engine.call(play.stop())

    def _arrived(self, now: SeatTurn | None) -> SeatTurn:
        """Where the play now stands, given to the caller."""
        if now is None or now.done:
            result = self.result()  # raises what the play raised
            if now is None:
                raise RuntimeError(f"the episode failed before its first turn: {result.error}")
        self.now = now
        return now

"""Served episodes ("tables") and the clients' places at them ("seats").

A table is one episode played by the actors runtime in a task of the
server's event loop. Every role's policy asks the seat that claims the role,
if any, and the server's own policy otherwise; so a client's turn has a
deadline and a fallback like any policy's, and a second client can take over
roles the server was playing. A seat outlives the connection that opened it:
a client that reconnects with the seat's id finds its episode where it stood.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from actors import current_turn
from chaosops.agents.runner import arun_episode
from chaosops.agents.seated import WatchedEnvironment
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation
from chaosops.env.results import EpisodeResult
from chaosops.env.world_sim import Scenario

__all__ = ["RoleMaps", "Seat", "Table", "TableRules", "Tables", "Turn"]

Policy = Callable[[ChaosOpsObservation, AgentRole], Any]
RoleMaps = Callable[[Scenario], Mapping[AgentRole, Policy]]


class _Watched(WatchedEnvironment):
    """The world, keeping its last observation for the seats to show, and the
    action applied at each turn (a client's move, or what replaced it)."""

    applied: list[ChaosOpsAction | Mapping[str, Any]]
    on_over: Callable[[], None] | None = None  # told when a step ends the episode

    def reset(self, *args: Any, **kwargs: Any) -> ChaosOpsObservation:
        self.applied = []
        return super().reset(*args, **kwargs)

    def step(self, action: ChaosOpsAction | Mapping[str, Any]) -> ChaosOpsObservation:
        self.applied.append(action)
        observation = super().step(action)
        if observation.done and self.on_over is not None:
            self.on_over()
        return observation


@dataclass(slots=True)
class Turn:
    """A turn open for a client: its number, role and view, and the move awaited."""

    number: int
    role: AgentRole
    observation: ChaosOpsObservation
    move: asyncio.Future[ChaosOpsAction]


@dataclass(eq=False)
class Seat:
    """The roles one client plays at a table."""

    table: Table
    roles: frozenset[AgentRole]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pending: Turn | None = None  # the client's open turn
    last_role: AgentRole = AgentRole.SRE  # whose view an ended episode shows
    mark: float = 0.0  # the episode's reward when the client last saw it
    misses: int = 0  # turns in a row closed at their deadline
    closed: str | None = None  # why the seat no longer plays, if it does not
    attached: bool = True  # a session holds it

    async def ask(self, observation: ChaosOpsObservation, role: AgentRole) -> ChaosOpsAction:
        """The client's move for this turn (the runtime cancels it at the deadline)."""
        turn = Turn(observation.step, role, observation, asyncio.get_running_loop().create_future())
        self.pending, self.last_role = turn, role
        self.table.wake()
        try:
            move = await turn.move
        except asyncio.CancelledError:
            self.pending = None
            self._missed()
            raise
        self.pending, self.misses = None, 0
        return move

    def answer(self, turn: Turn, move: ChaosOpsAction) -> bool:
        """Give ``turn`` its move; False when its deadline closed it first."""
        if turn.move.done():
            return False
        turn.move.set_result(move)
        return True

    def applied(self, turn: Turn, move: ChaosOpsAction) -> bool:
        """Whether ``move`` is what the episode applied at ``turn`` (the deadline
        may close the turn after the move was given, before the runtime took it)."""
        applied = self.table.env.applied
        return turn.number < len(applied) and applied[turn.number] is move

    async def next_turn(self, after: int) -> None:
        """Until a turn after ``after`` is open for this client, or the episode
        ended, or the seat closed."""
        while not (self.closed or self.table.over):
            if self.pending is not None and self.pending.number > after:
                return
            await self.table.changed()

    def reward_since(self) -> float:
        """The episode's reward since the client last saw it; the client sees it now."""
        now = self.table.reward
        reward, self.mark = now - self.mark, now
        return reward

    def close(self, why: str) -> None:
        """The seat plays no more; its roles go back to the server's policies."""
        if self.closed is None:
            self.closed = why
            self.table.release(self)

    def _missed(self) -> None:
        self.misses += 1
        limit = self.table.rules.max_misses
        if self.table.over or limit is None or self.misses < limit:
            return
        self.close(
            f"CLIENT_TIMEOUT: missed {self.misses} turns in a row, each given "
            f"{self.table.rules.client_timeout} s; the session is closed"
        )


@dataclass(frozen=True, slots=True)
class TableRules:
    """How every table of a server plays: the server's policies per scenario,
    their deadlines, the clients' deadline and misses allowed in a row."""

    policies: RoleMaps
    deadlines: Mapping[AgentRole, float | None] = field(default_factory=dict)
    client_timeout: float | None = None
    max_misses: int | None = 3
    players: Mapping[AgentRole, Mapping[str, Any]] = field(default_factory=dict)
    """What plays each role clients leave, as the outputs record it (policy, model)."""
    fields: Mapping[str, Any] = field(default_factory=dict)  # the runtime's logs and metrics


class Table:
    """One served episode and the seats at it."""

    def __init__(self, scenario: Scenario, rules: TableRules, episode_id: str) -> None:
        self.scenario, self.rules, self.episode_id = scenario, rules, episode_id
        self.env = _Watched()
        # A client sees the end as soon as the world says it, not after the
        # runtime has wound the episode down and built its result.
        self.env.on_over = self.wake
        self.claims: dict[AgentRole, Seat] = {}
        self.played_by_clients: set[AgentRole] = set()
        self.seats: list[Seat] = []
        self.result: EpisodeResult | None = None
        self.done = False  # its play has ended
        self.stopped: str | None = None  # why it stopped unfinished, if it did
        self.task: asyncio.Task[None] | None = None  # its play, on the server's loop
        self.idle_since = time.monotonic()
        self._server = rules.policies(scenario)
        self._changed = anyio.Event()

    @property
    def over(self) -> bool:
        """The episode has ended: a step finished it, or its play ended."""
        last = self.env.observation
        return self.done or (last is not None and last.done)

    @property
    def reward(self) -> float:
        return self.env.state.cumulative_reward

    def seat(self, roles: frozenset[AgentRole]) -> Seat:
        """A seat for ``roles``, which no other seat claims."""
        seat = Seat(self, roles)
        self.seats.append(seat)
        for role in roles:
            self.claims[role] = seat
        self.played_by_clients |= roles
        return seat

    def release(self, seat: Seat) -> None:
        for role in seat.roles:
            if self.claims.get(role) is seat:
                del self.claims[role]
        self.wake()

    @property
    def open_seats(self) -> list[Seat]:
        return [seat for seat in self.seats if seat.closed is None]

    def timeouts(self, roles: frozenset[AgentRole]) -> dict[AgentRole | str, float | None]:
        """Each role's deadline, fixed for the episode: the clients' for the
        roles a client plays or may join, the server's own where it sets one."""
        client = self.rules.client_timeout
        return {
            role: client
            if role in roles or self.rules.deadlines.get(role) is None
            else self.rules.deadlines[role]
            for role in AgentRole
        }

    async def play(self, roles: frozenset[AgentRole], on_end: Callable[[Table], None]) -> None:
        """The episode, from reset to its end; ``on_end`` then sees the table."""
        players: dict[AgentRole | str, Any] = {role: self._player for role in AgentRole}
        try:
            self.result = await arun_episode(
                self.env, self.scenario, players, turn_timeout=self.timeouts(roles),
                fields=self.rules.fields, episode_id=self.episode_id,
            )  # fmt: skip
        finally:
            self.done = True
            self.wake()
        on_end(self)

    async def _player(self, observation: ChaosOpsObservation, role: AgentRole) -> Any:
        """Every role's policy: the seat's that claims it, else the server's.
        The turn records which (``played_by``: a client's seat may close, and
        the server's policy play its roles from then on)."""
        seat = self.claims.get(role)
        current_turn().annotate(played_by="client" if seat is not None else "server")
        if seat is not None:
            return await seat.ask(observation, role)
        policy = self._server.get(role)
        if policy is None:
            return ChaosOpsAction(role=role, action_type="noop")
        answer = policy(observation, role)
        return await answer if inspect.isawaitable(answer) else answer

    def wake(self) -> None:
        """Wake whoever waits for the table to change."""
        self._changed.set()
        self._changed = anyio.Event()

    async def changed(self) -> None:
        await self._changed.wait()


class Tables:
    """The server's open tables, by episode id, and each seat by its id."""

    def __init__(self, rules: TableRules, on_end: Callable[[Table], None]) -> None:
        self.rules = rules
        self._on_end = on_end
        self._tables: dict[str, Table] = {}
        self._seats: dict[str, Seat] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def open(self, scenario: Scenario, roles: frozenset[AgentRole], episode_id: str) -> Seat:
        """A new table for ``scenario``, its play started, and the client's seat."""
        table = Table(scenario, self.rules, episode_id)
        seat = self._add(table.seat(roles))
        self._tables[episode_id] = table
        # a task of the server's loop: the episode outlives the request that opened it
        table.task = task = asyncio.get_running_loop().create_task(table.play(roles, self._ended))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return seat

    def join(self, episode_id: str, roles: frozenset[AgentRole] | None) -> Seat:
        """A seat at an open table for ``roles`` (None: every role no client plays)."""
        table = self._tables.get(episode_id)
        if table is None or table.over:
            raise LookupError(f"no open episode {episode_id!r}")
        free = frozenset(role for role in AgentRole if role not in table.claims)
        wanted = free if roles is None else roles
        if taken := sorted(role.value for role in wanted - free):
            raise PermissionError(f"{', '.join(taken)} played by another client already")
        if not wanted:
            raise PermissionError("every role is played by a client already")
        return self._add(table.seat(wanted))

    def has(self, episode_id: str) -> bool:
        return episode_id in self._tables

    def seat(self, seat_id: str) -> Seat | None:
        return self._seats.get(seat_id)

    def leave(self, seat: Seat, why: str) -> None:
        """The client leaves its seat; a table no client plays any more stops."""
        seat.close(why)
        self._seats.pop(seat.id, None)
        if not seat.table.open_seats:
            self._drop(seat.table, "no client plays it any more")

    def detach(self, seat: Seat) -> None:
        """The client's connection is gone; the seat waits for it to come back."""
        seat.attached = False
        seat.table.idle_since = time.monotonic()

    def reap(self, idle_s: float | None) -> None:
        """Drop the tables no client has been attached to for ``idle_s``."""
        if idle_s is None:
            return
        now = time.monotonic()
        for table in list(self._tables.values()):
            if not any(s.attached for s in table.open_seats) and now - table.idle_since > idle_s:
                self._drop(table, f"no client was connected to it for {idle_s:g} s")

    async def aclose(self) -> None:
        """Stop every table (the server is stopping): nothing unfinished is
        written; an episode that is over is let finish, and written."""
        for table in list(self._tables.values()):
            self._drop(table, "the server is stopping")
        if self._tasks:
            await asyncio.wait(self._tasks)

    def _add(self, seat: Seat) -> Seat:
        self._seats[seat.id] = seat
        return seat

    def _drop(self, table: Table, why: str = "") -> None:
        """The table out of the registry; one still playing stops, unwritten
        (one that is over winds down, and is written)."""
        self._tables.pop(table.episode_id, None)
        for seat in table.seats:
            self._seats.pop(seat.id, None)
        # a session may still hold its seat, which holds the table: no way back,
        # so that the table is freed with the seat, not by a full collection
        table.seats, table.claims = [], {}
        table.env.on_over = None
        if not table.over and table.task is not None:
            table.stopped = why
            table.task.cancel()

    def _ended(self, table: Table) -> None:
        self._drop(table)
        self._on_end(table)

"""ChaosOps as an OpenEnv ``Environment``: a session's client plays some roles
of an episode, other clients or the server's policies the others.

``reset`` opens an episode (a scenario, or a task of the Task API by its
split and index, and the roles the client plays, all four by default), joins
an open one (``join``: its id) to play roles the server was playing, or comes
back to a seat (``session``: its id) after a lost connection. Each
observation is for the client's role whose turn it is, names that turn, and
carries the reward earned since the client's last step.
A step names the turn it answers: a step for another turn is refused and
never applied, as is a move that is no legal move of the view (checked as
LLM answers are). The episodes themselves are :mod:`chaosops.serve.tables`.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State
from openenv.core.env_server.types import EnvironmentMetadata
from pydantic import ConfigDict, Field

from actors import new_episode_id
from chaosops import __version__
from chaosops.agents.llm.answers import describe
from chaosops.env.failures import DEFAULT_FAILURE
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, RoleView
from chaosops.env.rules import view_problem
from chaosops.env.world_sim import Scenario
from chaosops.scenarios import choose_scenario

from .tables import Seat, Tables
from .tasks import TaskSplits, scenario_of_task
from .tools import session_tools

__all__ = ["ChaosOpsServerEnv", "StepRefused", "TurnAction", "TurnObservation", "TurnState"]


class StepRefused(ValueError):
    """A reset or step the server does not apply; its message opens with a code
    (``NO_EPISODE``, ``EPISODE_OVER``, ``WRONG_TURN``, ``ILLEGAL_MOVE``,
    ``UNKNOWN_ROLE``, ``BAD_SCENARIO``, ``NO_SUCH_EPISODE``, ``ROLE_TAKEN``,
    ``EPISODE_ID_TAKEN``, ``UNKNOWN_SESSION``, ``SESSION_IN_USE``,
    ``SESSION_CLOSED``, ``EPISODE_STOPPED``, ``SYNC_CALL``, ``BAD_RESET``, ``BAD_ACTION``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class TurnAction(Action):
    """One move of the client's role, answering the turn it names.

    The fields take any JSON here and are checked by the step itself, so that
    a wrong one gets a line naming it (``BAD_ACTION``) rather than OpenEnv's
    bare "Invalid message"; the schema says what each accepts."""

    model_config = ConfigDict(extra="allow")

    turn: Any = Field(default=None, json_schema_extra={"type": "integer"},
                      description="the turn this move answers: the observation's turn")  # fmt: skip
    action_type: Any = Field(
        default=None, json_schema_extra={"type": "string", "enum": [k.value for k in ActionType]},
        description="restart, rollback, scale, flag_rogue, ...",
    )  # fmt: skip
    target: Any = Field(default=None, json_schema_extra={"type": ["string", "null"]},
                        description="a service or a fleet agent")  # fmt: skip
    args: Any = Field(default_factory=dict, json_schema_extra={"type": "object"},
                      description="the action's arguments")  # fmt: skip


class TurnObservation(Observation):
    """What the client's role whose turn it is sees."""

    episode_id: str = ""
    session: str = Field(default="", description="the seat id: reset(session=...) comes back")
    turn: int = Field(default=0, description="the turn to answer (the steps applied so far)")
    role: str = Field(default="", description="the client's role to move")
    terminated: bool = Field(default=False, description="ended resolved (a terminal state)")
    truncated: bool = Field(default=False, description="cut at max_steps unresolved")
    text: str = Field(default="", description="the view rendered for a model, with its moves")
    message: str = Field(default="", description="the last event, as the world words it")
    view: RoleView | None = Field(default=None, description="the role's view, as data")


class TurnState(State):
    """The episode as the server holds it (no hidden ground truth)."""

    roles: list[str] = Field(default_factory=list)
    session: str = ""
    turn: int = Field(default=-1, description="the client's open turn (-1: none)")
    clients: list[str] = Field(default_factory=list, description="the roles clients play now")
    done: bool = False
    cumulative_reward: float = 0.0


class ChaosOpsServerEnv(TaskSplits, Environment[TurnAction, TurnObservation, TurnState]):
    """One session: a client's seat at a table of ``tables``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, tables: Tables, idle_timeout: float | None = None) -> None:
        super().__init__()
        self._tables = tables
        self._idle_timeout = idle_timeout  # a table no client is attached to is dropped after it
        self._seat: Seat | None = None

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        failure_type: str = DEFAULT_FAILURE.value,
        difficulty: str = "easy",
        max_steps: int | None = None,
        roles: list[str] | None = None,
        join: str | None = None,
        session: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> TurnObservation:
        if kwargs:
            unknown = ", ".join(map(repr, sorted(kwargs)))
            raise StepRefused("BAD_RESET", f"unknown field {unknown}; reset takes {_RESET_FIELDS}")
        if episode_id is not None and (not isinstance(episode_id, str) or
                                       not 0 < len(episode_id) <= _MAX_ID):  # fmt: skip
            raise StepRefused(
                "BAD_RESET", f"episode_id {episode_id!r:.40}: 1 to {_MAX_ID} characters"
            )
        self._tables.reap(self._idle_timeout)
        played = _roles(roles)
        if session is not None:
            seat = self._come_back(session)
        elif join is not None:
            seat = self._join(join, played)
        else:
            scenario = _scenario(failure_type, difficulty, seed, max_steps, split, index)
            seat = self._open(scenario, played, episode_id)
        self._seat = seat
        await seat.next_turn(after=-1)
        _check_waited(seat)
        return self._observation(seat)

    async def step_async(
        self, action: TurnAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TurnObservation:
        _check_action(action)
        seat = self._playing()
        turn = seat.pending
        if turn is None or action.turn != turn.number:
            raise StepRefused("WRONG_TURN", _wrong_turn(action.turn, seat))
        move = ChaosOpsAction(role=turn.role, action_type=action.action_type,
                              target=action.target, args=action.args)  # fmt: skip
        if (problem := view_problem(move, turn.observation)) is not None:
            raise StepRefused("ILLEGAL_MOVE", problem)
        closed = f"turn {turn.number} closed at its deadline before this step came"
        if not seat.answer(turn, move):
            raise StepRefused("WRONG_TURN", closed)
        await seat.next_turn(after=turn.number)
        _check_waited(seat)
        if not seat.applied(turn, move):
            raise StepRefused("WRONG_TURN", f"{closed}; reset(session=...) gives the open turn")
        return self._observation(seat)

    async def play_open_turn(self, move: dict[str, Any]) -> TurnObservation:
        """``move`` (``action_type``, ``target``, ``args``) as the step of the
        session's open turn: what an MCP tool call plays."""
        pending = self._playing().pending
        turn = None if pending is None else pending.number
        return await self.step_async(TurnAction(turn=turn, **move))

    def current_observation(self) -> TurnObservation:
        """The session's observation now, its open turn's if it has one."""
        seat = self._seat
        if seat is None:
            raise StepRefused("NO_EPISODE", "no episode yet: open_episode (or reset) first")
        return self._observation(seat)

    @cached_property
    def mcp_server(self) -> Any:
        """The session's moves as MCP tools (:mod:`chaosops.serve.tools`), which
        OpenEnv serves on ``/mcp``."""
        return session_tools(self)

    def reset(self, *args: Any, **kwargs: Any) -> TurnObservation:
        raise StepRefused("SYNC_CALL", "a served episode plays on the server's loop: reset_async")

    def step(self, *args: Any, **kwargs: Any) -> TurnObservation:
        raise StepRefused("SYNC_CALL", "a served episode plays on the server's loop: step_async")

    def _open(
        self, scenario: Scenario, played: frozenset[AgentRole] | None, episode_id: str | None
    ) -> Seat:
        if episode_id is not None and self._tables.has(episode_id):
            raise StepRefused("EPISODE_ID_TAKEN", f"episode {episode_id!r} is open already")
        roles = played if played is not None else frozenset(AgentRole)
        self._leave("reset for another episode")
        return self._tables.open(scenario, roles, episode_id or new_episode_id())

    def _join(self, episode_id: str, played: frozenset[AgentRole] | None) -> Seat:
        try:
            seat = self._tables.join(episode_id, played)
        except LookupError as exc:
            raise StepRefused("NO_SUCH_EPISODE", str(exc.args[0])) from None
        except PermissionError as exc:
            raise StepRefused("ROLE_TAKEN", str(exc)) from None
        self._leave("joined another episode")
        return seat

    def _come_back(self, session: str) -> Seat:
        seat = self._tables.seat(session)
        if seat is None:
            raise StepRefused("UNKNOWN_SESSION", f"no open session {session!r}")
        if seat is self._seat:
            return seat
        if seat.attached:
            raise StepRefused("SESSION_IN_USE", f"session {session!r} has a connection")
        if seat.closed is not None:
            raise StepRefused("SESSION_CLOSED", seat.closed)
        self._leave("reset for another episode")
        seat.attached = True
        return seat

    def _playing(self) -> Seat:
        """The seat a step plays, or the refusal saying why there is none."""
        seat = self._seat
        if seat is None:
            raise StepRefused("NO_EPISODE", "no episode yet: reset first")
        if seat.closed is not None:
            raise StepRefused("SESSION_CLOSED", seat.closed)
        if seat.table.over:
            raise StepRefused("EPISODE_OVER", "the episode is over: reset to start another")
        return seat

    def _leave(self, why: str) -> None:
        if self._seat is not None:
            self._tables.leave(self._seat, why)
            self._seat = None

    def _observation(self, seat: Seat) -> TurnObservation:
        table = seat.table
        turn = None if table.over else seat.pending
        obs = turn.observation if turn is not None else table.env.observation
        assert obs is not None
        role = turn.role if turn is not None else seat.last_role
        done, resolved = table.over, table.env.state.resolved
        return TurnObservation(
            done=done, reward=seat.reward_since(), episode_id=table.episode_id, session=seat.id,
            turn=obs.step, role=role.value, terminated=done and resolved,
            truncated=done and not resolved, text=describe(obs, role),
            message=obs.message, view=obs.view,
        )  # fmt: skip

    @property
    def state(self) -> TurnState:
        seat = self._seat
        if seat is None:
            return TurnState()
        state = seat.table.env.state
        return TurnState(
            episode_id=state.episode_id, step_count=state.step_count,
            roles=sorted(r.value for r in seat.roles), session=seat.id,
            turn=-1 if seat.pending is None else seat.pending.number,
            clients=sorted(r.value for r in seat.table.claims),
            done=seat.table.over, cumulative_reward=state.cumulative_reward,
        )  # fmt: skip

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="chaosops", version=__version__,
            description="A production-incident simulator: SRE, Oversight, Dev and Manager take "
            "turns to diagnose and fix an outage; a client plays some roles, other clients or "
            "the server's policies the others.",
        )  # fmt: skip

    def close(self) -> None:
        """The connection is gone: the seat waits for its client to come back."""
        if self._seat is not None:
            self._tables.detach(self._seat)
            self._seat = None


def _scenario(
    failure_type: str,
    difficulty: str,
    seed: int | None,
    max_steps: int | None,
    split: str | None,
    index: int | None,
) -> Scenario:
    """The scenario a reset names: a task of the Task API (``split`` and
    ``index``, nothing else), or its fields."""
    try:
        if split is None and index is None:
            seed = 0 if seed is None else seed
            return choose_scenario(failure_type=failure_type, difficulty=difficulty,
                                   seed=seed, max_steps=max_steps)  # fmt: skip
        fields = (failure_type, difficulty, seed, max_steps)
        if fields != (DEFAULT_FAILURE.value, "easy", None, None):
            raise ValueError("a task (split and index) names its scenario: give no other field")
        return scenario_of_task(split, index)
    except ValueError as exc:
        raise StepRefused("BAD_SCENARIO", str(exc)) from None


_MAX_ID = 128  # an episode id names a folder's records: bounded
_RESET_FIELDS = (
    "failure_type, difficulty, seed, max_steps (or a task: split and index), roles, "
    "episode_id, join and session"
)


def _roles(roles: list[str] | None) -> frozenset[AgentRole] | None:
    names = [role.value for role in AgentRole]
    if roles is not None and (
        not isinstance(roles, list) or not all(isinstance(r, str) for r in roles)
    ):
        raise StepRefused(
            "UNKNOWN_ROLE", f'roles {roles!r:.60}: a list of role names, e.g. ["sre"]'
        )
    if unknown := sorted(set(roles or ()) - set(names)):
        raise StepRefused("UNKNOWN_ROLE", f"{unknown}: the roles are {', '.join(names)}")
    if roles is not None and not roles:
        raise StepRefused(
            "UNKNOWN_ROLE", "roles []: name at least one role, or leave it out for all four"
        )
    return None if roles is None else frozenset(AgentRole(r) for r in roles)


def _check_action(action: TurnAction) -> None:
    """A step's fields as the schema lists them, or BAD_ACTION naming the first that is not."""
    fields = "turn, action_type, target and args"
    if extra := sorted(action.model_extra or {}):
        raise StepRefused("BAD_ACTION", f"unknown field {extra[0]!r}; a step takes {fields}")
    if not isinstance(action.turn, int) or isinstance(action.turn, bool):
        got = "missing" if action.turn is None else f"{action.turn!r:.40}"
        raise StepRefused("BAD_ACTION", f"turn {got}: the observation's turn, an integer")
    kinds = [kind.value for kind in ActionType]
    if action.action_type not in kinds:
        raise StepRefused(
            "BAD_ACTION", f"action_type {action.action_type!r:.40}: one of {', '.join(kinds)}"
        )
    if action.target is not None and not isinstance(action.target, str):
        raise StepRefused("BAD_ACTION", f"target {action.target!r:.40}: a name, or null")
    if not isinstance(action.args, dict):
        raise StepRefused("BAD_ACTION", f"args {action.args!r:.40}: an object of arguments")


def _check_waited(seat: Seat) -> None:
    """After a wait: the refusal saying why the client has no turn to play, if it has none."""
    if seat.closed is not None:
        raise StepRefused("SESSION_CLOSED", seat.closed)
    if seat.table.stopped is not None:
        why = seat.table.stopped
        raise StepRefused("EPISODE_STOPPED", f"the episode stopped unfinished: {why}")


def _wrong_turn(turn: int, seat: Seat) -> str:
    if seat.pending is None:
        return f"this step answers turn {turn}, and no turn is open for you now"
    return (
        f"this step answers turn {turn}, the open turn is {seat.pending.number}; "
        "reset(session=...) gives its observation"
    )

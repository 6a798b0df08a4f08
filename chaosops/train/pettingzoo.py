"""ChaosOps as a PettingZoo AEC environment (the ``pettingzoo`` extra).

The four roles are the agents, in turn order. An agent observes a dict of
gymnasium spaces: ``observation`` (what its view shows, as numbers: each
service's metrics, health and alert, its log lines counted by level, the
fleet agents whose records it shows, the step and the budget) and
``action_mask`` (the moves of :data:`MOVES` legal in that view, judged as an
LLM's answer is). An action is an index into :data:`MOVES`. Every agent is
given each step's reward (the team's, an unresolved end's penalty on the last
step), so an agent's rewards sum to the episode's reward. A resolved incident
terminates the episode; running out of steps truncates it. A masked move is
not applied: the turn plays the fallback (``noop``), as the runtime plays an
answer that is no legal move, so that no illegal move scores better than a
legal ``noop``. With ``text=True`` the agent to move finds its view as text in
``infos[agent]["text"]``, for LLM agents (rendering it costs most of a step,
so it is made only when asked for).

The episode is played by the runtime's engine, as ``chaosops run`` plays one
(:class:`~chaosops.agents.seated.SeatedEpisode`): the agents are its seats.
``others`` (a map from role to a policy or a scripted policy's name) plays
roles that are then no agents, each turn under ``turn_timeout`` with the
runtime's fallback; every agent's reward then counts the others' moves too.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from functools import lru_cache
from numbers import Integral
from types import MappingProxyType
from typing import Any, ClassVar

from chaosops._extras import require
from chaosops.agents.adapters import TurnTimeoutArg
from chaosops.agents.llm.answers import describe
from chaosops.agents.policies import Policy
from chaosops.agents.seated import SeatedEpisode
from chaosops.env.failures import DEFAULT_FAILURE
from chaosops.env.models import (
    FLEET_AGENT_NAMES,
    SERVICE_NAMES,
    AgentRole,
    ChaosOpsAction,
    ChaosOpsObservation,
    FailureType,
    ServiceHealth,
)
from chaosops.env.rules import FAILURE_NAMES, services_of, view_problem
from chaosops.scenarios import choose_scenario

__all__ = ["MOVES", "ChaosOpsAEC", "aec_env"]

gymnasium = require("gymnasium", "pettingzoo", "chaosops.train.pettingzoo")
np = require("numpy", "pettingzoo", "chaosops.train.pettingzoo")
AECEnv = require("pettingzoo", "pettingzoo", "chaosops.train.pettingzoo").AECEnv

SCALE_TO = (2, 3, 5)
STATUS_MESSAGE = "status: investigating"

MOVES: tuple[dict[str, Any], ...] = (
    {"action_type": "noop"},
    {"action_type": "escalate"},
    {"action_type": "resolve"},
    *({"action_type": "restart", "target": s} for s in SERVICE_NAMES),
    *({"action_type": "rollback", "target": s} for s in SERVICE_NAMES),
    *(
        {"action_type": "scale", "target": s, "args": {"replicas": n}}
        for s in SERVICE_NAMES
        for n in SCALE_TO
    ),
    *({"action_type": "flag_rogue", "target": a} for a in FLEET_AGENT_NAMES),
    *({"action_type": "identify_root_cause", "args": {"failure_type": f}} for f in FAILURE_NAMES),
    {"action_type": "communicate", "args": {"message": STATUS_MESSAGE, "to": "all"}},
)
"""The moves an action indexes: each kind, with the targets and values it may take."""

_NOOP = 0  # MOVES[0], the fallback of a masked move
_SERVICE_ROW = MappingProxyType({name: row for row, name in enumerate(SERVICE_NAMES)})
_HEALTH = MappingProxyType({None: 0, **{health: i + 1 for i, health in enumerate(ServiceHealth)}})
_METRIC_HIGH = np.array([100.0, 1e6, 1e6, 1.0, 1000.0], dtype=np.float32)  # cpu..replicas
LOG_LEVELS = ("INFO", "WARN", "ERROR")
"""The columns of ``logs``: a view's log lines of each service, counted by level."""
_LOGS_SHOWN = 6  # a view shows the last six public logs (docs/world.md)


def _spaces() -> tuple[Any, Any]:  # gymnasium's Dict and Discrete spaces
    services = len(SERVICE_NAMES)
    view = gymnasium.spaces.Dict(
        {
            "metrics": gymnasium.spaces.Box(
                0.0, np.tile(_METRIC_HIGH, (services, 1)), dtype=np.float32
            ),
            "health": gymnasium.spaces.MultiDiscrete([len(_HEALTH)] * services),
            "alerts": gymnasium.spaces.MultiBinary(services),
            "logs": gymnasium.spaces.Box(
                0, _LOGS_SHOWN, shape=(services, len(LOG_LEVELS)), dtype=np.int64
            ),
            "fleet": gymnasium.spaces.MultiBinary(len(FLEET_AGENT_NAMES)),
            "steps": gymnasium.spaces.Box(0.0, 1e4, shape=(2,), dtype=np.float32),
        }
    )
    observation = gymnasium.spaces.Dict(
        {"observation": view, "action_mask": gymnasium.spaces.MultiBinary(len(MOVES))}
    )
    return observation, gymnasium.spaces.Discrete(len(MOVES))


@lru_cache(maxsize=256)
def _legal(role: AgentRole, shown: frozenset[str]) -> Any:
    """The mask of a role's view: the judge's verdict depends only on the role
    and the services the view shows, so each pair is judged once."""
    probe = ChaosOpsObservation(
        view={"role": role, "visible_alerts": [], "visible_metrics": {}},
        step=0, turn_role=role,
    )  # fmt: skip
    mask = np.zeros(len(MOVES), dtype=np.int8)
    for i, move in enumerate(MOVES):
        action = ChaosOpsAction(role=role, **move)
        mask[i] = view_problem(action, probe, services=shown) is None
    mask.flags.writeable = False
    return mask


def aec_env(**kwargs: Any) -> ChaosOpsAEC:
    """A ChaosOps AEC environment (see :class:`ChaosOpsAEC` for the keywords)."""
    return ChaosOpsAEC(**kwargs)


class ChaosOpsAEC(AECEnv):  # type: ignore[misc,valid-type] # pettingzoo's, loaded by require()
    """ChaosOps, its four roles taking turns.

    ``failure_type`` and ``difficulty`` choose the scenario of every reset
    (``failure_type`` None: drawn from the reset's seed); ``reset(seed,
    options)`` takes the same keys in ``options``, and ``max_steps``. ``text``
    puts the acting agent's view, rendered for an LLM, in its ``infos``.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "chaosops_v0", "render_modes": ["ansi"], "is_parallelizable": False,
    }  # fmt: skip

    def __init__(
        self,
        failure_type: str | None = None,
        difficulty: str = "easy",
        max_steps: int | None = None,
        render_mode: str | None = None,
        text: bool = False,
        others: Mapping[str, str | Policy] | None = None,
        turn_timeout: TurnTimeoutArg = None,
    ) -> None:
        super().__init__()
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode={render_mode!r}: None or 'ansi' (the view as text)")
        self.defaults = {"failure_type": failure_type, "difficulty": difficulty,
                         "max_steps": max_steps}  # fmt: skip
        # the scenario's fields are checked now, as a suite entry's are
        choose_scenario(
            failure_type=failure_type or DEFAULT_FAILURE.value,
            difficulty=difficulty, max_steps=max_steps,
        )  # fmt: skip
        self.render_mode = render_mode
        self.text = text
        others = {AgentRole(role): policy for role, policy in (others or {}).items()}
        self.possible_agents = [role.value for role in AgentRole if role not in others]
        observation, action = _spaces()
        self.observation_spaces = dict.fromkeys(self.possible_agents, observation)
        self.action_spaces = dict.fromkeys(self.possible_agents, action)
        seats = frozenset(AgentRole(agent) for agent in self.possible_agents)
        self.episode = SeatedEpisode(others, seats, turn_timeout=turn_timeout)
        self.env = self.episode.env  # the world, read between the seats' turns
        self._mark = 0.0  # the episode's reward at the last step
        self.cumulative_rewards: dict[str, float] = {}
        self._observation: ChaosOpsObservation | None = None
        self._allowed: Any = None  # the acting agent's mask: judged once an observation

    def observation_space(self, agent: str) -> Any:  # a gymnasium space
        return self.observation_spaces[self._agent(agent)]

    def action_space(self, agent: str) -> Any:  # a gymnasium space
        return self.action_spaces[self._agent(agent)]

    def _agent(self, agent: Any) -> str:
        if agent not in self.possible_agents:
            raise ValueError(
                f"agent {agent!r:.40}: the agents are {', '.join(self.possible_agents)}"
            )
        return str(agent)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        given = _options(options, self.defaults)
        chosen = {**self.defaults, **given}
        if seed is not None and (not isinstance(seed, Integral) or isinstance(seed, bool)):
            raise ValueError(f"seed={seed!r:.40}: an int, or None for a random one")
        seed = random.randrange(2**31) if seed is None else int(seed)
        failure = chosen["failure_type"] or random.Random(seed).choice(list(FailureType)).value
        scenario = choose_scenario(
            failure_type=failure, difficulty=chosen["difficulty"], seed=seed,
            max_steps=chosen["max_steps"],
        )  # fmt: skip
        opening = self.episode.start(scenario)
        first = self._now(opening.observation)
        self._mark = opening.reward
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {agent: {} for agent in self.agents}
        self.agent_selection = first.turn_role.value
        self.infos[self.agent_selection] = self._info()

    def observe(self, agent: str) -> dict[str, Any]:
        obs = self._started()
        self._agent(agent)
        # the acting agent's view is the observation's: projecting it again costs a step
        own_turn = agent == self.agent_selection and not obs.done
        view = obs.view if own_turn else self.env.world.project_view(agent)
        shown = [view.visible_metrics.get(name) for name in SERVICE_NAMES]
        values = [
            (0, 0, 0, 0, 0) if m is None
            else (m.cpu_pct, m.memory_mb, m.latency_ms, m.error_rate, m.replicas)
            for m in shown
        ]  # fmt: skip
        alerted = {str(alert.service) for alert in view.visible_alerts}
        acting = {record.agent_name for record in view.visible_fleet_actions}
        state = self.env.state
        logs = np.zeros((len(SERVICE_NAMES), len(LOG_LEVELS)), dtype=np.int64)
        for line in view.visible_logs:
            if line.level in LOG_LEVELS:
                logs[_SERVICE_ROW[line.service], LOG_LEVELS.index(line.level)] += 1
        return {
            "observation": {
                # one clip for the table: a clip a row costs more than the step
                "metrics": np.clip(np.array(values, dtype=np.float32), 0.0, _METRIC_HIGH),
                "health": np.array([_HEALTH[m and m.health] for m in shown], dtype=np.int64),
                "alerts": np.array([s in alerted for s in SERVICE_NAMES], dtype=np.int8),
                "logs": logs,
                "fleet": np.array([a in acting for a in FLEET_AGENT_NAMES], dtype=np.int8),
                "steps": np.array([state.step_count, state.max_steps], dtype=np.float32),
            },
            "action_mask": self._mask(agent),
        }

    def _mask(self, agent: str) -> Any:  # a numpy array of int8
        if self._allowed is None or agent != self.agent_selection:
            return np.zeros(len(MOVES), dtype=np.int8)
        return self._allowed.copy()

    def _now(self, obs: ChaosOpsObservation) -> ChaosOpsObservation:
        """``obs`` becomes the current observation, with its mover's legal moves."""
        self._observation = obs
        self._allowed = None if obs.done else _legal(obs.turn_role, services_of(obs))
        return obs

    def _started(self) -> ChaosOpsObservation:
        if self._observation is None:
            raise ValueError("no episode yet: call reset() before step(), observe() or last()")
        return self._observation

    def _info(self) -> dict[str, Any]:
        if not self.text:
            return {}
        return {"text": describe(self._started(), AgentRole(self.agent_selection))}

    def step(self, action: Any) -> None:
        self._started()
        if not self.agents:
            raise ValueError("every agent's episode is over: reset() to start another")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._remove(agent, action)
            return
        index = _index(action)
        move = MOVES[index if self._allowed[index] else _NOOP]
        self.cumulative_rewards[agent] = 0.0
        now = self.episode.play(ChaosOpsAction(role=agent, **move))
        obs = self._now(now.observation)
        # the others' moves since, and an unresolved end's penalty too
        reward, self._mark = now.reward - self._mark, now.reward
        self.rewards = dict.fromkeys(self.agents, reward)
        for name in self.agents:
            self.cumulative_rewards[name] += reward
        self.infos = {name: {} for name in self.agents}
        if obs.done:
            resolved = self.env.state.resolved
            self.terminations = dict.fromkeys(self.agents, resolved)
            self.truncations = dict.fromkeys(self.agents, not resolved)
        self.agent_selection = self._next_agent(obs.turn_role)
        if not obs.done:
            self.infos[self.agent_selection] = self._info()

    def _next_agent(self, role: AgentRole) -> str:
        """``role``, or once over (when the next role may be one the others
        play) the first agent after it in turn order."""
        order = [r.value for r in AgentRole]
        start = order.index(role.value)
        return next(name for name in order[start:] + order[:start] if name in self.agents)

    def _remove(self, agent: str, action: Any) -> None:
        """An ended agent's step: it leaves, and the next agent still in follows."""
        if action is not None:
            raise ValueError(f"{agent}'s episode is over: its only action is None")
        position = self.agents.index(agent)
        self.agents.remove(agent)
        for table in (self.rewards, self.cumulative_rewards, self.terminations,
                      self.truncations, self.infos):  # fmt: skip
            del table[agent]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        if self.agents:
            self.agent_selection = self.agents[position % len(self.agents)]

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._started()
        agent = self.agent_selection
        return (
            self.observe(agent) if observe else None,
            self.cumulative_rewards[agent],
            self.terminations[agent],
            self.truncations[agent],
            self.infos[agent],
        )

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._observation is None:
            return None
        return describe(self._observation, AgentRole(self.agent_selection))

    def close(self) -> None:
        self.episode.close()
        self._observation = self._allowed = None


def _options(options: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """The scenario keys of a reset's ``options``; one ValueError for what is no
    such key. (PettingZoo's api_test passes ``{"options": 1}``, left alone.)"""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"options={options!r:.40}: a dict of {', '.join(defaults)}, or None")
    if unknown := sorted(k for k in options if k not in defaults and k != "options"):
        raise ValueError(f"options: no key {unknown[0]!r}; the keys are {', '.join(defaults)}")
    return {k: v for k, v in options.items() if k in defaults}


def _index(action: Any) -> int:
    """``action`` as an index of :data:`MOVES`, or one ValueError saying what is."""
    if isinstance(action, Integral) and not isinstance(action, bool):
        if 0 <= int(action) < len(MOVES):
            return int(action)
    raise ValueError(
        f"action {action!r:.40} is no move: an action is an int from 0 to {len(MOVES) - 1}, "
        "an index of chaosops.train.pettingzoo.MOVES (None only once the agent's episode is over)"
    )

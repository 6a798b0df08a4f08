"""The world as the ``actors`` runtime plays it: the fallback, what counts as
an action, what the log says of a turn and of an episode's end, role maps and
deadlines per scenario, and the recorder of an episode's steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import actors
from chaosops.env.environment import DEFAULT_TURN_ORDER
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction
from chaosops.env.results import EpisodeStep
from chaosops.env.world_sim import Scenario

PolicyMap: TypeAlias = Mapping[AgentRole | str, actors.Policy]
"""Role -> policy; roles not in it play noop."""

Policies: TypeAlias = PolicyMap | Callable[[Scenario], PolicyMap]
"""A role map shared by every episode, or a factory building one per scenario."""

TurnTimeoutArg: TypeAlias = (
    float | Mapping[AgentRole | str, float | None] | Callable[[Scenario], Any] | None
)
"""Seconds for every turn, per role (roles not named have no deadline), a
function of the scenario returning either, or None (no deadline)."""


def noop(role: Any) -> ChaosOpsAction:
    # The fallback of every timed-out or failed turn.
    return ChaosOpsAction(role=role, action_type=ActionType.NOOP)


def is_action(value: object) -> bool:
    # The type, and the fields the environment reads: a model built without
    # validation (model_construct) may hold anything, and would fail the
    # environment (ending the episode) instead of costing its turn.
    # Runs on every reply: the three fields a bad value breaks the step with,
    # read straight from __dict__ (the role is overwritten by the step; the
    # target is rendered and looked up, so a str or None; the args' values
    # are converted by the world as it reads them).
    if not isinstance(value, ChaosOpsAction):
        return False
    fields = value.__dict__
    try:
        target = fields["target"]
        return (
            type(fields["action_type"]) is ActionType
            and type(fields["args"]) is dict
            and (target is None or isinstance(target, str))
        )
    except KeyError:  # model_construct() without them
        return False


def describe_turn(record: actors.TurnRecord) -> dict[str, Any]:
    # The models' field values straight from their __dict__: an attribute of
    # a pydantic model is a slow lookup (models define __getattr__), and this
    # runs for every logged turn.
    action = record.action.__dict__
    try:
        step = record.next_observation.__dict__["step"]
    except (AttributeError, KeyError):  # an env_factory's own observation type
        step = getattr(record.next_observation, "step", None)
    return {
        "step": step,
        "action_type": action["action_type"],
        "target": action["target"],
        "args": action["args"],
    }


def describe_finish(env: Any, trace: actors.EpisodeTrace) -> dict[str, Any]:
    state = final_state(env, trace)
    if state is None:
        return {"resolved": False, "final_step": 0, "cumulative_reward": 0.0}
    return {
        "resolved": state.resolved,
        "final_step": state.step_count,
        "cumulative_reward": state.cumulative_reward,
    }


def final_state(env: Any, trace: actors.EpisodeTrace) -> Any:
    """The environment's state at the episode's end; None where the episode
    never started (reset failed: a reused environment still holds the
    previous episode's state, which neither the result nor the log may report)."""
    if trace.final_observation is None:
        return None
    try:
        return env.state
    except Exception:  # an environment with no state to read
        return None


class Unbuilt:
    """An environment that ``env_factory`` failed to build: its ``reset``
    raises that failure, so that the episode fails like any other whose
    environment broke (status ``failed``, logged) and the batch goes on."""

    turn_order = DEFAULT_TURN_ORDER

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def reset(self, **_: Any) -> Any:
        raise self.exc

    def step(self, action: Any) -> Any:  # pragma: no cover - reset always raised
        raise self.exc


_ROLES_ACCEPTED = ", ".join(r.value for r in AgentRole)


def role_of(role: Any, where: str) -> AgentRole:
    try:
        return AgentRole(role)
    except ValueError:
        raise ValueError(f"unknown role {role!r} in {where}; roles are {_ROLES_ACCEPTED}") from None


def role_map(policies: PolicyMap) -> dict[AgentRole, actors.Policy]:
    if not isinstance(policies, Mapping):
        raise TypeError(
            f"the policies must be a mapping role -> policy, got {policies!r:.80}; "
            "to play one policy for every role: dict.fromkeys(AgentRole, policy)"
        )
    if all(type(role) is AgentRole for role in policies):
        table = dict(policies)
    else:
        table = {role_of(role, "the policy map"): policy for role, policy in policies.items()}
    for role, policy in table.items():
        if not callable(policy):
            raise TypeError(
                f"the policy for role {role.value!r} is {policy!r:.80}, not a callable "
                "policy(observation, role) (see chaosops.agents.policies)"
            )
    return table  # type: ignore[return-value]


def timeouts_of(turn_timeout: TurnTimeoutArg, scenario: Scenario) -> actors.TurnTimeout:
    given: Any = turn_timeout(scenario) if callable(turn_timeout) else turn_timeout
    if isinstance(given, Mapping):
        return {role_of(role, "turn_timeout"): seconds for role, seconds in given.items()}
    return given


def role_map_of(policies: Policies, scenario: Scenario) -> PolicyMap:
    """The role map of one scenario: ``policies`` itself, or what the factory makes."""
    if not callable(policies) or isinstance(policies, Mapping):
        return policies
    table = policies(scenario)
    if not isinstance(table, Mapping):
        raise TypeError(
            f"the policies factory {policies!r:.80} returned {table!r:.80} for "
            f"scenario {scenario.failure_type.value} (seed {scenario.seed}), not a mapping "
            "role -> policy"
        )
    return table


def timeout_field(turn_timeout: TurnTimeoutArg) -> Any:
    if callable(turn_timeout):
        return "per_scenario"
    if isinstance(turn_timeout, Mapping):
        return {str(getattr(k, "value", k)): v for k, v in turn_timeout.items()}
    return turn_timeout


def recorder(steps: list[EpisodeStep]) -> Callable[[Any, actors.TurnRecord], None]:
    """The ``after_step`` hook appending each step to ``steps`` as it is applied."""
    add_step = steps.append

    def after_step(env: Any, r: actors.TurnRecord) -> None:
        # One pass, positional fields: turn, role, observation, action, reward,
        # breakdown, done, timed_out, error, latency_s, info.
        next_observation = r.next_observation
        action = r.action
        if action.role is not r.role:
            # Another role's action: the environment took it as this role's
            # (docs/world.md: the role field is overwritten); the step records what it applied.
            action = action.model_copy(update={"role": r.role})
        add_step(
            EpisodeStep(
                r.turn, r.role, r.observation, action, next_observation.reward or 0.0,
                env.last_breakdown, next_observation.done, r.timed_out, r.error,
                r.latency_s, r.info,
            )
        )  # fmt: skip

    return after_step

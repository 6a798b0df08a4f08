"""A conformance check any turn-based environment can be run through.

::

    from actors.testing import check_env

    check_env(MyEnv, policy=my_policy, reset_kwargs={"seed": 3})

:func:`check_env` plays the environment the way the runtime will and raises
:class:`EnvCheckError`, naming the check and the turn, at the first breach of
the contract :class:`actors.TurnEnv` describes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ._coordinator import run_episode
from ._run import run
from ._types import TurnEnv

__all__ = ["EnvCheckError", "check_env"]


class EnvCheckError(AssertionError):
    """An environment broke the turn-based contract (the message says where)."""


@dataclass(frozen=True, slots=True)
class _Step:
    role: Any
    reward: Any
    done: bool
    shown: str  # the observation's repr: what two plays of one seed must agree on


def check_env(
    env: TurnEnv | Callable[[], TurnEnv],
    *,
    policy: Callable[[Any, Any], Any],
    reset_kwargs: Mapping[str, Any] | None = None,
    max_turns: int = 1_000,
) -> int:
    """Check ``env`` against the runtime's environment contract; returns the turns played.

    ``env``: an environment, or a factory making a fresh one (each check then
    gets its own). ``policy(observation, role) -> action``: a deterministic,
    synchronous policy that plays every role. The checks:

    - ``turn_order`` is a non-empty sequence of distinct hashable roles;
    - ``reset(**reset_kwargs)`` and every ``step(action)`` return an
      observation with ``turn_role`` (one of the turn order until done),
      ``done`` (its truth readable) and a numeric or None ``reward``;
    - observations are snapshots: one already returned does not change as
      the episode goes on (compared by ``==`` and ``repr``);
    - the episode ends (``done``) within ``max_turns`` steps;
    - determinism: a second play with the same ``reset_kwargs`` gives the same
      roles, rewards, done flags and observations;
    - :func:`actors.run_episode` plays it to the same trajectory.
    """
    is_factory = isinstance(env, type) or not hasattr(env, "reset")
    make = cast(Callable[[], TurnEnv], env) if is_factory else (lambda: cast(TurnEnv, env))
    kwargs = dict(reset_kwargs or {})
    roles = _check_turn_order(make())
    first = _play(make(), policy, kwargs, roles, max_turns)
    again = _play(make(), policy, kwargs, roles, max_turns)
    _same("a second play with the same reset arguments", first, again)
    _same("actors.run_episode", first, _play_with_runtime(make(), policy, kwargs, max_turns))
    return len(first) - 1


def _check_turn_order(env: TurnEnv) -> tuple[Any, ...]:
    order = getattr(env, "turn_order", None)
    if not isinstance(order, Sequence) or isinstance(order, str) or not order:
        raise EnvCheckError(f"turn_order must be a non-empty sequence of roles, got {order!r:.80}")
    if not all(isinstance(role, Hashable) for role in order):
        raise EnvCheckError(f"turn_order's roles must be hashable, got {order!r:.80}")
    if len(set(order)) != len(order):
        raise EnvCheckError(f"turn_order names a role twice: {order!r:.80}")
    return tuple(order)


def _play(
    env: TurnEnv,
    policy: Callable[[Any, Any], Any],
    kwargs: Mapping[str, Any],
    roles: tuple[Any, ...],
    max_turns: int,
) -> list[_Step]:
    """Play one episode synchronously, checking each observation as it comes."""
    observation = env.reset(**kwargs)
    steps = [_read(observation, roles, "reset")]
    kept: list[tuple[int, Any, Any]] = []  # (turn, observation, its copy when returned)
    while not steps[-1].done:
        turn = len(steps) - 1
        if turn >= max_turns:
            raise EnvCheckError(f"the episode was not done after {max_turns} steps")
        kept.append((turn, observation, _copy(observation)))
        observation = env.step(policy(observation, steps[-1].role))
        steps.append(_read(observation, roles, f"step {turn}"))
        _check_snapshots(kept)
    return steps


def _read(observation: Any, roles: tuple[Any, ...], where: str) -> _Step:
    """An observation's role, reward and done flag, checked."""
    for name in ("turn_role", "done", "reward"):
        if not hasattr(observation, name):
            raise EnvCheckError(f"the observation {where} returned has no {name!r}")
    try:
        done = bool(observation.done)
    except Exception as exc:
        raise EnvCheckError(f"the truth of done from {where} cannot be read: {exc}") from exc
    role, reward = observation.turn_role, observation.reward
    if not done and role not in roles:
        raise EnvCheckError(f"turn_role {role!r} from {where} is not in turn_order {roles!r}")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise EnvCheckError(f"reward from {where} must be a number or None, got {reward!r:.80}")
    return _Step(role, reward, done, repr(observation))


def _copy(observation: Any) -> Any:
    try:
        return copy.deepcopy(observation)
    except Exception as exc:
        raise EnvCheckError(f"an observation cannot be copied: {exc}") from exc


def _check_snapshots(kept: list[tuple[int, Any, Any]]) -> None:
    """Observations already returned must not change as the episode goes on."""
    for turn, observation, snapshot in kept:
        if repr(observation) != repr(snapshot) or observation != snapshot:
            raise EnvCheckError(
                f"the observation of turn {turn} changed after it was returned: "
                "observations must be snapshots, not views of the live state"
            )


def _play_with_runtime(
    env: TurnEnv, policy: Callable[[Any, Any], Any], kwargs: Mapping[str, Any], max_turns: int
) -> list[_Step]:
    """The same episode through the runtime: one actor per role."""

    async def play() -> Any:
        policies = dict.fromkeys(env.turn_order, policy)
        return await run_episode(
            env,
            policies=policies,
            fallback=_no_fallback,
            max_turns=max_turns,
            reset_kwargs=kwargs,
        )

    trace = run(play)
    if trace.status != "ok":
        raise EnvCheckError(f"actors.run_episode failed the episode: {trace.error}")
    for record in trace.turns:
        if record.error is not None or record.timed_out:
            raise EnvCheckError(
                f"turn {record.turn} under actors.run_episode failed: {record.error or 'late'}"
            )
    first = trace.turns[0].observation if trace.turns else trace.final_observation
    return [_step_of(first)] + [_step_of(record.next_observation) for record in trace.turns]


def _step_of(observation: Any) -> _Step:
    done = bool(observation.done)
    return _Step(observation.turn_role, observation.reward, done, repr(observation))


def _no_fallback(role: Any) -> Any:
    raise EnvCheckError(f"role {role!r} needed a fallback action: its policy failed or was late")


def _same(how: str, expected: list[_Step], got: list[_Step]) -> None:
    for turn, (want, have) in enumerate(zip(expected, got, strict=False)):
        if want != have:
            field = next(
                f
                for f in ("role", "reward", "done", "shown")
                if getattr(want, f) != getattr(have, f)
            )
            shown = "observation" if field == "shown" else field
            raise EnvCheckError(
                f"{how} differs at turn {turn - 1 if turn else 'reset'} in its {shown}: "
                f"{getattr(want, field)!r:.120} against {getattr(have, field)!r:.120}"
            )
    if len(expected) != len(got):
        raise EnvCheckError(f"{how} played {len(got) - 1} steps, not {len(expected) - 1}")

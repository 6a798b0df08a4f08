"""Shared helpers for the benchmarks (not a test suite: run the scripts)."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from chaosops.agents.runner import EpisodeResult, EpisodeStep
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.world_sim import Scenario


def role_map(policy: Any) -> dict[Any, Any]:
    return dict.fromkeys(DEFAULT_TURN_ORDER, policy)


def bare_loop(scenarios: list[Scenario], factory: Callable[[Scenario], Any]) -> int:
    """The seed runner's loop, synchronous; returns the number of turns.

    Like the seed's ``run_episode`` it records every step (an ``EpisodeStep``
    with the observation, action, reward and reward breakdown) and builds an
    ``EpisodeResult`` per episode from the environment's state, and the results
    are kept until the end, as a batch keeps them: the same work the runtime
    does for a turn, minus the actors.
    """
    results: list[EpisodeResult] = []
    for scenario in scenarios:
        env = ChaosOpsEnvironment()
        policy = factory(scenario)
        obs = env.reset(scenario=scenario)
        limit = scenario.max_steps * len(env.turn_order)
        steps: list[EpisodeStep] = []
        while not obs.done and len(steps) < limit:
            role = obs.turn_role
            action = policy(obs, role)
            next_obs = env.step(action)
            steps.append(
                EpisodeStep(
                    turn=len(steps),
                    role=role,
                    observation=obs,
                    action=action,
                    reward=next_obs.reward or 0.0,
                    breakdown=env.last_breakdown,
                    done=next_obs.done,
                )
            )
            obs = next_obs
        results.append(result_of(scenario, steps, env.state))
    return sum(len(result.steps) for result in results)


def result_of(scenario: Scenario, steps: list[EpisodeStep], state: Any) -> EpisodeResult:
    """An episode's ``EpisodeResult`` from its steps and the environment's final state."""
    return EpisodeResult(
        scenario=scenario,
        steps=steps,
        resolved=state.resolved,
        final_step=state.step_count,
        cumulative_reward=state.cumulative_reward,
        wrong_fixes=state.wrong_fixes,
        oversight_flags=list(state.oversight_flags),
        declared_root_cause=state.declared_root_cause,
    )


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def best(samples: list[float]) -> float:
    return min(samples)


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"

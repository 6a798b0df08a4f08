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
    return EpisodeResult.from_state(scenario, steps, state)


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


def clock_gaps(seconds: float = 5.0, threshold: float = 0.003) -> list[float]:
    """Gaps (seconds) longer than ``threshold`` seen by a loop that does nothing
    but read the clock for ``seconds``: the machine's own stops (a virtual
    machine's host running something else), which no code of ours causes."""
    gaps: list[float] = []
    clock = time.perf_counter
    last = clock()
    end = last + seconds
    while (now := clock()) < end:
        if now - last > threshold:
            gaps.append(now - last)
        last = now
    return gaps


def describe_gaps(gaps: list[float], seconds: float) -> str:
    if not gaps:
        return f"no gap over 3 ms in {seconds:.0f} s"
    over = sum(g > 0.008 for g in gaps)
    return (f"{len(gaps)} gaps over 3 ms in {seconds:.0f} s, {over} over 8 ms, "
            f"the longest {max(gaps) * 1e3:.1f} ms")  # fmt: skip

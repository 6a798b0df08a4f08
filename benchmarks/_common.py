"""Shared helpers for the benchmarks (not a test suite: run the scripts)."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.world_sim import Scenario


def role_map(policy: Any) -> dict[Any, Any]:
    return dict.fromkeys(DEFAULT_TURN_ORDER, policy)


def bare_loop(scenarios: list[Scenario], factory: Callable[[Scenario], Any]) -> int:
    """The seed runner: a plain synchronous loop; returns the number of turns."""
    turns = 0
    for scenario in scenarios:
        env = ChaosOpsEnvironment()
        policy = factory(scenario)
        obs = env.reset(scenario=scenario)
        limit = scenario.max_steps * len(env.turn_order)
        n = 0
        while not obs.done and n < limit:
            obs = env.step(policy(obs, obs.turn_role))
            n += 1
        turns += n
    return turns


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

"""Microseconds per `ChaosOpsEnvironment.step` (and per reset) for the scripted policies.

Runs every scenario of the canonical suites (easy, medium, hard; 5 episodes per
failure type) with the random, heuristic and oracle policies, timing only the
environment calls (policy time excluded). Usage::

    python benchmarks/env_step.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from chaosops.agents.policies import heuristic_policy, oracle_policy, random_policy
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.world_sim import Scenario
from chaosops.scenarios import canonical_suite_paths, load_scenarios

POLICIES: dict[str, Callable[[Scenario], Callable]] = {
    "random": lambda sc: random_policy(seed=sc.seed),
    "heuristic": lambda sc: heuristic_policy(seed=sc.seed),
    "oracle": lambda sc: oracle_policy(sc.failure_type),
}


def measure(
    scenarios: list[Scenario], make_policy: Callable, repeat: int
) -> tuple[float, float, int]:
    """(us per step, us per reset, steps) over `repeat` passes of `scenarios`."""
    env = ChaosOpsEnvironment()
    clock = time.perf_counter
    step_s = reset_s = 0.0
    steps = resets = 0
    for _ in range(repeat):
        for scenario in scenarios:
            policy = make_policy(scenario)
            t0 = clock()
            obs = env.reset(scenario=scenario)
            reset_s += clock() - t0
            resets += 1
            while not obs.done:
                action = policy(obs, obs.turn_role)
                t0 = clock()
                obs = env.step(action)
                step_s += clock() - t0
                steps += 1
    return step_s / steps * 1e6, reset_s / resets * 1e6, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="passes over the suites")
    args = parser.parse_args()
    scenarios = [sc for path in canonical_suite_paths() for sc in load_scenarios(path)]
    measure(scenarios, POLICIES["random"], 1)  # warm-up
    print(f"{len(scenarios)} scenarios x {args.repeat} passes")
    resets: list[float] = []
    for name, make in POLICIES.items():
        us_step, us_reset, steps = measure(scenarios, make, args.repeat)
        resets.append(us_reset)
        print(f"{name:<10} {us_step:7.1f} us/step  ({steps} steps)")
    print(f"{'reset':<10} {sum(resets) / len(resets):7.1f} us/reset")


if __name__ == "__main__":
    main()

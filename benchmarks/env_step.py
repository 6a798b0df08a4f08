"""Microseconds per `ChaosOpsEnvironment.step` (and per reset) for the scripted policies.

Runs every scenario of the canonical suites (easy, medium, hard; 5 episodes per
failure type) with the random, heuristic and oracle policies, timing only the
environment calls (policy time excluded). ``--parts`` also times the parts of
a random-policy step, each wrapped in a timer (the message and the rest: what
is left). Usage::

    python benchmarks/env_step.py [--repeat N] [--parts]
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator

from chaosops.agents.policies import heuristic_policy, oracle_policy, random_policy
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ChaosOpsObservation
from chaosops.env.world_sim import Scenario, WorldSim
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


PARTS = (
    ("the action applied", WorldSim, "apply_action"),
    ("time passing", WorldSim, "tick"),
    ("the reward", ChaosOpsEnvironment, "_score"),
    ("the view's parts", WorldSim, "view_fields"),
    ("the observation validated", ChaosOpsObservation, "model_validate"),
)


@contextlib.contextmanager
def timed_parts(spent: dict[str, float]) -> Iterator[None]:
    """Each of ``PARTS`` adds its time to ``spent`` while a step runs (a reset
    calls some of them too); a wrapper's own cost falls in its part."""
    wrapped = [(ChaosOpsEnvironment, "step"), *((cls, name) for _, cls, name in PARTS)]
    originals = [(cls, name, cls.__dict__.get(name)) for cls, name in wrapped]
    clock = time.perf_counter
    in_step = False
    step = ChaosOpsEnvironment.step

    def timed_step(env, action):
        nonlocal in_step
        in_step = True
        try:
            return step(env, action)
        finally:
            in_step = False

    ChaosOpsEnvironment.step = timed_step
    for label, cls, name in PARTS:
        call = getattr(cls, name)  # a function, or the class's bound classmethod

        def timed(*args, _call=call, _label=label):
            if not in_step:
                return _call(*args)
            t0 = clock()
            try:
                return _call(*args)
            finally:
                spent[_label] += clock() - t0

        setattr(cls, name, timed)
    try:
        yield
    finally:
        for cls, name, original in originals:
            if original is None:  # inherited (pydantic's model_validate)
                delattr(cls, name)
            else:
                setattr(cls, name, original)


def measure_parts(scenarios: list[Scenario], repeat: int) -> tuple[dict[str, float], float]:
    """Microseconds per random-policy step spent in each of ``PARTS``, and in the
    whole step as :func:`measure` times it with the parts wrapped."""
    spent = {label: 0.0 for label, _, _ in PARTS}
    with timed_parts(spent):
        whole, _, steps = measure(scenarios, POLICIES["random"], repeat)
    return {label: s / steps * 1e6 for label, s in spent.items()}, whole


def print_parts(scenarios: list[Scenario], repeat: int) -> None:
    parts, whole = measure_parts(scenarios, repeat)
    print("random policy, a step by part (each part in a timer):")
    for label, us in parts.items():
        print(f"  {label:<28} {us:5.1f} us")
    print(f"  {'the message and the rest':<28} {whole - sum(parts.values()):5.1f} us")
    print(f"  {'the whole step, timed so':<28} {whole:5.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="passes over the suites")
    parser.add_argument("--parts", action="store_true", help="also time a step's parts")
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
    if args.parts:
        print_parts(scenarios, args.repeat)


if __name__ == "__main__":
    main()

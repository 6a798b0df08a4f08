"""The runtime's own CPU costs on a zero-cost environment (not a docs/runtime.md figure).

A toy environment whose reset and step cost almost nothing, so what is left is
the runtime: the fixed cost of an episode (0 turns: actor tasks, inboxes,
reply channel, task group, trace), the cost of a turn with instant sync
policies without and with a deadline, and the cost of a closed turn (a policy
that never answers, deadline 0: timer, cancellation delivered into the call,
fallback, next request). CPU time of the thread (``time.thread_time``), best of
several rounds, so other processes on the machine disturb it less than wall
time. Use it to A/B a change of ``actors``: run it before and after, in the
same time window. Run: ``.venv/bin/python benchmarks/runtime_costs.py``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

import actors

ROLES = ("a", "b", "c", "d")


@dataclass(frozen=True, slots=True)
class _Obs:
    turn_role: str
    done: bool
    reward: float | None


class _ToyEnv:
    turn_order = ROLES

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.n = 0

    def reset(self, **kwargs: Any) -> _Obs:
        self.n = 0
        return _Obs(ROLES[0], self.steps == 0, 0.0)

    def step(self, action: Any) -> _Obs:
        self.n += 1
        return _Obs(ROLES[self.n % 4], self.n >= self.steps, 1.0)


def _noop(role: Any) -> tuple[str, Any]:
    return ("noop", role)


def _instant(observation: Any, role: Any) -> tuple[str, Any]:
    return ("act", role)


async def _never(observation: Any, role: Any) -> Any:
    await anyio.sleep_forever()


def _cpu_us_per_episode(
    episodes: int, steps: int, policy: Callable[..., Any] | None, timeout: float | None, rounds: int
) -> float:
    policies = dict.fromkeys(ROLES, policy) if policy is not None else {}

    async def main() -> None:
        for _ in range(episodes):
            await actors.run_episode(
                _ToyEnv(steps), policies=policies, fallback=_noop, max_turns=1000,
                turn_timeout=timeout,
            )  # fmt: skip

    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        start = time.thread_time()
        actors.run(main)
        best = min(best, time.thread_time() - start)
    return best / episodes * 1e6


def measure(episodes: int = 2000, rounds: int = 5) -> dict[str, float]:
    e0 = _cpu_us_per_episode(episodes, 0, _instant, None, rounds)
    e0_none = _cpu_us_per_episode(episodes, 0, None, None, rounds)
    e16 = _cpu_us_per_episode(episodes, 16, _instant, None, rounds)
    e16_deadline = _cpu_us_per_episode(episodes, 16, _instant, 5.0, rounds)
    closed = _cpu_us_per_episode(episodes // 8, 8, _never, 0.0, rounds)
    return {
        "episode_us": e0,
        "episode_no_actors_us": e0_none,
        "turn_us": (e16 - e0) / 16,
        "turn_deadline_us": (e16_deadline - e0) / 16,
        "closed_turn_us": (closed - e0) / 8,
    }


def main() -> dict[str, float]:
    m = measure()
    print("runtime costs on a zero-cost environment (CPU us, best of 5 rounds)")
    print(f"  episode fixed cost, 4 actors       {m['episode_us']:7.1f} us")
    print(f"  episode fixed cost, no actors      {m['episode_no_actors_us']:7.1f} us")
    print(f"  turn, instant policy, no deadline  {m['turn_us']:7.2f} us")
    print(f"  turn, instant policy, deadline     {m['turn_deadline_us']:7.2f} us")
    print(f"  closed turn (deadline 0, no reply) {m['closed_turn_us']:7.2f} us")
    return m


if __name__ == "__main__":
    main()

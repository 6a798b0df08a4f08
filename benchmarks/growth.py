"""Figure 5: growth with the number of episodes.

Wall time for 100, 1,000 and 10,000 episodes (instant heuristic policies seeded
per scenario, canonical suites cycled, concurrency 64): the time per episode
should stay flat (linear growth). Run: ``.venv/bin/python benchmarks/growth.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import role_map, verdict

import actors
from chaosops.agents.policies import heuristic_policy
from chaosops.agents.runner import arun_batch
from chaosops.curriculum.generator import scenarios_for_tier


def wall(episodes: int) -> float:
    suite = [sc for t in ("easy", "medium", "hard") for sc in scenarios_for_tier(t)]
    scenarios = [suite[i % len(suite)] for i in range(episodes)]

    async def main() -> None:
        await arun_batch(scenarios, lambda sc: role_map(heuristic_policy(sc.seed)),
                         concurrency=64, gc_freeze=True)  # fmt: skip

    start = time.perf_counter()
    actors.run(main)
    return time.perf_counter() - start


def main() -> dict[str, Any]:
    print("figure 5: growth (instant heuristic policies, concurrency 64)")
    out = {}
    for n in (100, 1000, 10_000):
        w = min(wall(n) for _ in range(3 if n < 10_000 else 1))
        out[n] = w
        print(f"  {n:6d} episodes: wall {w:7.2f} s, {w / n * 1e3:6.3f} ms per episode")
    flat = out[10_000] / 10_000 <= 1.5 * min(out[100] / 100, out[1000] / 1000)
    print(f"  per-episode time at 10,000 within 1.5x of the smaller runs: {verdict(flat)}")
    return out


if __name__ == "__main__":
    main()

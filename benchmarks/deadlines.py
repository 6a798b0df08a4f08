"""Figure 3: deadline precision under load.

Concurrent episodes whose policies never answer, 50 ms turn deadline; the
overshoot of a turn is ``latency_s - deadline`` (from sending the observation
to closing the turn). All episodes start together, so their deadlines fall due
at the same instant. Targets: p99 <= 10 ms at 100 episodes, <= 100 ms at 1,000.
Run: ``python benchmarks/deadlines.py``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _common import role_map, verdict

from chaosops.agents.runner import arun_batch
from chaosops.env.models import FailureType
from chaosops.env.world_sim import Scenario

DEADLINE = 0.05
TURNS = 8


async def never(observation: Any, role: Any) -> Any:
    await anyio.sleep_forever()


def overshoots_ms(episodes: int) -> list[float]:
    scenarios = [
        Scenario.from_type(FailureType.DB_DEADLOCK, seed=i, max_steps=TURNS)
        for i in range(episodes)
    ]

    async def main() -> list[float]:
        results = await arun_batch(
            scenarios, lambda sc: role_map(never), concurrency=episodes, turn_timeout=DEADLINE
        )
        assert all(s.timed_out for r in results for s in r.steps)
        return [(s.latency_s - DEADLINE) * 1000 for r in results for s in r.steps]

    return anyio.run(main)


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> dict[str, Any]:
    print(f"figure 3: never-answering policies, {DEADLINE * 1000:.0f} ms deadline, {TURNS} turns")
    out = {}
    for episodes, target in ((100, 10.0), (1000, 100.0)):
        values = overshoots_ms(episodes)
        p50, p99 = _pct(values, 50), _pct(values, 99)
        out[episodes] = {"p50_ms": p50, "p99_ms": p99, "max_ms": max(values)}
        print(f"  {episodes:5d} episodes: overshoot p50 {p50:6.2f} ms, p99 {p99:6.2f} ms, "
              f"max {max(values):6.2f} ms  target p99 <= {target:.0f} ms  "
              f"{verdict(p99 <= target)}")  # fmt: skip
    return out


if __name__ == "__main__":
    main()

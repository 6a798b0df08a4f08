"""Figure 4: memory per in-flight episode.

10,000 episodes at concurrency 10,000 whose policies wait on an event, so all
are in flight at once (coordinator, four actors, channels, environment). RSS
(psutil) is read before the batch and once every episode is waiting; then the
batch is cancelled. Target: <= 50 KB per in-flight episode.
Run: ``.venv/bin/python benchmarks/memory.py``.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).parent))
from _common import role_map, verdict

import actors
from chaosops.agents.runner import arun_batch
from chaosops.curriculum.generator import scenarios_for_tier


def per_episode_kb(episodes: int = 10_000) -> tuple[float, float]:
    tiers = [sc for t in ("easy", "medium", "hard") for sc in scenarios_for_tier(t)]
    scenarios = [tiers[i % len(tiers)] for i in range(episodes)]
    process = psutil.Process()

    async def main() -> tuple[float, float]:
        release = anyio.Event()
        waiting = 0
        all_in = anyio.Event()

        async def blocked(observation: Any, role: Any) -> Any:
            nonlocal waiting
            waiting += 1
            if waiting == episodes:
                all_in.set()
            await release.wait()

        gc.collect()
        before = process.memory_info().rss
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: arun_batch(scenarios, lambda sc: role_map(blocked),
                                             concurrency=episodes, gc_freeze=True))  # fmt: skip
            await all_in.wait()
            gc.collect()
            during = process.memory_info().rss
            tg.cancel_scope.cancel()
        return before, during

    before, during = actors.run(main)
    return (during - before) / episodes / 1024, during / 2**20


def main() -> dict[str, Any]:
    kb, total_mb = per_episode_kb()
    print("figure 4: 10,000 in-flight episodes (policies blocked on an event)")
    print(f"  RSS per in-flight episode {kb:.1f} KB (process {total_mb:.0f} MB)  "
          f"target <= 50 KB  {verdict(kb <= 50)}")  # fmt: skip
    return {"kb_per_episode": kb}


if __name__ == "__main__":
    main()

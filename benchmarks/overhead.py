"""Figure 1: the runtime's overhead against a bare synchronous loop.

Turns per second with instant scripted policies (random, seeded per scenario)
over the canonical suites: a bare synchronous loop over the same environment
(the seed runner's loop, recording every step as an ``EpisodeStep``),
the runtime at concurrency 1 and 64 with logging off and to a file, and a plain
asyncio ping-pong (four tasks, a Queue inbox, a Future reply) for scale.

Targets: runtime >= 0.5x the bare loop at both concurrencies; logging adds
<= 25%; the runtime's own cost per turn (runtime minus bare loop) <= 2.5x the
ping-pong's. Run: ``python benchmarks/overhead.py``.

Each round measures everything once, side by side. The absolute figures are
the best of the rounds; each ratio is the median of the rounds' own ratios
(both sides taken moments apart), so that a slow spell of the machine, which
slows whatever runs in it, moves a round's two sides together instead of
pairing one round's fast side with another's slow one.

"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import bare_loop, role_map, timed, verdict

import actors
from actors import configure_logging
from actors._logging import reset_logging
from chaosops.agents.policies import random_policy
from chaosops.agents.runner import arun_batch
from chaosops.curriculum.generator import scenarios_for_tier


def _scenarios(per_type: int) -> list[Any]:
    return [
        sc
        for tier in ("easy", "medium", "hard")
        for sc in scenarios_for_tier(tier, episodes_per_type=per_type)
    ]


def _factory(scenario: Any) -> dict[Any, Any]:
    return role_map(random_policy(scenario.seed))


def runtime_us_per_turn(scenarios: list[Any], concurrency: int) -> float:
    async def main() -> int:
        results = await arun_batch(scenarios, _factory, concurrency=concurrency)
        return sum(len(r.steps) for r in results)

    dt, turns = timed(lambda: actors.run(main))
    return dt / turns * 1e6


def bare_us_per_turn(scenarios: list[Any]) -> float:
    dt, turns = timed(lambda: bare_loop(scenarios, lambda sc: random_policy(sc.seed)))
    return dt / turns * 1e6


def pingpong_us_per_turn(turns: int = 40_000, roles: int = 4, loop: str = "asyncio") -> float:
    """Plain asyncio: four actor tasks, a Queue inbox each, a Future per reply.

    ``loop="uvloop"``: the same code on uvloop (the runtime's loop when installed).
    """

    async def main() -> float:
        loop = asyncio.get_running_loop()
        queues: list[asyncio.Queue[Any]] = [asyncio.Queue() for _ in range(roles)]

        async def actor(queue: asyncio.Queue[Any]) -> None:
            while (item := await queue.get()) is not None:
                item[2].set_result((item[0], item[1]))

        async with asyncio.TaskGroup() as tg:
            for q in queues:
                tg.create_task(actor(q))
            start = time.perf_counter()
            for turn in range(turns):
                fut = loop.create_future()
                queues[turn % roles].put_nowait((turn, turn, fut))
                await fut
            elapsed = time.perf_counter() - start
            for q in queues:
                q.put_nowait(None)
        return elapsed / turns * 1e6

    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main())
    return asyncio.run(main())


KEYS = ("bare", "c1", "c64", "c1_log", "c64_log", "pp", "pp_loop")


def measure(rounds: int = 7, per_type: int = 25) -> list[dict[str, float]]:
    """One dict of us per turn (``KEYS``) per round."""
    scenarios = _scenarios(per_type)
    loop = actors.resolve_loop()
    samples: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            m = {"pp": pingpong_us_per_turn(), "pp_loop": pingpong_us_per_turn(loop=loop)}
            m["bare"] = bare_us_per_turn(scenarios)
            for c in (1, 64):
                m[f"c{c}"] = runtime_us_per_turn(scenarios, c)
                configure_logging(Path(tmp) / "run.jsonl")
                try:
                    m[f"c{c}_log"] = runtime_us_per_turn(scenarios, c)
                finally:
                    reset_logging()
            samples.append(m)
    return samples


def best(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: min(m[k] for m in samples) for k in KEYS}


def ratios(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median over the rounds of each round's own ratios."""
    per_round = {
        "c1": [m["bare"] / m["c1"] for m in samples],
        "c64": [m["bare"] / m["c64"] for m in samples],
        "c1_log": [m["c1_log"] / m["c1"] - 1 for m in samples],
        "c64_log": [m["c64_log"] / m["c64"] - 1 for m in samples],
        "own": [(m["c1"] - m["bare"]) / m["pp"] for m in samples],
        "own_loop": [(m["c1"] - m["bare"]) / m["pp_loop"] for m in samples],
    }
    return {k: statistics.median(v) for k, v in per_round.items()}


def report(r: dict[str, float]) -> list[tuple[str, str, str, bool]]:
    """Rows (figure, value, target, ok) from :func:`ratios`."""
    rows = []
    for c in ("c1", "c64"):
        rows.append((f"runtime/bare turns/s, concurrency {c[1:]}", f"{r[c]:.2f}x", ">= 0.5x",
                     r[c] >= 0.5))  # fmt: skip
    for c in ("c1", "c64"):
        added = r[f"{c}_log"]
        rows.append((f"logging to file adds, concurrency {c[1:]}", f"{added:+.1%}", "<= 25%",
                     added <= 0.25))  # fmt: skip
    rows.append(("own cost/turn vs asyncio ping-pong", f"{r['own']:.2f}x", "<= 2.5x",
                 r["own"] <= 2.5))  # fmt: skip
    return rows


def main(rounds: int = 7) -> dict[str, Any]:
    samples = measure(rounds)
    m, r = best(samples), ratios(samples)
    loop = actors.resolve_loop()
    print(f"figure 1: overhead ({rounds} rounds; us per turn, best round, turns/s in brackets; "
          f"runtime on {loop}, ACTORS_LOOP=asyncio for the standard loop)")  # fmt: skip
    for key, label in (("bare", "bare sync loop"), ("c1", "runtime, concurrency 1"),
                       ("c64", "runtime, concurrency 64"), ("c1_log", "runtime c1, JSON log file"),
                       ("c64_log", "runtime c64, JSON log file"),
                       ("pp", "asyncio ping-pong (no env)"),
                       ("pp_loop", f"the same ping-pong on {loop}")):  # fmt: skip
        print(f"  {label:30s} {m[key]:8.1f} us  ({1e6 / m[key]:9,.0f} turns/s)")
    print(f"  runtime own cost per turn      {m['c1'] - m['bare']:8.1f} us (c1), "
          f"{m['c64'] - m['bare']:.1f} us (c64)")  # fmt: skip
    print(f"  own cost / ping-pong on the runtime's loop ({loop}): {r['own_loop']:.2f}x")
    print("  ratios: the median of the rounds' own (each round's sides measured side by side):")
    rows = report(r)
    for name, value, target, ok in rows:
        print(f"  {name:42s} {value:>8s}  target {target:8s} {verdict(ok)}")
    return {"measures": m, "ratios": r, "rows": rows, "samples": samples}


if __name__ == "__main__":
    main()

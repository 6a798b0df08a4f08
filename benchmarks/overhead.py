"""Figure 1: the runtime's overhead against a bare synchronous loop.

Turns per second with instant scripted policies (random, seeded per scenario)
over the canonical suites: a bare synchronous loop over the same environment
(the seed runner's loop, recording every step as an ``EpisodeStep``),
the runtime at concurrency 1 and 64 with logging off and to a file, and a plain
asyncio ping-pong (four tasks, a Queue inbox, a Future reply) for scale.

Targets: runtime >= 0.5x the bare loop at both concurrencies; logging adds
<= 30%; the runtime's own cost per turn (runtime minus bare loop) <= 3x the
ping-pong's. Run: ``.venv/bin/python benchmarks/overhead.py``.

Also measured in each round, as a reference and not a target: the same layout
written plainly in asyncio (:func:`plain_asyncio_us_per_turn`), with and
without the same log events as JSON lines, to tell what docs/runtime.md's structure costs on
this machine from what the runtime adds to it (``benchmarks/cachegrind.py``
counts the same configurations' instructions and cache misses).

Each round measures everything once, side by side. The absolute figures are
the best of the rounds; each ratio is the median of the rounds' own ratios
(both sides taken moments apart), so that a slow spell of the machine, which
slows whatever runs in it, moves a round's two sides together instead of
pairing one round's fast side with another's slow one. Logging's two sides
swap places from one round to the next (off first in even rounds, on first
in odd ones), and there are 11 rounds: a burst of the machine's noise that
hits one side of a round moves that round's ratio, not the median.

"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _common import bare_loop, result_of, role_map, timed, verdict

import actors
from actors import configure_logging, disable_logging, resolve_loop
from chaosops.agents.policies import random_policy
from chaosops.agents.runner import EpisodeResult, EpisodeStep, arun_batch
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import ChaosOpsEnvironment


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
        results = await arun_batch(scenarios, _factory, concurrency=concurrency, gc_freeze=True)
        return sum(len(r.steps) for r in results)

    dt, turns = timed(lambda: actors.run(main))
    return dt / turns * 1e6


def bare_us_per_turn(scenarios: list[Any]) -> float:
    dt, turns = timed(lambda: bare_loop(scenarios, lambda sc: random_policy(sc.seed)))
    return dt / turns * 1e6


class _Lines:
    """The runtime's log events as JSON lines written the least costly way
    (orjson, one ``os.write`` on a file opened for appending, a float
    timestamp); no file: nothing is written."""

    def __init__(self, path: Path | None) -> None:
        self.fd = -1 if path is None else os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def __bool__(self) -> bool:
        return self.fd >= 0

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        fields.update(event=event, level="info", run_id="reference", timestamp=time.time())
        os.write(self.fd, orjson.dumps(fields, option=orjson.OPT_APPEND_NEWLINE))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)


async def _plain_actor(inbox: asyncio.Queue[Any], policy: Any) -> None:
    while (request := await inbox.get()) is not None:
        observation, role, reply = request
        reply.set_result(policy(observation, role))


async def _plain_turns(env: Any, obs: Any, inboxes: dict[Any, Any], limit: int,
                       log: _Lines, episode_id: str) -> list[EpisodeStep]:  # fmt: skip
    """The coordinator's loop: send each turn to its role's inbox, await the
    reply's future, step, record an ``EpisodeStep`` (and log the turn)."""
    loop = asyncio.get_running_loop()
    steps: list[EpisodeStep] = []
    while not obs.done and len(steps) < limit:
        role = obs.turn_role
        reply = loop.create_future()
        sent = time.perf_counter()
        inboxes[role].put_nowait((obs, role, reply))
        action = await reply
        latency = time.perf_counter() - sent
        next_obs = env.step(action)
        step = EpisodeStep(
            turn=len(steps), role=role, observation=obs, action=action,
            reward=next_obs.reward or 0.0, breakdown=env.last_breakdown,
            done=next_obs.done, latency_s=latency,
        )  # fmt: skip
        steps.append(step)
        if log:
            log("turn", {
                "episode_id": episode_id, "turn": step.turn, "step": next_obs.step,
                "role": role, "action_type": action.action_type,
                "target": action.target, "args": action.args, "reward": step.reward,
                "done": step.done, "timed_out": False, "error": None,
                "latency_ms": round(latency * 1e3, 3),
            })  # fmt: skip
        obs = next_obs
    return steps


async def _plain_episode(scenario: Any, log: _Lines) -> EpisodeResult:
    """One episode: a task per role in a task group around the turn loop."""
    env = ChaosOpsEnvironment()
    episode_id = f"{scenario.seed:016x}"
    started = time.perf_counter()
    if log:
        fields = {"failure_type": scenario.failure_type, "difficulty": scenario.difficulty}
        log("episode_started", {"episode_id": episode_id, **fields, "seed": scenario.seed})
    obs = env.reset(scenario=scenario, episode_id=episode_id)
    limit = scenario.max_steps * len(env.turn_order)
    inboxes: dict[Any, asyncio.Queue[Any]] = {}
    async with asyncio.TaskGroup() as tg:
        for role, policy in _factory(scenario).items():
            inboxes[role] = asyncio.Queue()
            tg.create_task(_plain_actor(inboxes[role], policy))
        steps = await _plain_turns(env, obs, inboxes, limit, log, episode_id)
        for inbox in inboxes.values():
            inbox.put_nowait(None)
    state = env.state
    if log:
        log("episode_finished", {"episode_id": episode_id, "status": "ok", "resolved":
            state.resolved, "final_step": state.step_count, "cumulative_reward":
            state.cumulative_reward, "timeouts": 0, "errors": 0,
            "wall_s": round(time.perf_counter() - started, 6)})  # fmt: skip
    return result_of(scenario, steps, state)


def plain_asyncio_us_per_turn(
    scenarios: list[Any], concurrency: int, log_path: Path | None = None
) -> float:
    """The same layout written plainly in asyncio, as a reference (not the runtime).

    Per episode a task group with one task per role (an ``asyncio.Queue``
    inbox, a ``Future`` per reply), the coordinator's loop stepping the
    environment and recording an ``EpisodeStep`` per turn, an
    ``EpisodeResult`` per episode, ``concurrency`` workers; on the runtime's
    loop, with the garbage collector handled as the runtime's batches handle
    it (``actors.gc_frozen``). No deadlines, no error handling, no checks,
    no stale-reply guard: what docs/runtime.md's structure costs at the least.
    With ``log_path``, the runtime's ``episode_started``, ``turn`` and
    ``episode_finished`` events with their fields (:class:`_Lines`): the least
    those flushed lines cost.
    """
    log = _Lines(log_path)

    async def main() -> int:
        pending = iter(scenarios)
        results: list[EpisodeResult] = []

        async def worker() -> None:
            for scenario in pending:
                results.append(await _plain_episode(scenario, log))

        with actors.gc_frozen():  # the collector as the runtime's batches have it
            async with asyncio.TaskGroup() as tg:
                for _ in range(concurrency):
                    tg.create_task(worker())
        return sum(len(r.steps) for r in results)

    try:
        dt, turns = timed(lambda: actors.run(main))
    finally:
        log.close()
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


KEYS = ("bare", "c1", "c64", "c1_log", "c64_log", "pp", "pp_loop",
        "ref1", "ref64", "ref1_log", "ref64_log")  # fmt: skip


def measure(rounds: int = 11, per_type: int = 25) -> list[dict[str, float]]:
    """One dict of us per turn (``KEYS``) per round."""
    scenarios = _scenarios(per_type)
    loop = resolve_loop()
    samples: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            m = {"pp": pingpong_us_per_turn(), "pp_loop": pingpong_us_per_turn(loop=loop)}
            m["bare"] = bare_us_per_turn(scenarios)
            for c in (1, 64):
                # Logging off then on in even rounds, on then off in odd ones:
                # whatever the place in a round favours falls on both sides.
                for logged in (False, True) if i % 2 == 0 else (True, False):
                    if not logged:
                        m[f"c{c}"] = runtime_us_per_turn(scenarios, c)
                        continue
                    configure_logging(Path(tmp) / "run.jsonl")
                    try:
                        m[f"c{c}_log"] = runtime_us_per_turn(scenarios, c)
                    finally:
                        disable_logging()
            # The reference last, not between a target's two sides.
            for c in (1, 64):
                m[f"ref{c}"] = plain_asyncio_us_per_turn(scenarios, c)
                m[f"ref{c}_log"] = plain_asyncio_us_per_turn(scenarios, c, Path(tmp) / "ref.jsonl")
            samples.append(m)
    return samples


def best(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: min(m[k] for m in samples) for k in KEYS}


def ratios(samples: list[dict[str, float]]) -> dict[str, float]:
    """The median over the rounds of each round's own ratios."""
    return {k: statistics.median(v) for k, v in round_ratios(samples).items()}


def spread(values: list[float]) -> tuple[float, float]:
    """The first and third quartiles of ``values`` (the middle half of the rounds)."""
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def round_ratios(samples: list[dict[str, float]]) -> dict[str, list[float]]:
    """Each round's own ratios, by figure."""
    return {
        "c1": [m["bare"] / m["c1"] for m in samples],
        "c64": [m["bare"] / m["c64"] for m in samples],
        "c1_log": [m["c1_log"] / m["c1"] - 1 for m in samples],
        "c64_log": [m["c64_log"] / m["c64"] - 1 for m in samples],
        "own": [(m["c1"] - m["bare"]) / m["pp"] for m in samples],
        "own_loop": [(m["c1"] - m["bare"]) / m["pp_loop"] for m in samples],
        "ref_own": [(m["ref1"] - m["bare"]) / m["pp"] for m in samples],
        "ref1": [m["bare"] / m["ref1"] for m in samples],
        "ref64": [m["bare"] / m["ref64"] for m in samples],
        "ref1_log": [m["ref1_log"] / m["ref1"] - 1 for m in samples],
        "ref64_log": [m["ref64_log"] / m["ref64"] - 1 for m in samples],
        "vs_ref1": [m["ref1"] / m["c1"] for m in samples],
        "vs_ref64": [m["ref64"] / m["c64"] for m in samples],
    }


def report(r: dict[str, float]) -> list[tuple[str, str, str, bool]]:
    """Rows (figure, value, target, ok) from :func:`ratios`."""
    rows = []
    for c in ("c1", "c64"):
        rows.append((f"runtime/bare turns/s, concurrency {c[1:]}", f"{r[c]:.2f}x", ">= 0.5x",
                     r[c] >= 0.5))  # fmt: skip
    for c in ("c1", "c64"):
        added = r[f"{c}_log"]
        rows.append((f"logging to file adds, concurrency {c[1:]}", f"{added:+.1%}", "<= 30%",
                     added <= 0.30))  # fmt: skip
    rows.append(("own cost/turn vs asyncio ping-pong", f"{r['own']:.2f}x", "<= 3x",
                 r["own"] <= 3.0))  # fmt: skip
    return rows


def main(rounds: int = 11) -> dict[str, Any]:
    samples = measure(rounds)
    m, r = best(samples), ratios(samples)
    loop = resolve_loop()
    print(f"figure 1: overhead ({rounds} rounds; us per turn, best round, turns/s in brackets; "
          f"runtime on {loop}, ACTORS_LOOP=asyncio for the standard loop)")  # fmt: skip
    for key, label in (("bare", "bare sync loop"), ("c1", "runtime, concurrency 1"),
                       ("c64", "runtime, concurrency 64"), ("c1_log", "runtime c1, JSON log file"),
                       ("c64_log", "runtime c64, JSON log file"),
                       ("pp", "asyncio ping-pong (no env)"),
                       ("ref1", "plain asyncio layout, c1"), ("ref64", "plain asyncio layout, c64"),
                       ("ref1_log", "plain layout c1, JSON lines"),
                       ("ref64_log", "plain layout c64, JSON lines"),
                       ("pp_loop", f"the same ping-pong on {loop}")):  # fmt: skip
        print(f"  {label:30s} {m[key]:8.1f} us  ({1e6 / m[key]:9,.0f} turns/s)")
    print(f"  runtime own cost per turn      {m['c1'] - m['bare']:8.1f} us (c1), "
          f"{m['c64'] - m['bare']:.1f} us (c64)")  # fmt: skip
    print(f"  own cost / ping-pong on the runtime's loop ({loop}): {r['own_loop']:.2f}x")
    print("  ratios: the median of the rounds' own (each round's sides measured side by side):")
    rows = report(r)
    for name, value, target, ok in rows:
        print(f"  {name:42s} {value:>8s}  target {target:8s} {verdict(ok)}")
    # How far the rounds agree: a wide middle half means a noisy machine, and a
    # median near a target then says little about which side of it the code is.
    per_round = round_ratios(samples)
    quartiles = [f"{label} {spread(per_round[key])[0]:+.1%} to {spread(per_round[key])[1]:+.1%}"
                 for key, label in (("c1_log", "c1"), ("c64_log", "c64"))]  # fmt: skip
    print(f"  logging's middle half of the rounds (quartiles): {', '.join(quartiles)}")
    print("  the same figures for the plain asyncio layout (a reference, not the runtime):")
    print(f"  {'plain layout/bare turns/s, c1 / c64':42s} {r['ref1']:.2f}x / {r['ref64']:.2f}x")
    print(f"  {'its JSON lines add, c1 / c64':42s} {r['ref1_log']:+.1%} / {r['ref64_log']:+.1%}")
    print(f"  {'its own cost/turn vs ping-pong, c1':42s} {r['ref_own']:.2f}x")
    print(f"  {'runtime / plain layout turns/s, c1 / c64':42s} {r['vs_ref1']:.2f}x / "
          f"{r['vs_ref64']:.2f}x")  # fmt: skip
    return {"measures": m, "ratios": r, "rows": rows, "samples": samples}


if __name__ == "__main__":
    main()

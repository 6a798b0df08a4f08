"""Episodes through the local mock LLM server: wall time against the ideal.

200 episodes at concurrency 200, every call going through ``LLMPolicy`` (the
official ``openai`` client) to ``chaosops mock-llm`` with a fixed 50 ms latency,
run in its own process so that the server's CPU is not the client's. Two
workloads:

- ``resolving``: the canonical suites (easy, medium, hard); the mock plays
  sensibly, so most episodes end after 1 to 3 turns;
- ``full-length``: easy scenarios whose answers are all unparseable (noop), so
  every episode runs its 12 turns.

The ideal wall time is the longest episode's turns x latency (all episodes run
at once); requests per second count every chat-completions call. Usage::

    python benchmarks/llm_mock.py [--episodes 200] [--concurrency 200] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from actors import configure_logging
from chaosops.agents.llm import LLMPolicy, check_endpoint
from chaosops.agents.runner import EpisodeResult, arun_batch
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.models import AgentRole, DifficultyTier
from chaosops.env.world_sim import Scenario

MODEL = "chaosops-mock"


def _cpu_s(pid: int) -> float | None:
    """CPU seconds used so far by process ``pid`` (None without psutil)."""
    try:
        import psutil
    except ImportError:
        return None
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


@contextmanager
def mock_server(latency_ms: float, *, garbage: float = 0.0) -> Iterator[tuple[str, int]]:
    """Start ``python -m chaosops.mock_llm`` on a free port; yield (base URL, pid)."""
    cmd = [
        sys.executable, "-m", "chaosops.mock_llm", "--port", "0",
        "--latency", f"{latency_ms}ms", "--rate-garbage", str(garbage), "--model", MODEL,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://\S+/v1)", line)
        if not match:
            raise RuntimeError(f"mock-llm did not start: {line!r}")
        yield match.group(1), proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _scenarios(kind: str, episodes: int) -> list[Scenario]:
    if kind == "resolving":
        pool = [
            sc for tier in DifficultyTier for sc in scenarios_for_tier(tier, episodes_per_type=3)
        ]
    else:
        pool = scenarios_for_tier(DifficultyTier.EASY, episodes_per_type=3)
    return list(itertools.islice(itertools.cycle(pool), episodes))


async def _run(
    base_url: str, scenarios: list[Scenario], concurrency: int
) -> tuple[list[EpisodeResult], float]:
    await check_endpoint(base_url, MODEL)
    async with LLMPolicy(MODEL, base_url=base_url, max_in_flight=concurrency) as policy:
        roles = dict.fromkeys(AgentRole, policy)
        await arun_batch(scenarios[:1], roles, concurrency=1)  # warm-up
        started = time.perf_counter()
        results = await arun_batch(scenarios, roles, concurrency=concurrency, turn_timeout=30.0)
        return results, time.perf_counter() - started


def measure(kind: str, episodes: int, concurrency: int, latency_ms: float) -> None:
    """Run one workload and print its figures."""
    scenarios = _scenarios(kind, episodes)
    with mock_server(latency_ms, garbage=1.0 if kind == "full-length" else 0.0) as (url, pid):
        server_cpu0, client_cpu0 = _cpu_s(pid), time.process_time()
        results, wall = anyio.run(_run, url, scenarios, concurrency, backend="asyncio")
        server_cpu1, client_cpu1 = _cpu_s(pid), time.process_time()
    turns = [len(r.steps) for r in results]
    requests = sum(turns)
    ideal = max(turns) * latency_ms / 1000.0
    bad = sum(r.status != "ok" or r.errors or r.timeouts for r in results)
    print(
        f"{kind:<12} episodes {len(results):>4}  resolved {sum(r.resolved for r in results):>4}"
        f"  turns/episode mean {requests / len(results):5.2f} max {max(turns):>3}"
        f"  | wall {wall:6.3f} s  ideal {ideal:6.3f} s  ratio {wall / ideal:5.2f}x"
        f"  | {requests / wall:7.0f} requests/s  (errors or timeouts: {bad})"
    )
    # Includes the warm-up episode and the checks: an upper bound per request.
    cpu = f"{'':<12} CPU per request: client {(client_cpu1 - client_cpu0) / requests * 1e3:.2f} ms"
    if server_cpu0 is not None and server_cpu1 is not None:
        cpu += f", mock server {(server_cpu1 - server_cpu0) / requests * 1e3:.2f} ms"
    print(f"{cpu}  ({os.cpu_count()} CPUs on this machine)")


def main() -> None:
    """Parse the options and run both workloads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    configure_logging(io.StringIO(), level="error")  # parse_error warnings are expected
    print(
        f"mock LLM in a subprocess, latency {args.latency_ms:g} ms, "
        f"{args.episodes} episodes at concurrency {args.concurrency}"
    )
    for kind in ("resolving", "full-length"):
        measure(kind, args.episodes, args.concurrency, args.latency_ms)


if __name__ == "__main__":
    main()

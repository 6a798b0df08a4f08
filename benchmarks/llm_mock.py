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
at once); requests per second count every chat-completions call.

Then figure 6, the CPU per request side by side, against the same mock:

- ``chaosops run --policy llm`` end to end (world, runtime, JSON log and output
  files included): the CPU of a large run minus a small one, over the requests
  between them, so that start-up cancels out;
- the ``openai`` SDK alone (``chat.completions.create`` of the same messages);
- a bare aiohttp client alone (a POST of the same body, the JSON decoded).

Usage::

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
        results = await arun_batch(
            scenarios, roles, concurrency=concurrency, turn_timeout=30.0, gc_freeze=True
        )
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


def _stats(url: str) -> dict[str, int]:
    import json
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=5) as response:
        return json.loads(response.read())


def _cli_cpu(url: str, episodes_per_type: int, folder: str) -> tuple[float, int]:
    """CPU seconds of one ``chaosops run --policy llm`` and the requests it made."""
    import resource

    before = _stats(url)["requests"]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "chaosops.cli", "run", "--policy", "llm", "--llm-base-url", url,
         "--episodes-per-type", str(episodes_per_type), "--tier", "easy", "--concurrency", "200",
         "--llm-max-failures", "0",
         "--turn-timeout", "30", "--no-progress", "--log-json", f"{folder}/log.jsonl",
         "--out", f"{folder}/run"],
        check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # exit 1 is expected: with every answer unparseable, no role plays a move of its own
    assert done.returncode in (0, 1) and os.path.getsize(f"{folder}/run/summary.json")
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return cpu, _stats(url)["requests"] - before


def _request_body() -> dict[str, object]:
    from chaosops.agents.llm import build_messages
    from chaosops.env.environment import ChaosOpsEnvironment

    obs = ChaosOpsEnvironment().reset(scenario=_scenarios("resolving", 1)[0])
    return {"model": MODEL, "messages": build_messages(obs, "sre"), "temperature": 0.0,
            "max_tokens": 256}  # fmt: skip


async def _sdk(url: str, body: dict[str, object], count: int, concurrency: int) -> None:
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0) as client:
        limiter = anyio.CapacityLimiter(concurrency)

        async def one() -> None:
            async with limiter:
                await client.chat.completions.create(**body)  # type: ignore[call-overload]

        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(one)


async def _aiohttp(url: str, body: dict[str, object], count: int, concurrency: int) -> None:
    import aiohttp
    import orjson

    data = orjson.dumps(body)
    headers = {"Authorization": "Bearer EMPTY", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def one() -> None:
            async with session.post(f"{url}/chat/completions", data=data) as response:
                orjson.loads(await response.read())

        async with anyio.create_task_group() as tg:
            for _ in range(count):
                tg.start_soon(one)


def cpu_side_by_side(latency_ms: float, requests: int, concurrency: int) -> None:
    """Figure 6: CPU per request of the whole command, the SDK alone, aiohttp alone."""
    import tempfile

    ours = {}
    for kind, garbage, per_type in (("resolving", 0.0, 400), ("full-length", 1.0, 40)):
        with (
            mock_server(latency_ms, garbage=garbage) as (url, _),
            tempfile.TemporaryDirectory() as d,
        ):
            small = _cli_cpu(url, 1, f"{d}/small")
            large = _cli_cpu(url, per_type, f"{d}/large")
            ours[kind] = ((large[0] - small[0]) / (large[1] - small[1]) * 1e3, large[1] - small[1])
    with mock_server(latency_ms) as (url, _):
        body = _request_body()
        figures = {}
        for name, client in (("openai SDK alone", _sdk), ("bare aiohttp alone", _aiohttp)):
            cpu0 = time.process_time()
            anyio.run(client, url, body, requests, concurrency, backend="asyncio")
            figures[name] = (time.process_time() - cpu0) / requests * 1e3
    print(f"figure 6: CPU per request against the mock ({latency_ms:g} ms latency)")
    for kind, (value, requests_between) in ours.items():
        verdict = "PASS" if value <= 0.5 else "FAIL"
        print(f"  chaosops run --policy llm, {kind:<11} {value:6.3f} ms  target <= 0.5 ms  "
              f"{verdict}  ({requests_between} requests between two runs)")  # fmt: skip
    for name, value in figures.items():
        print(f"  {name:<38} {value:6.3f} ms  ({requests} requests, concurrency {concurrency})")


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
    cpu_side_by_side(args.latency_ms, requests=2000, concurrency=args.concurrency)


if __name__ == "__main__":
    main()

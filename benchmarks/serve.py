"""`chaosops serve` under load, beside an echo environment served the same way.

One client process runs full episodes through OpenEnv's ``GenericEnvClient``
(async, one WebSocket session each) at 1, 64 and 256 concurrent sessions,
over loopback, against two servers started here: ``chaosops serve`` (the
client plays all four roles, a noop every step, ``max_steps`` 5 so 20 steps an
episode) and an echo environment of 20 steps served by openenv's own
``create_app`` (the baseline: protocol and transport, no world). Prints
steps/s and p50/p99 step latency for each, and each server's RSS after each
load (3,400 episodes a load by default: over 10,000 in all). Needs the serve extra. Usage::

    python benchmarks/serve.py [--episodes 3400] [--sessions 1,64,256]
    python benchmarks/serve.py --soak 10000   # memory across episodes
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from openenv.core.generic_client import GenericEnvClient

ECHO_SERVER = r"""
import socket, sys
import uvicorn
from openenv.core.env_server import (
    Action, ConcurrencyConfig, Environment, Observation, State, create_app)

class EchoAction(Action):
    message: str = ""

class EchoObservation(Observation):
    echoed: str = ""

class Echo(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    def __init__(self):
        super().__init__(); self.steps = 0
    def reset(self, seed=None, episode_id=None, **kw):
        self.steps = 0; return EchoObservation(done=False, reward=0.0)
    def step(self, action, timeout_s=None, **kw):
        self.steps += 1
        return EchoObservation(echoed=action.message, done=self.steps >= 20, reward=1.0)
    @property
    def state(self):
        return State(step_count=self.steps)

app = create_app(Echo, EchoAction, EchoObservation, env_name="echo",
                 concurrency_config=ConcurrencyConfig(max_concurrent_envs=int(sys.argv[1])))
sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(1024)
print(f"echo at http://127.0.0.1:{sock.getsockname()[1]} ,", flush=True)
try:
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
except KeyboardInterrupt:
    pass
"""

CHAOSOPS = Path(sys.executable).parent / "chaosops"


def _start(command: list[str]) -> tuple[subprocess.Popen[str], str]:
    """A server started, and the URL its first line gives."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if " at " not in line:
        proc.kill()
        proc.communicate()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, line.split(" at ", 1)[1].split(" ,", 1)[0]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _episodes(url: str, count: int, chaosops: bool, latencies: list[float]) -> int:
    steps = 0
    async with GenericEnvClient(base_url=url) as env:
        for seed in range(count):
            if chaosops:
                result = await env.reset(failure_type="memory_leak", seed=seed, max_steps=20)
            else:
                result = await env.reset()
            while not result.done:
                if chaosops:
                    action = {"turn": result.observation["turn"], "action_type": "noop"}
                else:
                    action = {"message": "ping"}
                started = time.perf_counter()
                result = await env.step(action)
                latencies.append(time.perf_counter() - started)
                steps += 1
    return steps


async def _load(url: str, sessions: int, episodes: int, chaosops: bool) -> dict[str, float]:
    latencies: list[float] = []
    per_session = max(1, episodes // sessions)
    started = time.perf_counter()
    counts = await asyncio.gather(
        *(_episodes(url, per_session, chaosops, latencies) for _ in range(sessions))
    )
    wall = time.perf_counter() - started
    latencies.sort()
    return {
        "steps_s": sum(counts) / wall,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def soak(episodes: int) -> None:
    """``episodes`` through one session, the server's RSS every tenth of them."""
    with tempfile.TemporaryDirectory() as scratch:
        proc, url = _start([str(CHAOSOPS), "serve", "--port", "0",
                            "--out", os.path.join(scratch, "served")])  # fmt: skip
        try:
            print(f"chaosops server RSS at the start: {_rss_mb(proc.pid):.0f} MB")
            for done in range(episodes // 10, episodes + 1, episodes // 10):
                asyncio.run(_episodes(url, episodes // 10, True, []))
                print(f"{done:>7} episodes: RSS {_rss_mb(proc.pid):.0f} MB", flush=True)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=3400, help="episodes per load (3400)")
    parser.add_argument("--sessions", default="1,64,256", help="concurrent sessions (1,64,256)")
    parser.add_argument(
        "--soak", type=int, default=0, metavar="N",
        help="instead: N episodes through one session, and the RSS along the way",
    )  # fmt: skip
    args = parser.parse_args()
    if args.soak:
        soak(args.soak)
        return
    loads = [int(n) for n in args.sessions.split(",")]
    most = str(max(loads) + 8)
    with tempfile.TemporaryDirectory() as scratch:
        servers = {
            "chaosops": _start(
                [
                    str(CHAOSOPS),
                    "serve",
                    "--port",
                    "0",
                    "--max-sessions",
                    most,
                    "--out",
                    os.path.join(scratch, "served"),
                ]
            ),
            "echo": _start([sys.executable, "-c", ECHO_SERVER, most]),
        }
        try:
            before = {name: _rss_mb(proc.pid) for name, (proc, _) in servers.items()}
            print(f"{'sessions':>8}  {'server':<9}{'steps/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
                  f"{'RSS MB':>9}")  # fmt: skip
            for sessions in loads:
                for name, (_, url) in servers.items():
                    got = asyncio.run(_load(url, sessions, args.episodes, name == "chaosops"))
                    rss = _rss_mb(servers[name][0].pid)
                    line = f"{got['steps_s']:>9.0f}{got['p50_ms']:>9.1f}{got['p99_ms']:>9.1f}"
                    print(f"{sessions:>8}  {name:<9}{line}{rss:>9.0f}", flush=True)
            for name, (proc, _) in servers.items():
                print(f"{name} server RSS: {before[name]:.0f} MB before, "
                      f"{_rss_mb(proc.pid):.0f} MB after")  # fmt: skip
        finally:
            for proc, _ in servers.values():
                proc.send_signal(signal.SIGINT)
                proc.communicate(timeout=30)


if __name__ == "__main__":
    main()

"""Figure 7: one process against Ray with 1 and 2 workers, on this machine.

Scripted episodes (the heuristic policy over the canonical suites, trajectories
written, no JSON log): episodes per second with start-up excluded (a large run
minus a small one, over the episodes between them), and the driver's CPU per
episode (the ``chaosops`` process itself; the workers are Ray's processes).
Then LLM-bound episodes through the mock server (50 ms a call), as measured.
Ray runs on 127.0.0.1 only (``--ray local``). Progress goes to stderr::

    python benchmarks/ray_scale.py [--per-type 300]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENTRIES = 11


def _run(folder: Path, per_type: int, *extra: str) -> tuple[float, float]:
    """Wall seconds and the command's own CPU seconds of one run."""
    started = time.perf_counter()
    policy = () if "--policy" in extra else ("--policy", "heuristic")
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaosops.cli", "run", *policy,
         "--episodes-per-type", str(per_type), "--no-progress", "--log-json", "off",
         "--out", str(folder), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"run failed: {proc.stderr.read() if proc.stderr else ''}")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def measure(name: str, per_type: int, *extra: str, entries: int = ENTRIES) -> tuple[float, float]:
    """Episodes per second and the driver's CPU ms per episode, start-up excluded
    (``entries``: the (failure type, tier) entries the run plays)."""
    print(f"  {name}...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        small = _run(Path(tmp) / "small", 1, *extra)
        large = _run(Path(tmp) / "large", per_type, *extra)
    episodes = (per_type - 1) * entries
    return episodes / (large[0] - small[0]), (large[1] - small[1]) / episodes * 1e3


@contextmanager
def _mock(latency: str) -> Iterator[str]:
    """``chaosops mock-llm`` on a free loopback port, every answer unreadable
    (so every episode plays all its turns); yields its base URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "chaosops.cli", "mock-llm", "--port", "0", "--latency", latency,
         "--rate-garbage", "1.0"], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        yield server.stdout.readline().split(" at ", 1)[1].split()[0]
    finally:
        server.terminate()
        server.wait(timeout=30)


def llm_bound(per_type: int) -> None:
    """Episodes/s through the mock (50 ms a call, 12 turns an episode), as measured."""
    print("LLM-bound episodes (easy tier: 4 entries; 12 calls of 50 ms each), start-up excluded:")
    with _mock("50ms") as url:
        llm = ("--policy", "llm", "--llm-base-url", url, "--tier", "easy", "--concurrency",
               "128", "--llm-max-in-flight", "128", "--llm-max-failures", "0")  # fmt: skip
        for name, extra in (("one local process", ()),
                            ("Ray, 2 workers", ("--ray", "local", "--workers", "2"))):  # fmt: skip
            rate, cpu = measure(f"{name}, LLM", per_type, *llm, *extra, entries=4)
            print(f"  {name:<18} {rate:8.0f} episodes/s  driver CPU {cpu:5.2f} ms an episode")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-type", type=int, default=300)
    per_type = parser.parse_args().per_type
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    rows = [
        ("one local process", measure("local", per_type)),
        ("Ray, 1 worker", measure("ray 1", per_type, "--ray", "local", "--workers", "1")),
        ("Ray, 2 workers", measure("ray 2", per_type, "--ray", "local", "--workers", "2")),
    ]
    base = rows[0][1][0]
    print(f"figure 7: scripted episodes ({ENTRIES * per_type:,} a run), start-up excluded, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    for name, (rate, cpu) in rows:
        print(f"  {name:<18} {rate:8.0f} episodes/s  ({rate / base:4.2f}x local)  "
              f"driver CPU {cpu:5.2f} ms an episode")  # fmt: skip
    two = rows[2][1][0] / base
    print(f"  2 workers / local: {two:.2f}x  (target >= 1.5x: {'PASS' if two >= 1.5 else 'FAIL'})")
    llm_bound(per_type // 2)


if __name__ == "__main__":
    main()

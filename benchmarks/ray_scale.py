"""Figure 7: one process against Ray with 1 and 2 workers, on this machine.

Scripted episodes (the heuristic policy over the canonical suites, trajectories
written, no JSON log): episodes per second while the run is steady (between
its 10th and 90th percent of results written: start-up and tail left out), and
the driver's CPU per episode (the ``chaosops`` process itself, a large run's
minus a small one's; the workers are Ray's processes). Each row is the median
of ``--repeat`` runs. The ceiling beside them: two local processes at once,
each playing the plan, their rates summed; what two cores give any two workers.
Then LLM-bound episodes through the mock server (50 ms a call), as measured.
Ray runs on 127.0.0.1 only (``--ray local``). Progress goes to stderr::

    python benchmarks/ray_scale.py [--per-type 1500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ENTRIES = 11


def _run(folder: Path, per_type: int, *extra: str) -> tuple[float, float]:
    """The steady rate of one run, episodes/s between its 10th and 90th
    percent of results written (start-up and the tail left out), and the
    command's own CPU seconds."""
    policy = () if "--policy" in extra else ("--policy", "heuristic")
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaosops.cli", "run", *policy,
         "--episodes-per-type", str(per_type), "--no-progress", "--log-json", "off",
         "--out", str(folder), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    planned, seen = None, []  # (time, results written)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # its CPU, once it has ended
        if pid:
            break
        time.sleep(0.02)
        try:
            planned = planned or json.loads((folder / "run.json").read_bytes())["planned"]
            seen.append((time.perf_counter(), _lines(folder / "results.jsonl")))
        except (OSError, ValueError, KeyError):
            continue
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"run failed: {proc.stderr.read() if proc.stderr else ''}")
    seen.append((time.perf_counter(), _lines(folder / "results.jsonl")))
    return _steady_rate(seen, planned or 1), usage.ru_utime + usage.ru_stime


def _lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def _steady_rate(seen: list[tuple[float, int]], planned: int) -> float:
    first = next((t, n) for t, n in seen if n >= planned * 0.1)
    last = next((t, n) for t, n in seen if n >= planned * 0.9)
    if last[0] <= first[0]:  # too quick to tell (the small run)
        return float("nan")
    return (last[1] - first[1]) / (last[0] - first[0])


def measure(name: str, per_type: int, *extra: str, entries: int = ENTRIES) -> tuple[float, float]:
    """Episodes per second, steady (see :func:`_run`), and the driver's CPU ms
    per episode, start-up excluded (a large run's CPU minus a small one's;
    ``entries``: the (failure type, tier) entries the run plays)."""
    print(f"  {name}...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        small = _run(Path(tmp) / "small", 2, *extra)
        large = _run(Path(tmp) / "large", per_type, *extra)
    episodes = (per_type - 2) * entries
    return large[0], (large[1] - small[1]) / episodes * 1e3


def two_at_once(per_type: int) -> float:
    """Two local processes playing the plan at the same time: their steady
    rates summed (the most two workers could make of this machine's cores)."""
    print("  two local processes...", file=sys.stderr, flush=True)
    rates: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [threading.Thread(target=lambda n=n: rates.append(_run(Path(tmp) / n, per_type)[0]))
                for n in ("a", "b")]  # fmt: skip
        for run in runs:
            run.start()
        for run in runs:
            run.join()
    return sum(rates)


def median_of(repeat: int, run: Any) -> tuple[float, float]:
    rows = [run() for _ in range(repeat)]
    return statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)


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
    parser.add_argument("--per-type", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    per_type, repeat = args.per_type, args.repeat
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    rows = [
        ("one local process", median_of(repeat, lambda: measure("local", per_type))),
        ("Ray, 1 worker", median_of(repeat, lambda: measure(
            "ray 1", per_type, "--ray", "local", "--workers", "1"))),
        ("Ray, 2 workers", median_of(repeat, lambda: measure(
            "ray 2", per_type, "--ray", "local", "--workers", "2"))),
    ]  # fmt: skip
    ceiling = statistics.median(two_at_once(per_type) for _ in range(repeat))
    base = rows[0][1][0]
    print(f"figure 7: scripted episodes ({ENTRIES * per_type:,} a run), start-up excluded, "
          f"{os.cpu_count()} CPUs, median of {repeat}")  # fmt: skip
    for name, (rate, cpu) in rows:
        print(f"  {name:<18} {rate:8.0f} episodes/s  ({rate / base:4.2f}x local)  "
              f"driver CPU {cpu:5.2f} ms an episode")  # fmt: skip
    print(f"  {'two local at once':<18} {ceiling:8.0f} episodes/s  ({ceiling / base:4.2f}x local)"
          "  the ceiling: two processes sharing nothing")  # fmt: skip
    two = rows[2][1][0] / base
    print(f"  2 workers / local: {two:.2f}x  (target >= 1.5x: {'PASS' if two >= 1.5 else 'FAIL'})")
    llm_bound(per_type // 5)


if __name__ == "__main__":
    main()

"""The viewer on a large run: how long ``chaosops view`` takes to open it, each
page's load time, and the server's memory.

Makes (once, in a temporary folder) a scripted run of about 100,000 episodes
with trajectories (the oracle policy; a minute or so), then starts
``chaosops view`` on it, times the start until the URL is printed (the results
indexed), loads each kind of page a few times and reads the server's peak RSS
(``VmHWM``). Progress goes to stderr::

    python benchmarks/viewer.py [--episodes 100000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ENTRIES = 11  # (failure type, tier) entries of the canonical suites


def _chaosops(*args: str) -> list[str]:
    return [sys.executable, "-m", "chaosops.cli", *args]


def _load(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
    return time.perf_counter() - started


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    episodes = parser.parse_args().episodes
    with tempfile.TemporaryDirectory(prefix="chaosops-viewer-") as tmp:
        run = Path(tmp) / "run"
        per_type = math.ceil(episodes / ENTRIES)
        print(f"making a run of {per_type * ENTRIES} episodes...", file=sys.stderr, flush=True)
        subprocess.run(_chaosops("run", "--policy", "oracle", "--episodes-per-type",
                                 str(per_type), "--no-progress", "--concurrency", "256",
                                 "--log-json", "off", "--out", str(run)),
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        size = sum(p.stat().st_size for p in run.iterdir()) / 1e6
        started = time.perf_counter()
        server = subprocess.Popen(_chaosops("view", str(run), str(run), "--port", "0"),
                                  stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            opened = time.perf_counter() - started
            base = line.split(" at ", 1)[1].split()[0].rstrip("/")
            _report(base, server.pid, per_type * ENTRIES, size, opened)
        finally:
            server.terminate()
            server.wait(timeout=30)


def _report(base: str, pid: int, episodes: int, size_mb: float, opened: float) -> None:
    middle = _episode_in_the_middle(base)
    pages = {
        "runs": "/",
        "run (first 100 of all)": "/run/0",
        "run, filtered and sorted": "/run/0?tier=hard&resolved=yes&sort=-reward",
        "run, page 500": "/run/0?start=50000",
        "episode": f"/run/0/episode/{middle}",
        "comparison": "/compare?a=0&b=1",
    }
    print(f"chaosops view of {episodes:,} episodes ({size_mb:,.0f} MB of files)")
    print(f"  opens (the URL printed, the results indexed): {opened:.2f} s  (target < 2 s)")
    worst = 0.0
    for name, path in pages.items():
        times = [_load(base + path) for _ in range(5)]
        worst = max(worst, max(times))
        print(f"  {name:<28} median {statistics.median(times) * 1e3:7.1f} ms, "
              f"max {max(times) * 1e3:7.1f} ms")  # fmt: skip
    print(f"  slowest page load: {worst:.2f} s  (target < 1 s)")
    print(f"  server peak RSS: {_peak_rss_mb(pid):.0f} MB")


def _episode_in_the_middle(base: str) -> str:
    with urllib.request.urlopen(base + "/run/0?start=50000", timeout=60) as response:
        page = response.read().decode()
    return page.split("/episode/", 1)[1].split('"', 1)[0]


if __name__ == "__main__":
    main()

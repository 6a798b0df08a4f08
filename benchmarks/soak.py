"""Peak RSS of run, resume and replay over large scripted runs: flat, or not.

For each size (default 10,000, 100,000 and 300,000 episodes), in a temporary
folder: ``chaosops run`` of the canonical suites with the oracle policy and
``--episodes-per-type`` giving that many episodes (trajectories written); then
``chaosops run --resume`` of the finished folder (it reads both files, checks
them and writes the summary again); then ``chaosops replay``. Each command's
peak RSS is its own (``os.wait4``). It takes minutes; progress goes to stderr::

    python benchmarks/soak.py [--sizes 10000,100000,300000]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENTRIES = 11
"""(failure type, tier) entries of the canonical suites: episodes = 11 x per type."""


def _peak(*args: str) -> tuple[float, float]:
    """Run ``python -m chaosops.cli ARGS``; its peak RSS in MB and its wall seconds."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaosops.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"chaosops {' '.join(args)} failed: {stderr.strip()[-300:]}")
    return usage.ru_maxrss / 1024.0, time.perf_counter() - started  # Linux: KB


def soak(size: int, folder: Path) -> dict[str, float]:
    per_type = math.ceil(size / ENTRIES)
    out = str(folder / f"run-{size}")
    figures: dict[str, float] = {"episodes": per_type * ENTRIES}
    steps = (
        ("run", ("run", "--policy", "oracle", "--episodes-per-type", str(per_type),
                 "--no-progress", "--concurrency", "256", "--log-json", "off", "--out", out)),
        ("resume", ("run", "--resume", "--out", out, "--no-progress")),
        ("replay", ("replay", out)),
    )  # fmt: skip
    for name, args in steps:
        print(f"  {size:>7} episodes: {name}...", file=sys.stderr, flush=True)
        figures[name], figures[f"{name}_s"] = _peak(*args)
    figures["files_mb"] = sum(p.stat().st_size for p in Path(out).iterdir()) / 1e6
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,300000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="chaosops-soak-") as tmp:
        for size in sizes:
            rows.append(soak(size, Path(tmp)))
            for path in Path(tmp).iterdir():  # the disk back before the next size
                subprocess.run(["rm", "-rf", str(path)], check=True)
    print("peak RSS (MB) of each command, and its wall time")
    print(f"{'episodes':>9} {'files MB':>9} {'run':>14} {'resume':>14} {'replay':>14}")
    for r in rows:
        cells = [f"{r[n]:6.0f} ({r[f'{n}_s']:5.1f}s)" for n in ("run", "resume", "replay")]
        row = f"{r['episodes']:>9,.0f} {r['files_mb']:>9.0f} "
        print(row + " ".join(f"{c:>14}" for c in cells))
    base = rows[0]
    for name in ("run", "resume", "replay"):
        growth = max(r[name] for r in rows) / base[name]
        print(f"  {name}: largest / smallest peak {growth:.2f}x  (flat: within 1.5x)")


if __name__ == "__main__":
    main()

"""Figure 1's workload counted instead of timed: instructions and cache misses per turn.

Wall-clock figures on a small shared machine drift by a third within minutes,
more than most changes of the runtime move them. Valgrind's cachegrind counts
instead: instructions executed, first-level data misses, and the misses of a
simulated 1 MiB, 16-way cache (this machine's L2 per core; cachegrind models
two levels, this one as the last), the same from one run to the next (hash
seed fixed). Each configuration runs in two processes, one playing figure 1's
batch once and one three times; the difference divided by two, then by the
batch's turns, is one batch's cost per turn, with imports and warm-up gone
(and without the full collection the timed figures run before each batch).

Configurations: the bare synchronous loop; the plain asyncio layout of
``overhead.plain_asyncio_us_per_turn`` (docs/runtime.md's structure with nothing
else: no deadlines, no checks; the collector handled as the runtime's batches
handle it); the runtime; at concurrency 1 and 64, and at concurrency 1 with
their JSON lines (the write system call's kernel work is not counted:
cachegrind sees user space only).

Needs valgrind (Debian: ``apt-get install valgrind``). Five to ten minutes on
two cores (valgrind runs the interpreter some fifty times slower; two
processes at a time). Run: ``.venv/bin/python benchmarks/cachegrind.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

CONFIGS = (
    ("bare", "bare synchronous loop", 1),
    ("plain", "plain asyncio layout, c1", 1),
    ("plain", "plain asyncio layout, c64", 64),
    ("runtime", "runtime, c1", 1),
    ("runtime", "runtime, c64", 64),
    ("plain_log", "plain layout c1, JSON lines", 1),
    ("runtime_log", "runtime c1, JSON log file", 1),
)
LAST_LEVEL = "--LL=1048576,16,64"


def _child(what: str, concurrency: int, times: int) -> None:
    # Play figure 1's batch ``times`` times in this process (under valgrind).
    import overhead

    from actors import configure_logging, disable_logging

    played: list[int] = []  # each play's turns

    def untimed(fn: Any) -> tuple[float, Any]:
        # No gc.collect() before each batch (not part of what is counted).
        turns = fn()
        played.append(turns)
        return 1.0, turns

    overhead.timed = untimed
    scenarios = overhead._scenarios(25)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.jsonl"
        for _ in range(times):
            if what == "bare":
                overhead.bare_us_per_turn(scenarios)
            elif what.startswith("plain"):
                overhead.plain_asyncio_us_per_turn(
                    scenarios, concurrency, log if what == "plain_log" else None
                )
            elif what == "runtime_log":
                configure_logging(log)
                try:
                    overhead.runtime_us_per_turn(scenarios, concurrency)
                finally:
                    disable_logging()
            else:
                overhead.runtime_us_per_turn(scenarios, concurrency)
    print(*played)


def _counts(what: str, concurrency: int, times: int, out: Path) -> tuple[dict[str, int], int]:
    # One process under cachegrind: its totals by event name, and the turns of a play.
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=yes", LAST_LEVEL,
         f"--cachegrind-out-file={out}", sys.executable, __file__, "--child", what,
         str(concurrency), str(times)],
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{what} c{concurrency} x{times} failed:\n{done.stderr[-2000:]}")
    played = [int(n) for n in done.stdout.split()]
    if len(played) != times or len(set(played)) != 1:
        raise RuntimeError(f"{what} c{concurrency} x{times} played {played} turns")
    events: list[str] = []
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            return dict(zip(events, map(int, line.split()[1:]), strict=True)), played[0]
    raise RuntimeError(f"no summary in {out}")


def main() -> dict[str, dict[str, float]]:
    if shutil.which("valgrind") is None:
        sys.exit("benchmarks/cachegrind.py needs valgrind (Debian: apt-get install valgrind)")
    jobs = [(what, label, c, n) for what, label, c in CONFIGS for n in (1, 3)]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        done = list(pool.map(
            lambda job: _counts(job[0], job[2], job[3], Path(tmp) / f"{job[0]}{job[2]}.{job[3]}"),
            jobs,
        ))  # fmt: skip
    batch_turns = {turns for _, turns in done}
    if len(batch_turns) != 1:  # every configuration plays the same batch
        raise RuntimeError(f"the configurations played batches of {sorted(batch_turns)} turns")
    (turns,) = batch_turns
    totals = {(label, n): counts for (_, label, _, n), (counts, _) in zip(jobs, done, strict=True)}
    per_turn: dict[str, dict[str, float]] = {}
    for _, label, _ in CONFIGS:
        once, thrice = totals[(label, 1)], totals[(label, 3)]
        diff = {k: (thrice[k] - once[k]) / 2 / turns for k in once}
        per_turn[label] = {
            "instructions": diff["Ir"],
            "d1_misses": diff["D1mr"] + diff["D1mw"],
            "l2_misses": diff["ILmr"] + diff["DLmr"] + diff["DLmw"],
        }
    print(f"figure 1's workload under cachegrind ({turns:,} turns a batch; per turn, user space;")
    print("L2: a simulated 1 MiB 16-way cache, cachegrind's last level; hash seed 0)")
    print(f"  {'':30s} {'instructions':>13s} {'L1d misses':>11s} {'L2 misses':>10s}")
    for label, row in per_turn.items():
        print(f"  {label:30s} {row['instructions']:13,.0f} {row['d1_misses']:11,.0f} "
              f"{row['l2_misses']:10,.0f}")  # fmt: skip
    bare = per_turn["bare synchronous loop"]["instructions"]
    for label in ("plain asyncio layout", "runtime"):
        c1 = per_turn[f"{label}, c1"]
        c64 = per_turn[f"{label}, c64"]
        print(f"  {label}: instructions / bare loop's {c1['instructions'] / bare:.2f}x (c1), "
              f"{c64['instructions'] / bare:.2f}x (c64); L2 misses c64 / c1 "
              f"{c64['l2_misses'] / c1['l2_misses']:.2f}x")  # fmt: skip
    return per_turn


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()

"""What a run's outputs cost: episodes/s of a default ``chaosops run`` (results,
trajectories and the log written) beside the same episodes through
``run_batch`` with no outputs, in one process each, side by side.

The heuristic policy plays the canonical suites with ``--episodes-per-type
N`` (11 failure-type entries over the three tiers: 11 x N episodes). The
command's rate leaves out its start-up: the wall time of a run of N minus a
run of N/10, over the episodes between them. The target is a ratio of at
least 0.6. Usage::

    python benchmarks/run_cost.py [--episodes-per-type 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chaosops.agents.policies import heuristic_policy
from chaosops.agents.runner import run_batch
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import DEFAULT_TURN_ORDER
from chaosops.env.models import DifficultyTier


def scenarios(per_type: int) -> list:
    return [s for t in DifficultyTier for s in scenarios_for_tier(t, episodes_per_type=per_type)]


def batch_rate(per_type: int) -> float:
    """Episodes/s of run_batch (the command's concurrency and gc freeze), no outputs."""
    planned = scenarios(per_type)
    started = time.perf_counter()
    run_batch(planned, lambda sc: dict.fromkeys(DEFAULT_TURN_ORDER, heuristic_policy(sc.seed)),
              concurrency=64, gc_freeze=True)  # fmt: skip
    return len(planned) / (time.perf_counter() - started)


def _command_s(per_type: int, folder: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "chaosops.cli", "run", "--policy", "heuristic",
         "--episodes-per-type", str(per_type), "--no-progress", "--out", str(folder)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def command_rate(per_type: int) -> float:
    """Episodes/s of ``chaosops run`` with its default outputs, start-up left out."""
    small = max(1, per_type // 10)
    with tempfile.TemporaryDirectory(prefix="chaosops-cost-") as folder:
        big_s = _command_s(per_type, Path(folder) / "big")
        small_s = _command_s(small, Path(folder) / "small")
    return (len(scenarios(per_type)) - len(scenarios(small))) / (big_s - small_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes-per-type", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.episodes_per_type
    print(f"heuristic policy, {len(scenarios(n))} episodes, median of {args.repeat}")
    batch = statistics.median(batch_rate(n) for _ in range(args.repeat))
    command = statistics.median(command_rate(n) for _ in range(args.repeat))
    print(f"  run_batch, no outputs            {batch:8.0f} episodes/s")
    print(f"  chaosops run, default outputs    {command:8.0f} episodes/s")
    print(f"  ratio                            {command / batch:8.2f}  (target >= 0.6)")


if __name__ == "__main__":
    main()

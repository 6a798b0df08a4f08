"""What a run's outputs cost: episodes/s of a default ``chaosops run`` (results,
trajectories and the log written) beside the same episodes through
``run_batch`` with no outputs, in one process each, side by side.

The heuristic policy plays the canonical suites with ``--episodes-per-type
N`` (11 failure-type entries over the three tiers: 11 x N episodes). The
command's rate leaves out its start-up: the wall time of a run of N minus a
run of N/10, over the episodes between them. The target is a ratio of at
least 0.6. ``--parts`` also times the command with one of its outputs'
costs taken out, each in turn: the JSON log (``--log-json off``), the
prompts rendered for the scripted turns (the trajectory lines keep a null
prompt), and the system prompt's text in each line (one word instead). What
the command saves without one is what that part costs. Usage::

    python benchmarks/run_cost.py [--episodes-per-type 200] [--repeat 3] [--parts]
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


PARTS = {
    "log": "the JSON log (--log-json off)",
    "prompts": "the prompts rendered for scripted turns",
    "system-prompt": "the system prompt's text in every line",
}


def _without(part: str) -> None:
    """In the ``--child`` process: the command as it is, less ``part``'s cost
    (none for ``""``; the log's is taken out by its flag)."""
    if part == "prompts":
        from chaosops.runs import engine

        engine.renderer = lambda: None  # trajectory lines get a null prompt
    elif part == "system-prompt":
        from chaosops.agents.llm import render

        render.system_prompt = lambda role: "-"


def _command_s(per_type: int, folder: Path, without: str | None = None) -> float:
    flags = ["--log-json", "off"] if without == "log" else []
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--child", without or "", "run", "--policy", "heuristic",
         "--episodes-per-type", str(per_type), "--no-progress", "--out", str(folder), *flags],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - started


def command_rate(per_type: int, without: str | None = None) -> float:
    """Episodes/s of ``chaosops run`` with its default outputs (less ``without``,
    one of :data:`PARTS`), start-up left out."""
    small = max(1, per_type // 10)
    with tempfile.TemporaryDirectory(prefix="chaosops-cost-") as folder:
        big_s = _command_s(per_type, Path(folder) / "big", without)
        small_s = _command_s(small, Path(folder) / "small", without)
    return (len(scenarios(per_type)) - len(scenarios(small))) / (big_s - small_s)


def print_parts(per_type: int, repeat: int, whole: float, batch: float) -> None:
    """What each part costs: the command's time a thousand episodes, with and without it."""
    print("what each part costs (ms of the command a 1,000 episodes; the ratio without it):")
    for part, label in PARTS.items():
        rate = statistics.median(command_rate(per_type, part) for _ in range(repeat))
        saved = (1 / whole - 1 / rate) * 1e6
        print(f"  {label:<42} {saved:6.0f} ms   {rate / batch:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes-per-type", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parts", action="store_true", help="what each output costs")
    args = parser.parse_args()
    n = args.episodes_per_type
    print(f"heuristic policy, {len(scenarios(n))} episodes, median of {args.repeat}")
    batch = statistics.median(batch_rate(n) for _ in range(args.repeat))
    command = statistics.median(command_rate(n) for _ in range(args.repeat))
    print(f"  run_batch, no outputs            {batch:8.0f} episodes/s")
    print(f"  chaosops run, default outputs    {command:8.0f} episodes/s")
    print(f"  ratio                            {command / batch:8.2f}  (target >= 0.6)")
    if args.parts:
        print_parts(n, args.repeat, command, batch)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:  # the command (less one part: see _without)
        _without(sys.argv[2])
        from chaosops.cli._main import main as command

        sys.exit(command(sys.argv[3:]))
    main()

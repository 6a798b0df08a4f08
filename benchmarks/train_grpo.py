"""What ChaosOps costs a GRPO run: the CPU time of our side (ChaosOpsToolEnv's
reset, its tools and get_reward, the other roles' policies included) against
the whole run's (TRL's generation, loss and optimizer on the tiny model of
examples/train_grpo.py). Needs the train extra. Usage::

    python benchmarks/train_grpo.py [--steps 8]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import train_grpo

from chaosops.train.trl import ChaosOpsToolEnv

OURS = {"seconds": 0.0, "calls": 0}


def _timed(method):
    @functools.wraps(method)
    def timed(*args, **kwargs):
        started = time.process_time()
        try:
            return method(*args, **kwargs)
        finally:
            OURS["seconds"] += time.process_time() - started
            OURS["calls"] += 1

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="GRPO steps (default 8)")
    args = parser.parse_args()
    # every tool goes through _move: timing it, reset and get_reward times our side
    for name in ("reset", "_move", "get_reward"):
        setattr(ChaosOpsToolEnv, name, _timed(getattr(ChaosOpsToolEnv, name)))
    started = time.process_time()
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        train_grpo.train(args.steps, warmup=120, out=scratch)
    total = time.process_time() - started
    ours = OURS["seconds"]
    print(f"{args.steps} GRPO steps in {time.perf_counter() - wall:.1f} s wall, "
          f"{total:.1f} s CPU (warm-up and model building included)")  # fmt: skip
    calls = OURS["calls"]
    print(f"ChaosOps side: {ours * 1000:.1f} ms CPU in {calls} calls "
          f"({ours / calls * 1e6:.0f} us a call), {ours / total:.3%} of the run")  # fmt: skip


if __name__ == "__main__":
    main()

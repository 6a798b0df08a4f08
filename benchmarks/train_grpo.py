"""What a GRPO step of examples/train_grpo.py costs, and ChaosOps' share of it:
the CPU time of our side (ChaosOpsToolEnv's reset, its tools with the other
roles' turns, and the scoring of finished rollouts, the credit's
counterfactual included) against the GRPO phase's (TRL's generation, the
loss and the optimizer on the example's model). Needs the train extra. Usage::

    python benchmarks/train_grpo.py [--steps 8] [--threads 1]
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
import torch
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
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    given = parser.parse_args()
    steps = given.steps
    args = train_grpo.options().parse_args(
        ["--steps", str(steps), "--sft-steps", "400", "--threads", str(given.threads)]
    )
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        examples = train_grpo.oracle_demonstrations(Path(scratch) / "oracle", args.seed_offset)
        tokenizer = train_grpo.build_tokenizer(train_grpo.corpus_of(examples))
        model = train_grpo.build_model(tokenizer, args.width)
        train_grpo.sft(model, tokenizer, examples, args, [])
        # every tool goes through _move; the outcome property scores a rollout
        for name in ("reset", "_move"):
            setattr(ChaosOpsToolEnv, name, _timed(getattr(ChaosOpsToolEnv, name)))
        ChaosOpsToolEnv.outcome = property(_timed(ChaosOpsToolEnv.outcome.fget))
        started, wall = time.process_time(), time.perf_counter()
        train_grpo.grpo(model, tokenizer, args, [], Path(scratch))
        total, wall = time.process_time() - started, time.perf_counter() - wall
    ours, calls = OURS["seconds"], OURS["calls"]
    print(f"{steps} GRPO steps in {wall:.1f} s wall, {wall / steps:.1f} s a step; "
          f"{total:.1f} s CPU")  # fmt: skip
    share = ours / total
    print(f"ChaosOps side: {ours * 1000:.1f} ms CPU in {calls} calls "
          f"({ours / calls * 1e6:.0f} us a call), {share:.3%} of the GRPO phase")  # fmt: skip


if __name__ == "__main__":
    main()

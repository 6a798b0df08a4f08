"""Turns per second of ``--policy hf`` at concurrency 1, 4, 16 and 64: turns
pending across episodes batched into one ``generate`` (``--hf-batch`` 16, the default)
against one turn at a time (``--hf-batch 1``), on the CPU, with a small
Qwen2 built on the spot and the GRPO example's 2,048-token vocabulary
(random weights: every answer runs to ``--max-new-tokens``, so each turn
costs the same whatever it says).

The two sides alternate, each measured ``--repeats`` times, and the medians
are compared (this machine's speed drifts). Usage::

    python benchmarks/hf_policy.py [--width 128] [--max-new-tokens 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import torch

from chaosops.agents.hf import HFPolicy, HFSettings
from chaosops.env.models import AgentRole
from chaosops.runs import run_to_folder
from chaosops.scenarios import canonical_suite_paths, load_scenarios
from chaosops.train.tiny import write_tiny_checkpoint

SCENARIOS = [s for path in canonical_suite_paths() for s in load_scenarios(path)]


def turns_per_second(policy: HFPolicy, concurrency: int, folder: Path) -> float:
    """Turns a second over ``concurrency`` episodes played at once, every role the model."""
    scenarios = [dataclasses.replace(s, max_steps=4) for s in (SCENARIOS * 2)[:concurrency]]
    started = time.perf_counter()
    summary = run_to_folder(folder, scenarios, dict.fromkeys(AgentRole, policy),
                            concurrency=concurrency, log=False)  # fmt: skip
    elapsed = time.perf_counter() - started
    return sum(role.turns for role in summary.roles) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=2048, help="the tokenizer's (the example's)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 4, 16, 64])
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        model = write_tiny_checkpoint(Path(scratch) / "model", width=args.width,
                                      vocab_size=args.vocab)  # fmt: skip
        sides = {
            size: HFPolicy.load(HFSettings(model=str(model), batch=size, device="cpu",
                                           max_new_tokens=args.max_new_tokens))
            for size in (1, 16)
        }  # fmt: skip
        print(f"model: Qwen2 width {args.width}, 2 layers, vocabulary {args.vocab}; "
              f"{args.max_new_tokens} new tokens "
              f"a turn; torch {torch.__version__}, 1 thread")  # fmt: skip
        print("concurrency  unbatched turns/s  batched turns/s  ratio (median)")
        for concurrency in args.concurrency:
            seen: dict[int, list[float]] = {1: [], 16: []}
            for repeat in range(args.repeats):
                for size, policy in sides.items():  # alternating the two sides
                    folder = Path(scratch) / f"run-{concurrency}-{size}-{repeat}"
                    seen[size].append(turns_per_second(policy, concurrency, folder))
            one, many = (statistics.median(seen[size]) for size in (1, 16))
            print(f"{concurrency:>11}  {one:>17.1f}  {many:>15.1f}  {many / one:>6.2f}x",
                  flush=True)  # fmt: skip
        for policy in sides.values():
            policy.close()


if __name__ == "__main__":
    main()

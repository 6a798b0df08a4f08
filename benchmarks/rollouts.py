"""Rollout turns per second for GRPO, one group of G rollouts of one row, the
SRE played by the same small model both ways:

* ``runtime``: :class:`chaosops.train.rollouts.RuntimeRollouts`, the group's
  episodes played at once by the runtime, the model's turns batched into one
  ``generate`` call as they come;
* ``tool env``: the loop TRL's ``environment_factory`` runs over
  :class:`chaosops.train.trl.ChaosOpsToolEnv`: one environment per rollout,
  every open rollout's next call generated in one padded ``generate`` per
  iteration (the chat rendered again each time), then each call made.

The model is a Qwen2 built on the spot (random weights, the GRPO example's
vocabulary): its answers are no moves, so each turn plays the fallback and
costs the same whatever it says; both sides generate the same number of new
tokens a turn. The sides alternate, ``--rounds`` times, and the medians are
compared (this machine's speed drifts). Usage::

    python benchmarks/rollouts.py [--groups 8 32] [--rounds 3] [--width 128]
"""

from __future__ import annotations

import argparse
import statistics
import time
from types import SimpleNamespace
from typing import Any

import torch

from chaosops.agents.conversation import tool_schemas
from chaosops.scenarios import choose_scenario
from chaosops.train import row_of
from chaosops.train.rollouts import RuntimeRollouts
from chaosops.train.tiny import chaosops_text, tiny_model, tiny_tokenizer
from chaosops.train.trl import ChaosOpsToolEnv

SCENARIO = choose_scenario(failure_type="misrouted_traffic", difficulty="easy", seed=3)


def runtime_side(trainer: Any, group: int, tokens: int) -> tuple[int, float]:
    rollouts = RuntimeRollouts(["sre"], max_new_tokens=tokens, batch=group, temperature=1.0)
    prompts = [rollouts.prompt_of(SCENARIO, "sre")] * group
    started = time.perf_counter()
    out = rollouts(prompts, trainer)
    turns = sum(sum(1 for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1]))
                for mask in out["env_mask"])  # fmt: skip
    return turns, time.perf_counter() - started


def tool_env_side(model: Any, tokenizer: Any, group: int, tokens: int) -> tuple[int, float]:
    started = time.perf_counter()
    row = row_of(SCENARIO, "sre")
    envs = [ChaosOpsToolEnv() for _ in range(group)]
    chats = []
    for env in envs:
        system, user = row["prompt"]
        chats.append([system, {**user, "content": user["content"] + env.reset(**row)}])
    turns = 0
    while open_ := [i for i, env in enumerate(envs) if not env.done]:
        _generate(model, tokenizer, [chats[i] for i in open_], tokens)
        for i in open_:  # random weights: no call parses; TRL's loop then ends, the
            chats[i].append({"role": "tool", "name": "noop", "content": envs[i].noop()})
            turns += 1  # rollout played by the fallback, here one noop a turn
    for env in envs:
        env.close()
    return turns, time.perf_counter() - started


def _generate(model: Any, tokenizer: Any, chats: list[list[dict]], tokens: int) -> Any:
    texts = [tokenizer.apply_chat_template(c, tools=tool_schemas(), tokenize=False,
                                           add_generation_prompt=True) for c in chats]  # fmt: skip
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        return model.generate(**batch, max_new_tokens=tokens, min_new_tokens=tokens,
                              do_sample=True, pad_token_id=tokenizer.pad_token_id)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=32, help="new tokens a turn")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer(chaosops_text())
    tokenizer.padding_side = "left"
    model = tiny_model(tokenizer, width=args.width).eval()
    trainer = SimpleNamespace(model=model, processing_class=tokenizer)
    for group in args.groups:
        rates: dict[str, list[float]] = {"runtime": [], "tool env": []}
        for _ in range(args.rounds):
            turns, wall = runtime_side(trainer, group, args.tokens)
            rates["runtime"].append(turns / wall)
            turns, wall = tool_env_side(model, tokenizer, group, args.tokens)
            rates["tool env"].append(turns / wall)
        runtime, tool = (statistics.median(rates[s]) for s in ("runtime", "tool env"))
        print(
            f"group {group}: runtime {runtime:.1f} turns/s, tool env {tool:.1f} turns/s, "
            f"ratio {runtime / tool:.2f}x (medians of {args.rounds})",
            flush=True,
        )


if __name__ == "__main__":
    main()

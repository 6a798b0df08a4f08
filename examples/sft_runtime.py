"""SFT on the runtime's own turns, then the checkpoint played with ``--policy hf``.

The model is built as the GRPO example builds one (``chaosops.train.tiny``),
but it learns the format ``chaosops run`` asks in: each row is one turn of a
run folder's ``trajectories.jsonl``, the messages the role saw (its system
prompt, the rendered view) and the move it made, as JSON. The run:

1. an oracle SRE with heuristic teammates plays the canonical scenarios with
   ``--seed-offset`` added to every seed (training seeds);
2. supervised steps on its SRE turns (the prompt masked), until 90% of a
   sample of them get the oracle's own move as the greedy answer, or
   ``--steps`` run out;
3. the checkpoint is saved in ``OUT/model``, and ``evaluate_model`` plays the
   SRE of the held-out canonical scenarios through the runtime, with
   heuristic teammates, as ``--policy hf --hf-answer json`` does.

Needs the ``train`` extra. Usage::

    python examples/sft_runtime.py --out runs/sft-runtime [--steps 1500]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import time
from pathlib import Path

import torch

from chaosops.agents.llm.parse import parse_action
from chaosops.agents.policies import scripted_policy
from chaosops.env.models import AgentRole
from chaosops.runs import run_to_folder
from chaosops.scenarios import canonical_suite_paths, load_scenarios
from chaosops.train import evaluate_model
from chaosops.train.tiny import tiny_model, tiny_tokenizer

CANONICAL = [s for path in canonical_suite_paths() for s in load_scenarios(path)]


def demonstrations(folder: Path, seed_offset: int) -> list[dict]:
    """The oracle SRE's turns on the training seeds: (messages, answer) rows."""
    scenarios = [dataclasses.replace(s, seed=s.seed + seed_offset) for s in CANONICAL]

    def players(scenario):
        others = scripted_policy("heuristic", scenario)
        return {role: others for role in AgentRole} | {
            AgentRole.SRE: scripted_policy("oracle", scenario)
        }

    run_to_folder(folder, scenarios, players, name="oracle-sre", log=False)
    turns = [json.loads(line) for line in (folder / "trajectories.jsonl").open()]
    return [{"prompt": t["prompt"], "answer": t["completion"]} for t in turns if t["role"] == "sre"]


def encode(tokenizer, row: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The turn's tokens, and its labels: the answer and the end of the turn only."""
    asked = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True,
                                          tokenize=False)  # fmt: skip
    prompt = tokenizer(asked, add_special_tokens=False)["input_ids"]
    answer = tokenizer(row["answer"] + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    labels = [-100] * len(prompt) + answer
    return torch.tensor([prompt + answer]), torch.tensor([labels])


def agreement(model, tokenizer, rows: list[dict]) -> tuple[float, float]:
    """The shares of greedy answers to ``rows`` that are moves at all, and
    that are the oracle's own move."""
    model.eval()
    moves = same = 0
    for row in rows:
        asked = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True,
                                              tokenize=False)  # fmt: skip
        ids = tokenizer(asked, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=48, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        action, _ = parse_action(tokenizer.decode(out[0, ids.shape[1] :],
                                                  skip_special_tokens=True), "sre")  # fmt: skip
        moves += action is not None
        same += action is not None and action == parse_action(row["answer"], "sre")[0]
    model.train()
    return moves / len(rows), same / len(rows)


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500, help="most SFT steps (1500)")
    parser.add_argument("--lr", type=float, default=2e-3, help="learning rate")
    parser.add_argument("--width", type=int, default=128, help="the model's hidden size")
    parser.add_argument("--seed", type=int, default=0, help="torch's and the rows' order")
    parser.add_argument("--seed-offset", type=int, default=10_000, help="training seeds' offset")
    parser.add_argument("--held-out", type=int, default=55,
                        help="canonical scenarios the runtime evaluates on (55: all)")  # fmt: skip
    parser.add_argument("--out", required=True, help="output folder")
    return parser


def main() -> None:
    args = options().parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    started, out = time.perf_counter(), Path(args.out)
    rows = demonstrations(out / "oracle-run", args.seed_offset)
    texts = [m["content"] for row in rows for m in row["prompt"]] + [r["answer"] for r in rows]
    tokenizer = tiny_tokenizer(texts)
    model = tiny_model(tokenizer, args.width)
    print(f"{len(rows)} SFT rows (the oracle SRE's turns); model "
          f"{model.num_parameters() / 1e6:.2f} M parameters", flush=True)  # fmt: skip
    batch = [encode(tokenizer, row) for row in rows]
    sample = rows[:: max(1, len(rows) // 16)]
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    order = random.Random(args.seed)
    for step in range(1, args.steps + 1):
        ids, labels = batch[order.randrange(len(batch))]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 100 == 0:
            moves, same = agreement(model, tokenizer, sample)
            print(f"sft step {step}: loss {loss.item():.3f}, answers that are moves {moves:.0%}, "
                  f"the oracle's {same:.0%}", flush=True)  # fmt: skip
            if same >= 0.9:
                break
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    held_out = CANONICAL[: args.held_out]
    figures = evaluate_model(model, tokenizer, held_out, role="sre", out=out / "held-out",
                             answer="json", max_new_tokens=48, device="cpu")  # fmt: skip
    shown = ", ".join(f"{name} {value:.2f}" for name, value in figures.items())
    print(f"held-out, through the runtime: {shown}; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

"""Reinforcement learning against its teacher: SFT on the heuristic's play, then
GRPO on episodes the runtime plays, beside SFT alone given the same time.

The model (``chaosops.train.tiny``: built here, nothing downloaded) plays the
SRE, the dev and the manager; the heuristic plays the oversight. On the
held-out canonical rows every one of those seats decides the outcome
(``chaosops.train.evaluate.decisive``), and the heuristic in them, the
teacher, resolves 45 of 55. The run:

1. the heuristic plays every seat of the training scenarios
   (``chaosops.train.training_scenarios``: no held-out row opens as one
   does) into a run folder; its three seats' turns are the SFT rows, in the
   chat format the rollouts have, resolved or not (every failure type);
2. supervised steps, each on one role's chat of one episode (all its moves
   labelled), until the greedy move matches the teacher's on a validation
   split of those turns (a sixth of the scenarios) as often as it will: the
   warm-up stops when that share has not risen for ``--patience``
   checks;
3. from that one warm-up, two branches of the same wall time: GRPO through
   ``RuntimeRollouts`` (the team's return, the legal share at a small
   weight), and SFT alone, continued;
4. each branch, the warm-up and the teacher play the 55 held-out rows
   through the runtime (``evaluate_model``: the prompts, batching and judge
   of ``chaosops run --policy hf --hf-conversation episode``), greedy, each a
   run folder under ``OUT``; the figures are paired by row, with 95%
   intervals, in ``OUT/report.json``.

Needs the ``train`` extra. Usage::

    python examples/grpo_runtime.py --seed 0 --out runs/rl-seed0 [--seconds 360]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import parse_response

import actors
from chaosops.agents.policies import policies_for
from chaosops.outputs.files import ResultsReader
from chaosops.runs import run_to_folder
from chaosops.stats import mean_interval
from chaosops.train import (
    evaluate_model,
    held_out_scenarios,
    legal_share,
    sft_rows,
    team_return,
    tool_schemas,
    training_scenarios,
)
from chaosops.train.rollouts import RuntimeRollouts
from chaosops.train.tiny import sft_corpus, tiny_model, tiny_tokenizer

SEATS = ("sre", "dev", "manager")
SCHEMAS = tool_schemas()
SETTINGS = {"max_new_tokens": 48, "device": "cpu", "conversation": "episode"}


def demonstrations(folder: Path, scenarios: list) -> list[dict]:
    """The heuristic's turns in the model's seats, on the training scenarios."""
    run_to_folder(folder, scenarios, lambda sc: policies_for("heuristic", sc),
                  name="teacher", log=False)  # fmt: skip
    return [row for seat in SEATS for row in sft_rows(folder, role=seat, resolved_only=False)]


def split(examples: list[dict], seed: int) -> tuple[list[dict], list[dict]]:
    """Training and validation rows, a sixth of the episodes held for validation."""
    episodes = sorted({row["episode_id"] for row in examples})
    random.Random(seed).shuffle(episodes)
    held = set(episodes[: max(1, len(episodes) // 6)])
    return ([r for r in examples if r["episode_id"] not in held],
            [r for r in examples if r["episode_id"] in held])  # fmt: skip


def encode(tokenizer, messages: list[dict], generation_prompt: bool) -> list[int]:
    chat = tokenizer.apply_chat_template(
        messages, tools=SCHEMAS, return_dict=True, add_generation_prompt=generation_prompt
    )
    return chat["input_ids"]


def chats(examples: list[dict]) -> list[list[dict]]:
    """The rows grouped by episode and role, each group in turn order."""
    grouped: dict[tuple, list[dict]] = {}
    for row in examples:
        grouped.setdefault((row["episode_id"], row["role"]), []).append(row)
    return [sorted(turns, key=lambda row: row["turn"]) for turns in grouped.values()]


def chat_labels(tokenizer, turns: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """The last turn's whole chat as ids, labelled at every move's tokens: the
    template only appends, so each turn's chat is a prefix of the last's."""
    last = turns[-1]
    ids = encode(tokenizer, last["prompt"] + last["completion"], False)
    labels = [-100] * len(ids)
    for row in turns:
        start = len(encode(tokenizer, row["prompt"], True))
        end = len(encode(tokenizer, row["prompt"] + row["completion"], False))
        labels[start:end] = ids[start:end]
    return torch.tensor([ids]), torch.tensor([labels])


class Supervised:
    """SFT on the rows' calls, one role's chat of one episode a step: every
    move of that chat is a label in one pass, the rest of the chat masked."""

    def __init__(self, model, tokenizer, examples: list[dict], lr: float, seed: int) -> None:
        self.model, self.order = model, random.Random(seed)
        self.batch = [chat_labels(tokenizer, turns) for turns in chats(examples)]
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        self.steps = 0

    def step(self) -> float:
        self.model.train()
        ids, labels = self.batch[self.order.randrange(len(self.batch))]
        loss = self.model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)  # one chat a step: spiky
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.steps += 1
        return loss.item()


def agreement(model, tokenizer, rows: list[dict]) -> float:
    """The share of ``rows`` whose greedy call is the teacher's move."""
    model.eval()
    same = 0
    for row in rows:
        prompt = encode(tokenizer, row["prompt"], True)
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), max_new_tokens=48, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        said = parse_response(tokenizer, out[0, len(prompt) :].tolist(), prefix=prompt,
                              tools=SCHEMAS)  # fmt: skip
        calls = [c["function"] for c in said.get("tool_calls") or []]
        wanted = row["completion"][0]["tool_calls"][0]["function"]
        same += bool(calls) and _same_call(calls[0], wanted)
    return same / len(rows)


def _same_call(made: dict, wanted: dict) -> bool:
    arguments = wanted["arguments"]
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    return made.get("name") == wanted["name"] and made.get("arguments") == arguments


def warm_up(sft: Supervised, tokenizer, validation: list[dict], args, log: list) -> None:
    """SFT until the validation agreement has not risen for ``--patience``
    checks; the model is left with the weights of its best check."""
    best, since, kept = -1.0, 0, None
    while sft.steps < args.sft_max_steps and since < args.patience:
        for _ in range(args.check_every):
            loss = sft.step()
        rate = agreement(sft.model, tokenizer, validation)
        if rate > best:
            best, since = rate, 0
            kept = {k: v.detach().clone() for k, v in sft.model.state_dict().items()}
        else:
            since += 1
        log.append({"phase": "warm-up", "step": sft.steps, "loss": loss, "agreement": rate})
        print(f"warm-up step {sft.steps}: loss {loss:.3f}, teacher's move on "
              f"validation {rate:.0%}", flush=True)  # fmt: skip
    sft.model.load_state_dict(kept)
    print(f"warm-up: kept the check at {best:.0%}", flush=True)


class Clock:
    """A branch's training time, its evaluations left out, and the points of
    its curve: the held-out rows played once the time passes each of
    ``marks`` (seconds; the last one ends the branch)."""

    def __init__(self, marks: list[float], evaluate) -> None:
        self.marks, self.evaluate, self.points = marks, evaluate, []

    def begin(self) -> None:
        self.start, self.paused, self.rows = time.perf_counter(), 0.0, None

    def elapsed(self) -> float:
        return time.perf_counter() - self.start - self.paused

    def done(self, model, branch: str) -> bool:
        """Evaluate when a mark is passed; whether the branch's time is spent."""
        if len(self.points) < len(self.marks) and self.elapsed() >= self.marks[len(self.points)]:
            at, paused = self.elapsed(), time.perf_counter()
            self.rows = self.evaluate(model, f"{branch}-{len(self.points) + 1}")
            self.points.append({"branch": branch, "seconds": at, "figures": figures(self.rows)})
            self.paused += time.perf_counter() - paused
            model.train()
        return len(self.points) == len(self.marks)


class Deadline(TrainerCallback):
    """Stops GRPO when its clock's time is spent; logs each step."""

    def __init__(self, clock: Clock, log: list) -> None:
        self.clock, self.log = clock, log

    def on_train_begin(self, args, state, control, **kwargs):
        self.clock.begin()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        control.should_training_stop = self.clock.done(model, "grpo")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            point = {"phase": "grpo", "step": state.global_step, "seconds": self.clock.elapsed(),
                     "return": logs.get("rewards/team_return/mean", math.nan),
                     "legal": logs.get("rewards/legal_share/mean", math.nan)}  # fmt: skip
            self.log.append(point)
            print(f"grpo step {point['step']} ({point['seconds']:.0f} s): return "
                  f"{point['return']:+.1f}, legal {point['legal']:.2f}", flush=True)  # fmt: skip


def grpo(model, tokenizer, args, out: Path, log: list, clock: Clock, scenarios: list) -> None:
    """GRPO through the runtime's rollouts for the clock's time."""
    model.save_pretrained(out / "warm-up")  # the KL term's reference model
    kept = out / "rollouts" if args.keep_rollouts else None
    rollouts = RuntimeRollouts(SEATS, temperature=args.temperature, max_new_tokens=48,
                               batch=64, out=kept)  # fmt: skip
    rows = [row for seat in SEATS for row in rollouts.rows(scenarios, seat)]
    random.Random(args.seed).shuffle(rows)
    config = GRPOConfig(
        output_dir=str(out / "grpo"), max_steps=100_000, num_generations=args.generations,
        per_device_train_batch_size=args.generations, beta=args.beta,
        max_completion_length=8192, temperature=args.temperature, learning_rate=args.lr,
        logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, seed=args.seed,
        reward_weights=[1.0, args.legal_weight],
    )  # fmt: skip
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=config,
                          train_dataset=Dataset.from_list(rows), rollout_func=rollouts,
                          reward_funcs=[team_return, legal_share],
                          callbacks=[Deadline(clock, log)])  # fmt: skip
    with actors.logging_to(out / "rollouts.log.jsonl"):  # the rollouts' turns, not the console
        trainer.train()


def more_sft(sft: Supervised, clock: Clock) -> int:
    """SFT alone for the clock's time: the control; its steps."""
    first = sft.steps
    clock.begin()
    while not clock.done(sft.model, "sft-alone"):
        sft.step()
    return sft.steps - first


def held_out(model, tokenizer, folder: Path) -> list[tuple[bool, float]]:
    """The model in the three seats on the held-out rows: (resolved, return) per row."""
    evaluate_model(model, tokenizer, held_out_scenarios(), role=list(SEATS), out=folder,
                   name=folder.name, **SETTINGS)  # fmt: skip
    return outcomes(folder)


def teacher(folder: Path) -> list[tuple[bool, float]]:
    run_to_folder(folder, held_out_scenarios(), lambda sc: policies_for("heuristic", sc),
                  name="teacher", log=False)  # fmt: skip
    return outcomes(folder)


def outcomes(folder: Path) -> list[tuple[bool, float]]:
    """Each episode's (resolved, return), in the held-out rows' order."""
    return [(bool(r["resolved"]), float(r["cumulative_reward"])) for r in ResultsReader(folder)]


def figures(rows: list[tuple[bool, float]]) -> dict:
    """Success and return over all rows and by tier, each with its 95% interval."""
    tiers = [str(sc.difficulty) for sc in held_out_scenarios()]
    chosen = {"all": rows} | {
        tier: [row for row, t in zip(rows, tiers, strict=True) if t == tier]
        for tier in ("easy", "medium", "hard")
    }
    return {name: {"success": _mean([float(ok) for ok, _ in part]),
                   "return": _mean([ret for _, ret in part])}
            for name, part in chosen.items()}  # fmt: skip


RUN_FILE = """name = "trained"
policy = "heuristic"

[roles]
sre = "trained"
dev = "trained"
manager = "trained"

[hf.trained]
model = "{model}"
max_new_tokens = 48
device = "cpu"
conversation = "episode"
"""


def chaosops_eval(checkpoint: Path, out: Path) -> list[tuple[bool, float]]:
    """The saved checkpoint in the same seats through ``chaosops eval``: its rows."""
    run_file = out.with_suffix(".toml")
    run_file.write_text(RUN_FILE.format(model=checkpoint.resolve()))
    chaosops = shutil.which("chaosops") or str(Path(sys.executable).with_name("chaosops"))
    command = [chaosops, "eval", "--config", str(run_file), "--policies", "heuristic",
               "--out", str(out), "--log-json", str(out.with_suffix(".log.jsonl"))]  # fmt: skip
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a seat never made a move of its own, and said so
        raise RuntimeError(f"chaosops eval failed ({done.returncode}): {done.stderr[-2000:]}")
    return outcomes(out / "trained")


def paired(a: list[tuple[bool, float]], b: list[tuple[bool, float]]) -> dict:
    """``a`` less ``b``, row by row: the mean change of success and return."""
    return {"success": _mean([float(x[0]) - float(y[0]) for x, y in zip(a, b, strict=True)]),
            "return": _mean([x[1] - y[1] for x, y in zip(a, b, strict=True)])}  # fmt: skip


def _mean(values: list[float]) -> dict:
    interval = mean_interval(values)
    half = 0.0 if interval is None else (interval[1] - interval[0]) / 2
    return {"mean": sum(values) / len(values), "ci95": half}


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="torch's, the rows' order, TRL's")
    parser.add_argument("--seconds", type=float, default=360.0,
                        help="wall time of each branch, GRPO and SFT alone (360)")  # fmt: skip
    parser.add_argument("--checks", type=int, default=3,
                        help="held-out evaluations a branch, the last at its end (3)")  # fmt: skip
    parser.add_argument("--episodes-per-type", type=int, default=6,
                        help="training episodes of each off-pool type and tier (6)")  # fmt: skip
    parser.add_argument("--width", type=int, default=128, help="the model's hidden size")
    parser.add_argument("--sft-lr", type=float, default=1e-3, help="SFT learning rate")
    parser.add_argument("--sft-max-steps", type=int, default=2400, help="most warm-up steps")
    parser.add_argument("--check-every", type=int, default=300, help="warm-up steps a check")
    parser.add_argument("--patience", type=int, default=4, help="checks without a gain")
    parser.add_argument("--lr", type=float, default=5e-4, help="GRPO learning rate")
    parser.add_argument("--beta", type=float, default=0.0, help="KL weight to the warm-up")
    parser.add_argument("--generations", type=int, default=8, help="rollouts a row (8)")
    parser.add_argument("--temperature", type=float, default=1.0, help="rollouts' temperature")
    parser.add_argument("--legal-weight", type=float, default=20.0, help="legal-share weight")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    parser.add_argument("--keep-rollouts", action="store_true", help="rollouts' run folders")
    parser.add_argument("--out", required=True, help="output folder")
    return parser


def main() -> None:
    args = options().parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out, log = Path(args.out), []
    scenarios = training_scenarios(args.episodes_per_type)
    examples = demonstrations(out / "teacher-training", scenarios)
    training, validation = split(examples, args.seed)
    tokenizer = tiny_tokenizer(sft_corpus(examples))
    model = tiny_model(tokenizer, args.width)
    print(f"{len(training)} SFT rows, {len(validation)} validation; model "
          f"{model.num_parameters() / 1e6:.2f} M parameters", flush=True)  # fmt: skip
    sft = Supervised(model, tokenizer, training, args.sft_lr, args.seed)
    warm_up(sft, tokenizer, validation, args, log)
    played = {"teacher": teacher(out / "teacher"),
              "warm-up": held_out(model, tokenizer, out / "warm-up-eval")}  # fmt: skip
    sft.model.save_pretrained(out / "warm-up")

    def evaluate(model, name: str) -> list[tuple[bool, float]]:
        return held_out(model, tokenizer, out / f"{name}-eval")

    trained = Clock([args.seconds * (i + 1) / args.checks for i in range(args.checks)], evaluate)
    grpo(model, tokenizer, args, out, log, trained, scenarios)
    played["grpo"] = trained.rows
    model.save_pretrained(out / "grpo-final")
    tokenizer.save_pretrained(out / "grpo-final")
    played["grpo, chaosops eval"] = chaosops_eval(out / "grpo-final", out / "chaosops-eval")
    control = type(model).from_pretrained(out / "warm-up")
    sft.model = control
    sft.optimizer = torch.optim.AdamW(control.parameters(), lr=args.sft_lr)
    control_clock = Clock([point["seconds"] for point in trained.points], evaluate)
    steps = more_sft(sft, control_clock)
    played["sft-alone"] = control_clock.rows
    start = {"branch": "warm-up", "seconds": 0.0, "figures": figures(played["warm-up"])}
    report = {
        "seed": args.seed, "seconds": trained.points[-1]["seconds"], "sft_alone_steps": steps,
        "log": log, "curve": [start, *trained.points, *control_clock.points],
        "figures": {name: figures(rows) for name, rows in played.items()},
        "grpo_less": {name: paired(played["grpo"], played[name])
                      for name in ("teacher", "warm-up", "sft-alone")},
    }  # fmt: skip
    (out / "report.json").write_text(json.dumps(report, indent=1))
    for name, row in report["figures"].items():
        print(f"{name}: success {row['all']['success']['mean']:.2f}, return "
              f"{row['all']['return']['mean']:+.1f} on 55 held-out rows")  # fmt: skip
    for name, gain in report["grpo_less"].items():
        print(f"GRPO less {name}: success {gain['success']['mean']:+.2f} ± "
              f"{gain['success']['ci95']:.2f}, return {gain['return']['mean']:+.1f} ± "
              f"{gain['return']['ci95']:.1f} (95%, paired by row)")  # fmt: skip


if __name__ == "__main__":
    main()

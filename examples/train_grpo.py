"""SFT then GRPO on ChaosOps, on this machine's CPU, with a model built here.

Nothing is downloaded (``chaosops.train.tiny``): the tokenizer is trained on
the spot on ChaosOps text (byte-level BPE, so any text encodes), the chat
template is the Qwen2.5 one TRL ships (it renders tools and tool calls, and
TRL parses the calls back), and the model is a small Qwen2 with random
weights. The run:

1. plays an oracle SRE with heuristic teammates on training seeds (the
   canonical scenarios with ``--seed-offset`` added) into a run folder, and
   fine-tunes on ``chaosops.train.sft_dataset`` of it until at least 90% of
   sampled completions are calls to real tools;
2. evaluates on the canonical scenarios, held out: no training row is one;
3. trains GRPO with ``ChaosOpsToolEnv(reward="credit")`` and the legal-move
   share as a small format term, on the training seeds, evaluating every
   ``--eval-every`` steps and at the end; ``chaosops.train.EvalCallback``
   plays held-out canonical scenarios through the runtime at the same steps
   (``--runtime-scenarios``), each a run folder under ``OUT/runtime``;
4. saves the trained model in ``OUT/final`` (``chaosops eval --policies
   heuristic,hf --hf-model OUT/final``), draws the curve (``--plot``,
   matplotlib) and writes its data (curve.json).

Needs the ``train`` extra. Usage::

    python examples/train_grpo.py [--steps 60] [--rows 55] [--plot curve.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import random
import tempfile
import time
from pathlib import Path

import torch
from transformers import Qwen2ForCausalLM, TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import parse_response

from chaosops.agents.policies import scripted_policy
from chaosops.env.models import AgentRole
from chaosops.runs import run_to_folder
from chaosops.scenarios import canonical_suite_paths, load_scenarios
from chaosops.stats import mean_interval
from chaosops.train import (
    EvalCallback,
    call_tool,
    dataset,
    evaluate_model,
    legal_share,
    rows,
    sft_dataset,
    tool_schemas,
)
from chaosops.train.tiny import sft_corpus, tiny_model, tiny_tokenizer
from chaosops.train.trl import ChaosOpsToolEnv

SCHEMAS = tool_schemas()
TOOLS = {schema["function"]["name"] for schema in SCHEMAS}


def oracle_demonstrations(folder: Path, seed_offset: int) -> list[dict]:
    """An oracle SRE with heuristic teammates on the training seeds, as SFT rows."""
    scenarios = [
        dataclasses.replace(s, seed=s.seed + seed_offset)
        for path in canonical_suite_paths()
        for s in load_scenarios(path)
    ]

    def players(scenario):
        others = scripted_policy("heuristic", scenario)
        return {role: others for role in AgentRole} | {
            AgentRole.SRE: scripted_policy("oracle", scenario)
        }

    run_to_folder(folder, scenarios, players, name="oracle-sre", log=False)
    return list(sft_dataset(folder, role="sre"))


def encode(tokenizer, messages: list[dict], generation_prompt: bool) -> list[int]:
    return tokenizer.apply_chat_template(
        messages, tools=SCHEMAS, add_generation_prompt=generation_prompt,
        return_dict=True,
    )["input_ids"]  # fmt: skip


def sft(model, tokenizer, examples: list[dict], args, log: list[dict]) -> None:
    """Supervised steps on the calls (the prompt masked) until 90% of sampled
    completions are calls to real tools, or ``--sft-steps`` run out."""
    batch = []
    for row in examples:
        asked = encode(tokenizer, row["prompt"], True)
        ids = encode(tokenizer, row["prompt"] + row["completion"], False)
        batch.append((torch.tensor([ids]), torch.tensor([[-100] * len(asked) + ids[len(asked) :]])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.sft_lr)
    order = random.Random(args.seed)
    for step in range(1, args.sft_steps + 1):
        model.train()
        ids, labels = batch[order.randrange(len(batch))]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 50 == 0:
            rate = parse_rate(model, tokenizer, examples[:: max(1, len(examples) // 16)], args)
            log.append({"phase": "sft", "step": step, "loss": loss.item(), "parse_rate": rate})
            print(f"sft step {step}: loss {loss.item():.3f}, calls to real tools {rate:.0%}",
                  flush=True)  # fmt: skip
            if rate >= 0.9:
                return
    print("sft: --sft-steps ran out before 90% of completions were calls", flush=True)


def generate(model, tokenizer, messages: list[dict], temperature: float) -> dict:
    """One assistant message: sampled (or greedy at temperature 0), then parsed."""
    model.eval()
    prompt = encode(tokenizer, messages, True)
    sampling = {"do_sample": True, "temperature": temperature} if temperature else {}
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=48, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id, **sampling,
        )  # fmt: skip
    # as TRL parses a rollout's turn: the prompt's ids anchor the assistant's answer
    return parse_response(tokenizer, out[0, len(prompt) :].tolist(), prefix=prompt, tools=SCHEMAS)


def real_calls(message: dict) -> list[dict]:
    return [c for c in message.get("tool_calls") or [] if c["function"]["name"] in TOOLS]


def parse_rate(model, tokenizer, examples: list[dict], args) -> float:
    answers = [generate(model, tokenizer, row["prompt"], args.temperature) for row in examples]
    return sum(bool(real_calls(a)) for a in answers) / len(answers)


def play(model, tokenizer, env: ChaosOpsToolEnv, row: dict, calls: int) -> None:
    """A rollout as GRPO plays one: the model's calls until it stops, the cap,
    or the end; ``env.outcome`` then plays out the rest."""
    system, user = row["prompt"]
    messages = [system, {**user, "content": user["content"] + env.reset(**row)}]
    for _ in range(calls):
        answer = generate(model, tokenizer, messages, 0.0)
        made = real_calls(answer)
        if not made or env.done:
            return
        messages.append(answer)
        for call in made:
            try:
                result = call_tool(env, call)
            except (ValueError, TypeError) as exc:  # IllegalMove, or arguments the tool lacks
                result = str({"error": str(exc)})
            messages.append({"role": "tool", "name": call["function"]["name"], "content": result})


def evaluate(model, tokenizer, held_out: list[dict], args, label: str) -> dict:
    env = ChaosOpsToolEnv()
    outcomes = []
    for row in held_out:
        play(model, tokenizer, env, row, args.calls)
        outcomes.append(env.outcome)
    credits = [o.credit for o in outcomes]
    mean, half = mean_and_half(credits)
    report = {
        "label": label, "rows": len(outcomes), "mean_credit": mean, "credits": credits,
        "credit_ci95": half,
        "mean_return": sum(o.team_return for o in outcomes) / len(outcomes),
        "success": sum(o.resolved for o in outcomes) / len(outcomes),
        "legal_share": sum(o.legal_share for o in outcomes) / len(outcomes),
    }  # fmt: skip
    print(f"eval {label}: credit {mean:+.2f} ± {report['credit_ci95']:.2f} (95%), return "
          f"{report['mean_return']:+.1f}, success {report['success']:.0%}, legal "
          f"{report['legal_share']:.0%} on {len(outcomes)} held-out rows", flush=True)  # fmt: skip
    return report


def mean_and_half(values: list[float]) -> tuple[float, float]:
    """The mean of ``values`` and the half-width of its 95% interval, the one
    chaosops' own figures give a mean (Student's t); NaN for a single value."""
    interval = mean_interval(values)
    half = math.nan if interval is None else (interval[1] - interval[0]) / 2
    return sum(values) / len(values), half


def paired_gain(before: list[float], after: list[float]) -> tuple[float, float]:
    """The mean change of each row's credit, and its 95% half-width: the two
    evaluations play the same rows, so the rows' own spread cancels."""
    return mean_and_half([b - a for a, b in zip(before, after, strict=True)])


class Curve(TrainerCallback):
    """One line per GRPO step, and a held-out evaluation every ``every`` steps
    (``reports`` gets each, with its step)."""

    def __init__(self, log: list[dict], reports: list[dict], evaluate, every: int) -> None:
        self.log, self.reports, self.evaluate, self.every = log, reports, evaluate, every

    def on_step_end(self, args, state, control, model=None, **kwargs):
        last = state.global_step == state.max_steps
        due = last or (self.every and state.global_step % self.every == 0)
        if self.evaluate is not None and model is not None and due:
            label = "after GRPO" if last else f"at GRPO step {state.global_step}"
            self.reports.append({**self.evaluate(model, label), "step": state.global_step})
            model.train()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        point = {"phase": "grpo", "step": state.global_step, "loss": logs["loss"],
                 "credit": logs.get("rewards/ChaosOpsToolEnv/mean", float("nan")),
                 "legal": logs.get("rewards/legal_share/mean", float("nan")),
                 "calls": logs.get("tools/call_frequency", 0.0),
                 "failed": logs.get("tools/failure_frequency", 0.0)}  # fmt: skip
        self.log.append(point)
        print(f"grpo step {point['step']}: credit {point['credit']:+.2f}, legal "
              f"{point['legal']:.2f}, loss {point['loss']:.4f}, calls a completion "
              f"{point['calls']:.2f}, failed {point['failed']:.2f}", flush=True)  # fmt: skip


def grpo(model, tokenizer, args, log: list[dict], out: Path, curve: Curve | None = None,
         runtime: EvalCallback | None = None) -> Qwen2ForCausalLM:  # fmt: skip
    """GRPO from the SFT model; the trained model. The SFT model is saved
    first: TRL builds the KL term's reference model from a checkpoint."""
    model.save_pretrained(out / "sft")
    config = GRPOConfig(
        output_dir=str(out / "grpo"), max_steps=args.steps, num_generations=args.generations,
        per_device_train_batch_size=args.prompts * args.generations, beta=args.beta,
        max_completion_length=args.completion_tokens,
        max_tool_calling_iterations=args.calls, temperature=args.temperature,
        learning_rate=args.lr, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, seed=args.seed, reward_weights=[args.legal_weight],
    )  # fmt: skip
    train_rows = dataset(role="sre", seed_offset=args.seed_offset)
    trainer = GRPOTrainer(
        model=str(out / "sft"), processing_class=tokenizer, args=config,
        train_dataset=train_rows.select(range(min(args.rows, len(train_rows)))),
        reward_funcs=[legal_share],
        environment_factory=functools.partial(ChaosOpsToolEnv, reward="credit"),
        callbacks=[curve or Curve(log, [], None, 0)],
    )  # fmt: skip
    if runtime is not None:
        runtime.attach(trainer)
    trainer.train()
    return trainer.model


def runtime_eval(model, tokenizer, args, out: Path) -> EvalCallback | None:
    """The held-out canonical scenarios played through the runtime (the SRE
    the model, its teammates the heuristic), after SFT and then every
    ``--eval-every`` GRPO steps by the callback, each a run folder in
    ``out/runtime``: the prompts ``chaosops run --policy hf`` sends, not the
    rollouts' conversation."""
    if not args.runtime_scenarios:
        return None
    held_out = [s for path in canonical_suite_paths() for s in load_scenarios(path)]
    held_out = held_out[: args.runtime_scenarios]
    settings = {"max_new_tokens": 48, "device": "cpu"}
    figures = evaluate_model(model, tokenizer, held_out, role="sre", out=out / "runtime" / "step-0",
                             **settings)  # fmt: skip
    print("runtime eval after SFT: " + _figures(figures), flush=True)
    model.train()
    return EvalCallback(tokenizer, held_out, every=args.eval_every or args.steps, role="sre",
                        out=out / "runtime", **settings)  # fmt: skip


def _figures(figures: dict) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in figures.items())


def plot(log: list[dict], reports: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [p for p in log if p["phase"] == "grpo"]
    fig, ax = plt.subplots(figsize=(7, 4))
    steps, credits = [p["step"] for p in points], [p["credit"] for p in points]
    smooth = [sum(credits[max(0, i - 9) : i + 1]) / len(credits[max(0, i - 9) : i + 1])
              for i in range(len(credits))]  # fmt: skip
    ax.plot(steps, smooth, color="gray", label="training batches, sampled (mean of 10 steps)")
    ax.errorbar([r["step"] for r in reports], [r["mean_credit"] for r in reports],
                yerr=[r["credit_ci95"] for r in reports], fmt="o-", capsize=4,
                label="held-out rows, greedy (95% interval)")  # fmt: skip
    ax.set_xlabel("GRPO step (0: after SFT)")
    ax.set_ylabel("SRE credit (return minus all-noop return)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps (60)")
    parser.add_argument("--rows", type=int, default=55, help="training rows (55)")
    parser.add_argument("--sft-steps", type=int, default=1500, help="most SFT steps (1500)")
    parser.add_argument("--sft-lr", type=float, default=2e-3, help="SFT learning rate")
    parser.add_argument("--lr", type=float, default=2e-4, help="GRPO learning rate")
    parser.add_argument("--prompts", type=int, default=1, help="rows a GRPO step (1)")
    parser.add_argument("--generations", type=int, default=8, help="rollouts a row (8)")
    parser.add_argument("--beta", type=float, default=0.04, help="KL weight to the SFT model")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    parser.add_argument("--seed", type=int, default=0, help="torch's, the SFT order's, TRL's")
    parser.add_argument("--width", type=int, default=128, help="the model's hidden size")
    parser.add_argument("--calls", type=int, default=2, help="tool calls a rollout (2)")
    parser.add_argument("--completion-tokens", type=int, default=512,
                        help="GRPO max_completion_length, tool answers included")  # fmt: skip
    parser.add_argument("--legal-weight", type=float, default=5.0, help="legal-share weight")
    parser.add_argument("--seed-offset", type=int, default=10_000, help="training seeds' offset")
    parser.add_argument("--eval-rows", type=int, default=55, help="held-out rows (55)")
    parser.add_argument("--eval-every", type=int, default=20, help="GRPO steps between "
                        "held-out evaluations (20; 0: before and after only)")  # fmt: skip
    parser.add_argument("--runtime-scenarios", type=int, default=12,
                        help="held-out canonical scenarios played through the runtime with "
                        "the model as the SRE (12; 0: none)")  # fmt: skip
    parser.add_argument("--out", default=None, help="output folder (default: a temp one)")
    parser.add_argument("--plot", default=None, help="PNG of the reward curve")
    return parser


def main() -> None:
    args = options().parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(args.out or scratch)
        examples = oracle_demonstrations(out / "oracle-run", args.seed_offset)
        tokenizer = tiny_tokenizer(sft_corpus(examples))
        model = tiny_model(tokenizer, args.width)
        log: list[dict] = []
        print(f"{len(examples)} SFT rows; model {model.num_parameters() / 1e6:.2f} M "
              f"parameters, vocabulary {len(tokenizer)}", flush=True)  # fmt: skip
        sft(model, tokenizer, examples, args, log)
        held_out = rows(role="sre")[: args.eval_rows]

        def held_out_eval(model, label: str) -> dict:
            return evaluate(model, tokenizer, held_out, args, label)

        reports = [{**held_out_eval(model, "after SFT"), "step": 0}]
        curve = Curve(log, reports, held_out_eval, args.eval_every)
        runtime = runtime_eval(model, tokenizer, args, out)
        model = grpo(model, tokenizer, args, log, out, curve, runtime)
        model.save_pretrained(out / "final")  # chaosops eval --policies heuristic,hf --hf-model
        tokenizer.save_pretrained(out / "final")
        runs = runtime.reports if runtime is not None else []
        (out / "curve.json").write_text(
            json.dumps({"log": log, "eval": reports, "runtime": runs}, indent=1)
        )
        if args.plot:
            plot(log, reports, args.plot)
    gain, half = paired_gain(reports[0]["credits"], reports[-1]["credits"])
    print(f"held-out credit {gain:+.2f} ± {half:.2f} (95%, paired by row) after GRPO; "
          f"trained in {time.perf_counter() - started:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()

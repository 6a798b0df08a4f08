"""GRPO on ChaosOps with TRL's environment_factory, on a tiny model built here.

Nothing is downloaded: the tokenizer is trained on the spot on ChaosOps text
(byte-level BPE, so any text encodes), and the model is a two-layer Qwen2
from a config, with random weights. The chat template is the Qwen2.5 one TRL
ships, which renders tool calls and tool messages and which TRL knows how to
parse back. A random model rarely writes a well-formed tool call: this run
shows the plumbing (rollouts through ChaosOpsToolEnv, rewards from
get_reward, the loss, tool calls parsed), not learning. So that some calls
parse at all, a short supervised warm-up first shows the model the format:
each failure type's first oracle move written as a tool call. Needs the
``train`` extra. Usage::

    python examples/train_grpo.py [--steps 3] [--warmup 120] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen2_5_chat_template

from chaosops.agents.policies import oracle_policy
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, ChaosOpsAction
from chaosops.env.world_sim import Scenario
from chaosops.train import dataset, rows
from chaosops.train.trl import ChaosOpsToolEnv

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]


def _corpus() -> list[str]:
    """Text like what the model will read and write: prompts, views, tool calls."""
    texts = [message["content"] for row in rows()[:11] for message in row["prompt"]]
    env = ChaosOpsToolEnv()
    for row in rows()[::5]:
        texts.append(env.reset(**row))
        texts.append(env.noop() if not env.done else "")
    for name in ("restart", "rollback", "scale", "identify_root_cause", "noop", "communicate"):
        call = {"name": name, "arguments": {"service": "db", "replicas": 2}}
        texts.append(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
    return texts


def build_tokenizer(vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    bpe.train_from_iterator(_corpus(), trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=8192, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    return Qwen2ForCausalLM(config)


def tool_call(move: ChaosOpsAction) -> dict:
    """A move as the call of ChaosOpsToolEnv's tool for it."""
    args = dict(move.args)
    if move.target is not None:
        args["agent_name" if move.action_type.value == "flag_rogue" else "service"] = move.target
    return {"type": "function", "function": {"name": move.action_type.value, "arguments": args}}


def warm_up(model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerFast, steps: int) -> None:
    """Supervised steps on each failure type's first oracle move as a tool call
    (the prompt as GRPO will send it): the format, not the game."""
    env = ChaosOpsToolEnv()
    tools = [getattr(env, kind) for kind in ("restart", "rollback", "scale", "flag_rogue",
             "identify_root_cause", "communicate", "escalate", "resolve", "noop")]  # fmt: skip
    batch = []
    for row in rows()[:11]:
        scenario = Scenario.from_type(row["failure_type"], seed=row["seed"],
                                      difficulty=row["difficulty"])  # fmt: skip
        first = ChaosOpsEnvironment().reset(scenario=scenario)
        move = oracle_policy(scenario.failure_type)(first, AgentRole.SRE)
        system, user = row["prompt"]
        answer = {"role": "assistant", "content": "", "tool_calls": [tool_call(move)]}
        messages = [system, {**user, "content": user["content"] + env.reset(**row)}, answer]
        ids = tokenizer.apply_chat_template(messages, tools=tools, return_dict=True)["input_ids"]
        asked = tokenizer.apply_chat_template(messages[:2], tools=tools, return_dict=True,
                                              add_generation_prompt=True)["input_ids"]  # fmt: skip
        labels = [-100] * len(asked) + ids[len(asked) :]  # learn the answer, not the prompt
        batch.append((torch.tensor([ids]), torch.tensor([labels])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        ids, labels = batch[step % len(batch)]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    print(f"warm-up: {steps} steps, last loss {loss.item():.3f}", flush=True)


class PrintSteps(TrainerCallback):
    """One line per optimizer step: reward, loss, and the tool calls made."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if "loss" not in logs:
            return
        print(
            f"step {state.global_step}: reward {logs.get('reward', float('nan')):+.2f} "
            f"(ChaosOpsToolEnv {logs.get('rewards/ChaosOpsToolEnv/mean', float('nan')):+.2f}), "
            f"loss {logs['loss']:.4f}, tool calls a completion "
            f"{logs.get('tools/call_frequency', 0.0):.2f}, failed "
            f"{logs.get('tools/failure_frequency', 0.0):.2f}",
            flush=True,
        )


def train(steps: int, warmup: int, out: str) -> GRPOTrainer:
    """Warm up, then train ``steps`` GRPO steps with ChaosOpsToolEnv; the trainer."""
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    if warmup:
        warm_up(model, tokenizer, warmup)
    config = GRPOConfig(
        output_dir=out, max_steps=steps, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=48, max_tool_calling_iterations=2, temperature=0.8, top_k=10,
        learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, seed=0,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config,
        train_dataset=dataset(role="sre").select(range(8)),
        environment_factory=ChaosOpsToolEnv, callbacks=[PrintSteps()],
    )  # fmt: skip
    trainer.train()
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps (default 3)")
    parser.add_argument("--warmup", type=int, default=120, help="supervised format steps (120)")
    parser.add_argument("--out", default=None, help="trainer output folder (default: a temp one)")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        train(args.steps, args.warmup, args.out or scratch)
    print(f"trained {args.steps} steps in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()

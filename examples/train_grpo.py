"""GRPO on ChaosOps with TRL's environment_factory, on a tiny model built here.

Nothing is downloaded: the tokenizer is trained on the spot on ChaosOps text
(byte-level BPE, so any text encodes), and the model is a two-layer Qwen2
from a config, with random weights. The chat template is the Qwen2.5 one TRL
ships, which renders tool calls and tool messages and which TRL knows how to
parse back. A random model rarely writes a well-formed tool call: this run
shows the plumbing (rollouts through ChaosOpsToolEnv, rewards from
get_reward, the loss, tool calls parsed), not learning. Needs the ``train``
extra. Usage::

    python examples/train_grpo.py [--steps 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, TrainerCallback
from trl import GRPOConfig, GRPOTrainer
from trl.chat_template_utils import qwen2_5_chat_template

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps (default 3)")
    parser.add_argument("--out", default=None, help="trainer output folder (default: a temp one)")
    args = parser.parse_args()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    train = dataset(role="sre").select(range(8))
    with tempfile.TemporaryDirectory() as scratch:
        config = GRPOConfig(
            output_dir=args.out or scratch, max_steps=args.steps, per_device_train_batch_size=4,
            num_generations=4, max_completion_length=48, max_tool_calling_iterations=2,
            learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none",
            use_cpu=True, seed=0,
        )  # fmt: skip
        trainer = GRPOTrainer(
            model=model, processing_class=tokenizer, args=config, train_dataset=train,
            environment_factory=ChaosOpsToolEnv, callbacks=[PrintSteps()],
        )  # fmt: skip
        started = time.perf_counter()
        trainer.train()
    print(f"trained {args.steps} steps in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()

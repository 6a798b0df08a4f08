"""Small models built on the spot, with nothing downloaded: a byte-level BPE
tokenizer trained on ChaosOps text, with the Qwen2.5 chat template TRL ships
(it renders tools and tool calls, and TRL parses the calls back), and a small
Qwen2 with random weights. The GRPO example trains one; the tests and
``benchmarks/hf_policy.py`` play one with ``--policy hf``. Needs the ``train`` extra.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from chaosops._extras import require
from chaosops.agents.llm.render import system_prompt
from chaosops.env.models import SERVICE_NAMES, AgentRole, FailureType

from .sft import tool_schemas

__all__ = ["NAMES", "sft_corpus", "tiny_model", "tiny_tokenizer", "write_tiny_checkpoint"]

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CALL_TAGS = ("<tool_call>", "</tool_call>")  # ordinary added tokens: parsing reads them
NAMES = (*(failure.value for failure in FailureType), *SERVICE_NAMES)
"""One token for each failure type and service, so that naming one is one
choice: BPE pieces let a small model write blends such as "bad_cost_push"."""


def tiny_tokenizer(corpus: list[str], vocab_size: int = 2048) -> Any:
    """A byte-level BPE tokenizer trained on ``corpus`` (any text encodes), with
    the Qwen2.5 chat template and TRL's response schema for it (which TRL
    reads off the object: a reloaded checkpoint's tokenizer needs it again)."""
    tokenizers = require("tokenizers", "train", "chaosops.train.tiny_tokenizer")
    transformers = require("transformers", "train", "chaosops.train.tiny_tokenizer")
    templates = require("trl.chat_template_utils", "train", "chaosops.train.tiny_tokenizer")
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL),
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )  # fmt: skip
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.add_tokens([*CALL_TAGS, *NAMES])
    tokenizer.chat_template = templates.qwen2_5_chat_template
    return templates.add_response_schema(_as_reloaded(tokenizer, transformers))


def _as_reloaded(tokenizer: Any, transformers: Any) -> Any:
    """``tokenizer`` as a Qwen2 checkpoint gives it back. Beside a Qwen2
    config, transformers reads it as a ``Qwen2Tokenizer``, which splits
    whitespace otherwise than the object built here: a model trained with
    that object would meet other tokens in its own checkpoint."""
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        transformers.Qwen2Config().save_pretrained(folder)
        return transformers.AutoTokenizer.from_pretrained(folder)


def tiny_model(tokenizer: Any, width: int = 64, layers: int = 2) -> Any:
    """A Qwen2 causal LM of ``width`` hidden units, random weights, for ``tokenizer``."""
    transformers = require("transformers", "train", "chaosops.train.tiny_model")
    config = transformers.Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=width, intermediate_size=2 * width,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=8192, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    return transformers.Qwen2ForCausalLM(config)


def chaosops_text() -> list[str]:
    """What a ChaosOps model reads and writes: the role prompts and the tools' schemas."""
    return [system_prompt(role) for role in AgentRole] + [json.dumps(tool_schemas())]


def sft_corpus(rows: list[dict[str, Any]]) -> list[str]:
    """The text of supervised rows (:func:`~chaosops.train.sft_rows`) for a
    tokenizer to learn: every message, every call, and the tools' schemas."""
    texts = [json.dumps(tool_schemas())]
    for row in rows:
        for message in row["prompt"] + row["completion"]:
            texts.append(message.get("content") or "")
            texts += [json.dumps(call["function"]) for call in message.get("tool_calls") or []]
    return texts


def write_tiny_checkpoint(
    folder: str | Path, width: int = 64, seed: int = 0, vocab_size: int = 512
) -> Path:
    """A tiny model and its tokenizer saved to ``folder`` (random weights from
    ``seed``), loadable with ``--policy hf --hf-model FOLDER``."""
    torch = require("torch", "train", "chaosops.train.write_tiny_checkpoint")
    torch.manual_seed(seed)
    tokenizer = tiny_tokenizer(chaosops_text(), vocab_size=vocab_size)
    folder = Path(folder)
    tiny_model(tokenizer, width).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder

"""Tiny checkpoints written once per session (nothing downloaded); the tests
of this folder skip where the hf extra or the tokenizer's trainer is missing.

``tiny`` has random weights: its answers are no moves. ``scripted`` answers
every turn with a call of the ``take_action`` tool playing noop, so that a run
shows answers read into moves: its layers are zeroed, which leaves each
position's logits a function of its own token (a bigram model), and its
output head maps the generation prompt's last token to one added token
holding the whole call, and that token to the end of the turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the hf extra (torch) is not installed")
pytest.importorskip("trl", reason="the tiny model's chat template comes with TRL")

CALL = '<tool_call>{"name": "take_action", "arguments": {"action_type": "noop"}}</tool_call>'
MOVE_CALL = '<tool_call>{"name": "noop", "arguments": {}}</tool_call>'


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from chaosops.train.tiny import write_tiny_checkpoint

    torch.set_num_threads(1)
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model", width=32)


@pytest.fixture(scope="session")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _scripted(tmp_path_factory.mktemp("scripted") / "model", CALL)


@pytest.fixture(scope="session")
def scripted_moves(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """As ``scripted``, in the trainer's format: a call of the ``noop`` tool."""
    return _scripted(tmp_path_factory.mktemp("scripted_moves") / "model", MOVE_CALL)


def _scripted(folder: Path, answer: str) -> Path:
    import torch

    from chaosops.train.tiny import chaosops_text, tiny_model, tiny_tokenizer

    torch.manual_seed(0)
    tokenizer = tiny_tokenizer(chaosops_text(), vocab_size=512)
    tokenizer.add_tokens([answer])
    model = tiny_model(tokenizer, width=32)
    model.config.tie_word_embeddings = False
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                           add_generation_prompt=True)  # fmt: skip
    last = tokenizer(prompt, add_special_tokens=False)["input_ids"][-1]
    call = tokenizer.convert_tokens_to_ids(answer)
    with torch.no_grad():
        for layer in model.model.layers:  # the residual stream keeps the token's embedding
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = model.model.embed_tokens.weight
        embed[call] -= embed[call] @ embed[last] / embed[last].norm() ** 2 * embed[last]
        head = torch.nn.Parameter(torch.zeros_like(embed))
        head[call] = 50 * embed[last] / embed[last].norm()
        head[tokenizer.eos_token_id] = 50 * embed[call] / embed[call].norm()
        model.lm_head.weight = head
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder

"""SFT rows from run folders, in exactly the format of GRPO's rollouts: the
tool system prompt, the reset text, assistant tool calls and the tools'
answers; rendered through a real chat template and parsed back by TRL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaosops.train import row_of, sft_rows, tool_call, tool_system_prompt
from chaosops.train.sft import call_tool
from chaosops.train.trl import ChaosOpsToolEnv

from ..cli._cli import chaosops, jsonl


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("oracle")
    done = chaosops("run", "--policy", "oracle", "--tier", "easy", "--out", "run", cwd=work)
    assert done.returncode == 0, done.stderr
    return work / "run"


def test_a_row_is_the_grpo_conversation_up_to_one_turn(oracle_run: Path) -> None:
    rows = sft_rows(oracle_run, role="sre")
    episodes = {r["episode_id"]: r for r in jsonl(oracle_run / "results.jsonl")}
    assert rows and {r["episode_id"] for r in rows} <= set(episodes)
    for row in rows:
        record = episodes[row["episode_id"]]
        grpo = row_of(_scenario(record), "sre")
        system, user = row["prompt"][:2]
        assert system == grpo["prompt"][0] and system["content"] == tool_system_prompt("sre")
        with ChaosOpsToolEnv(others="oracle") as env:  # the run's others: the oracle
            assert user["content"] == grpo["prompt"][1]["content"] + env.reset(**grpo)
            for asked, answer in zip(row["prompt"][2::2], row["prompt"][3::2], strict=True):
                assert answer == {"role": "tool", "name": asked["tool_calls"][0]["function"][
                    "name"], "content": call_tool(env, asked["tool_calls"][0])}  # fmt: skip
        (call,) = row["completion"]
        assert call["role"] == "assistant" and len(call["tool_calls"]) == 1
        own = [s["action"] for s in record["steps"] if s["role"] == "sre"]
        assert call["tool_calls"][0] == tool_call(_action(own[row["turn"]]))


def test_resolved_only_keeps_the_episodes_that_resolved(tmp_path: Path) -> None:
    done = chaosops("run", "--policy", "random", "--tier", "hard", "--out", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    records = {r["episode_id"]: r for r in jsonl(tmp_path / "run" / "results.jsonl")}
    kept = sft_rows(tmp_path / "run", role="dev")
    every = sft_rows(tmp_path / "run", role="dev", resolved_only=False)
    assert all(records[r["episode_id"]]["resolved"] for r in kept)
    assert {r["episode_id"] for r in every} > {r["episode_id"] for r in kept}


def test_every_role_that_moved_without_a_role(oracle_run: Path) -> None:
    roles = {row["role"] for row in sft_rows([oracle_run], role=None)}
    assert {"sre", "dev"} <= roles
    assert len(sft_rows(oracle_run)) == sum(
        len(sft_rows(oracle_run, role=role)) for role in ("sre", "oversight", "dev", "manager")
    )


def test_a_row_renders_through_a_chat_template_and_trl_parses_the_call_back(
    oracle_run: Path,
) -> None:
    pytest.importorskip("trl", reason="the train extra (TRL, torch) is not installed")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import add_response_schema, parse_response, qwen2_5_chat_template

    from chaosops.train import sft_dataset, tool_schemas

    bpe = Tokenizer(models.BPE())  # byte-level: every byte a token, no merges
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    bpe.train_from_iterator([], trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=alphabet, special_tokens=["<|im_start|>", "<|im_end|>"]
    ))  # fmt: skip
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>")
    tokenizer.add_tokens(["<tool_call>", "</tool_call>"])
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer = add_response_schema(tokenizer)
    data = sft_dataset(oracle_run, role="dev")
    tools = json.loads(data[0]["tools"])
    assert tools == tool_schemas()
    for row in data.select(range(3)):
        prompt = tokenizer.apply_chat_template(row["prompt"], tools=tools, return_dict=True,
                                               add_generation_prompt=True)["input_ids"]  # fmt: skip
        whole = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tools=tools,
                                              return_dict=True)["input_ids"]  # fmt: skip
        assert whole[: len(prompt)] == prompt
        parsed = parse_response(tokenizer, whole[len(prompt) :], prefix=prompt, tools=tools)
        assert parsed["tool_calls"] == row["completion"][0]["tool_calls"]


def _scenario(record):
    from chaosops.outputs.records import scenario_from_record

    return scenario_from_record(record)


def _action(data):
    from chaosops.env.models import ChaosOpsAction

    return ChaosOpsAction.model_validate(data)


def test_a_role_that_never_moved_is_one_line_not_datasets_keys_mismatch(tmp_path: Path) -> None:
    pytest.importorskip("datasets", reason="the train extra is not installed")
    from chaosops.train import sft_dataset

    (tmp_path / "idle.py").write_text(
        "def policy(obs, role):\n    return 'no move'\n"  # every turn plays the fallback
    )
    done = chaosops("run", "--tier", "easy", "--limit", "2", "--role-policy", "sre=idle:policy",
                    "--out", "run", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr  # the sre never played a move of its own
    with pytest.raises(ValueError, match=r"of 2 episode\(s\).*the sre had \d+ turn\(s\) played by"):
        sft_dataset(tmp_path / "run", role="sre", resolved_only=False)

"""What is trained is what is evaluated: ``chaosops run --policy hf
--hf-conversation episode`` shows the model, turn by turn, the very chat a
trainer's rollout of the same row holds (TRL's loop over ChaosOpsToolEnv,
rebuilt from the run by ``sft_rows``), to the token; and run.json records the
format, which ``--resume`` holds the run to."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from chaosops.agents.conversation import tool_schemas
from chaosops.train import sft_rows

from ...cli._cli import TINY, TINY_SUITE, TORCH_TIMEOUT, assert_one_error_line, chaosops

# each test starts a few commands that load torch: each may take TORCH_TIMEOUT
pytestmark = pytest.mark.timeout(3 * TORCH_TIMEOUT)

FAST = ("--hf-max-new-tokens", "4", "--hf-device", "cpu")


def _run(work: Path, model: Path, *extra: str) -> Path:
    (work / "tiny.toml").write_text(TINY_SUITE)
    done = chaosops("run", *TINY, "--policy", "hf", "--hf-model", model, *FAST,
                    "--hf-conversation", "episode", "--out", "run", *extra, cwd=work,
                    timeout=TORCH_TIMEOUT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return work / "run"


def test_the_runtime_shows_the_model_the_rollouts_chat_to_the_token(
    scripted_moves: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    run = _run(tmp_path, scripted_moves)
    turns = [orjson.loads(line) for line in (run / "trajectories.jsonl").read_bytes().splitlines()]
    steps = [s for line in (run / "results.jsonl").read_bytes().splitlines()
             for s in orjson.loads(line)["steps"]]  # fmt: skip
    assert {(s["action"]["action_type"], s["parse_error"]) for s in steps} == {("noop", None)}
    rows = sft_rows(run, role="sre", resolved_only=False)
    played = {(t["episode_id"], t["turn"]): t["prompt"] for t in turns if t["role"] == "sre"}
    assert rows and len(rows) == len(played)
    tokenizer = AutoTokenizer.from_pretrained(scripted_moves)

    def ids(messages: list[dict]) -> list[int]:
        return tokenizer.apply_chat_template(
            messages, tools=tool_schemas(), add_generation_prompt=True, tokenize=True
        )

    by_episode: dict[str, list[list[dict]]] = {}
    for (episode, _), prompt in sorted(played.items()):
        by_episode.setdefault(episode, []).append(prompt)
    for row in rows:
        runtime = by_episode[row["episode_id"]][row["turn"]]
        assert runtime == row["prompt"]
        assert ids(runtime) == ids(row["prompt"])
    assert max(len(row["prompt"]) for row in rows) > 2  # later turns: calls and answers


def test_run_json_records_the_format_and_resume_holds_to_it(
    scripted_moves: Path, tmp_path: Path
) -> None:
    run = _run(tmp_path, scripted_moves, "--limit", "1")
    record = json.loads((run / "run.json").read_text())
    assert record["hf"]["hf"]["conversation"] == "episode"
    other = chaosops("run", "--resume", "--out", "run", "--no-progress",
                     "--hf-conversation", "turn", cwd=tmp_path, timeout=TORCH_TIMEOUT)  # fmt: skip
    assert_one_error_line(other, "--hf-conversation", "differs", "recorded episode")
    same = chaosops(
        "run", "--resume", "--out", "run", "--no-progress", cwd=tmp_path, timeout=TORCH_TIMEOUT
    )
    assert same.returncode == 0, same.stderr  # the same weights, hashed once loaded
    assert "1 of 1 episodes already done" in same.stderr


def test_the_rollouts_chats_are_the_runs_to_the_token(scripted_moves: Path, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from chaosops.outputs.records import scenario_from_record
    from chaosops.train.rollouts import RuntimeRollouts

    run = _run(tmp_path, scripted_moves)
    records = [orjson.loads(line) for line in (run / "results.jsonl").read_bytes().splitlines()]
    turns = [orjson.loads(line) for line in (run / "trajectories.jsonl").read_bytes().splitlines()]
    rollouts = RuntimeRollouts(["sre", "oversight", "dev", "manager"], temperature=0.0,
                               max_new_tokens=4)  # fmt: skip
    trainer = SimpleNamespace(
        model=AutoModelForCausalLM.from_pretrained(scripted_moves),
        processing_class=AutoTokenizer.from_pretrained(scripted_moves),
    )
    for record in records:
        scenario = scenario_from_record(record)
        out = rollouts([rollouts.prompt_of(scenario, "sre")], trainer)
        mine = [t for t in turns if t["episode_id"] == record["episode_id"] and t["role"] == "sre"]
        prompt = out["prompt_ids"][0]
        mask = out["env_mask"][0]
        starts = [i for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1])]
        assert len(starts) == len(mine) > 1
        for turn, start in zip(mine, starts, strict=True):  # each prompt, as long to the token
            assert turn["usage"]["prompt_tokens"] == len(prompt) + start
        assert out["outcome"][0].team_return <= record["cumulative_reward"]

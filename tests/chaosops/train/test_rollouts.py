"""RuntimeRollouts as TRL's rollout_func: a real GRPOTrainer step trains on
episodes the runtime played; the ids, the mask and the log-probabilities are
what TRL reads; and the rollouts' chats are those ``chaosops run --policy hf
--hf-conversation episode`` shows the same checkpoint, to the token."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the hf extra (torch) is not installed")
pytest.importorskip("trl", reason="the train extra is not installed")

from chaosops.env.models import AgentRole
from chaosops.scenarios import choose_scenario
from chaosops.train.rewards import legal_share, team_return
from chaosops.train.rollouts import RuntimeRollouts

SCENARIOS = [choose_scenario(failure_type=f, difficulty="easy", seed=s)
             for f, s in (("memory_leak", 1), ("misrouted_traffic", 2))]  # fmt: skip
DEADLOCK = choose_scenario(failure_type="db_deadlock", difficulty="easy", seed=0)


def _tiny() -> tuple[Any, Any]:
    import torch

    from chaosops.train.tiny import chaosops_text, tiny_model, tiny_tokenizer

    torch.set_num_threads(1)
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer(chaosops_text(), vocab_size=512)
    return tiny_model(tokenizer, width=32), tokenizer


def _varied(completions: list[Any], **kwargs: Any) -> list[float]:
    """A reward that differs within a group, so that the step has a gradient."""
    return [float(len(str(c)) % 7) for c in completions]


# TRL reads transformers settings deprecated under it (gradient_checkpointing)
@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_a_grpo_step_trains_on_episodes_the_runtime_played(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL
    model, tokenizer = _tiny()
    rollouts = RuntimeRollouts(["sre"], max_new_tokens=8, batch=8, out=tmp_path / "rollouts")
    seen: list[tuple[list[Any], dict[str, Any]]] = []

    def recorded(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        out = rollouts(prompts, trainer)
        seen.append((list(prompts), out))
        return out

    config = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), max_steps=1, num_generations=2,
        per_device_train_batch_size=4, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, beta=0.0, max_completion_length=4096,
    )  # fmt: skip
    before = [p.detach().clone() for p in model.parameters()]
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config,
        train_dataset=Dataset.from_list(rollouts.rows(SCENARIOS, "sre")),
        reward_funcs=[team_return, legal_share, _varied], rollout_func=recorded,
    )  # fmt: skip
    trainer.train()

    prompts, out = seen[0]
    assert len(prompts) == 4 == len(out["completion_ids"])  # a completion per prompt given
    for ids, mask, logprobs in zip(out["completion_ids"], out["env_mask"], out["logprobs"],
                                   strict=True):  # fmt: skip
        assert len(ids) == len(mask) == len(logprobs) > 0
        own = [lp for lp, m in zip(logprobs, mask, strict=True) if m]
        assert own and all(lp <= 0.0 and math.isfinite(lp) for lp in own)
        world = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
        said = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
        if 0 in mask:  # a later turn: its tool answer is the world's, never the model's
            assert "<tool_response>" in world and "<tool_response>" not in said
    logged = trainer.state.log_history[0]
    lengths = [sum(mask) for mask in out["env_mask"]]
    assert logged["completions/mean_length"] == pytest.approx(sum(lengths) / len(lengths))
    assert "rewards/team_return/mean" in logged
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert changed  # the step trained on them
    assert {o.resolved for o in out["outcome"]} <= {True, False}
    _check_the_step_s_run_folder(tmp_path / "rollouts", out)


def _check_the_step_s_run_folder(rollouts: Any, out: dict[str, Any]) -> None:
    """The step's episodes as a run folder the viewer's commands open, each of
    the model's turns marked with the policy version that played it."""
    [folder] = sorted(rollouts.iterdir())
    assert folder.name == "step-0"  # played before the first optimiser step
    results = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert sorted(r["run_key"].rsplit("/", 1)[1] for r in results) == ["#0", "#0", "#1", "#1"]
    assert [r["resolved"] for r in results] == [o.resolved for o in out["outcome"]]
    for record in results:
        for step in record["steps"]:
            assert step["played_by"] == ("model@step-0" if step["role"] == "sre" else None)
    listed = subprocess.run([str(Path(sys.executable).with_name("chaosops")), "episodes",
                             str(folder)], capture_output=True, text=True, check=False)  # fmt: skip
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 1 + 4, listed.stderr
    assert json.loads((folder / "summary.json").read_text())["episodes"] == 4


@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_a_row_whose_role_gets_no_turn_trains_on_nothing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heuristic dev restarts the deadlocked db at step 3: the manager,
    the model's second seat, never plays. Its row is one masked token, and the
    step goes on."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tokenizer = _tiny()
    rollouts = RuntimeRollouts(["sre", "manager"], max_new_tokens=8, batch=8)
    seen: list[dict[str, Any]] = []

    def recorded(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        seen.append(rollouts(prompts, trainer))
        return seen[-1]

    config = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), max_steps=1, num_generations=2,
        per_device_train_batch_size=2, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, beta=0.0, max_completion_length=4096,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config,
        train_dataset=Dataset.from_list(rollouts.rows([DEADLOCK], "manager")),
        reward_funcs=[team_return], rollout_func=recorded,
    )  # fmt: skip
    trainer.train()
    [out] = seen
    assert all(o.resolved for o in out["outcome"])
    assert out["completion_ids"] == [[tokenizer.eos_token_id]] * 2
    assert out["env_mask"] == [[0]] * 2 and out["logprobs"] == [[0.0]] * 2
    assert all(len(ids) > 0 for ids in out["prompt_ids"])


def test_rows_name_their_scenario_and_role_and_bad_ones_are_refused() -> None:
    rollouts = RuntimeRollouts(["sre", "dev"])
    rows = rollouts.rows(SCENARIOS, "dev")
    assert rows[0]["prompt"] == "chaosops:memory_leak/easy/seed=1/steps=12/role=dev"
    assert rollouts._row(rows[1]["prompt"]).scenario == SCENARIOS[1]
    with pytest.raises(ValueError, match="a row's role is one the model plays"):
        rollouts.rows(SCENARIOS, AgentRole.MANAGER)
    with pytest.raises(ValueError, match="names no row"):
        rollouts._row("an ordinary prompt")
    with pytest.raises(ValueError, match="at least one role"):
        RuntimeRollouts([])

"""EvalCallback in a real transformers Trainer: the held-out suite played by
the live model at the steps due, its figures in the trainer's log history,
each evaluation a run folder; and a generate slower than the turn's deadline
never gets its late answer applied."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import structlog

from chaosops.agents.hf import HFPolicy
from chaosops.env.models import AgentRole
from chaosops.runs import run_to_folder
from chaosops.scenarios import canonical_suite_paths, load_scenarios

HELD_OUT = [s for s in load_scenarios(canonical_suite_paths()[0])][:2]


def _trainer(folder: Path, out: Path, steps: int) -> object:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    ids = tokenizer("restart the db", return_tensors="pt")["input_ids"][0]
    rows = [{"input_ids": ids, "labels": ids} for _ in range(4)]
    args = TrainingArguments(output_dir=str(out), max_steps=steps, per_device_train_batch_size=1,
                             logging_steps=1, report_to=[], save_strategy="no",
                             use_cpu=True, learning_rate=1e-6)  # fmt: skip
    torch.manual_seed(0)
    return Trainer(model=model, args=args, train_dataset=rows), tokenizer


def test_the_callback_logs_held_out_figures_into_the_trainer(
    scripted: Path, tmp_path: Path
) -> None:
    from chaosops.train import EvalCallback

    trainer, tokenizer = _trainer(scripted, tmp_path / "trainer", steps=3)
    callback = EvalCallback(tokenizer, HELD_OUT, every=2, role="sre", out=tmp_path / "evals",
                            max_new_tokens=4, device="cpu").attach(trainer)  # fmt: skip
    assert callback in trainer.callback_handler.callbacks
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "eval/success" in entry]
    assert [entry["step"] for entry in logged] == [2, 3]  # every 2nd step, and the last
    losses = [entry["step"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses == [1, 2, 3]  # the steps' own logs are kept
    for entry in logged:
        assert entry["eval/legal_share"] == 1.0  # the scripted model's calls are moves
        assert entry["eval/episodes"] == len(HELD_OUT)
        assert 0.0 <= entry["eval/success"] == entry["eval/pass@1"] <= 1.0  # one sample each
        assert isinstance(entry["eval/mean_return"], float)
        # by tier too: the held-out rows here are all easy
        assert entry["eval/success/easy"] == entry["eval/success"]
        assert entry["eval/mean_return/easy"] == entry["eval/mean_return"]
        assert entry["eval/episodes/easy"] == len(HELD_OUT) and "eval/success/hard" not in entry
    for step in (2, 3):
        summary = json.loads((tmp_path / "evals" / f"step-{step}" / "summary.json").read_text())
        assert summary["episodes"] == len(HELD_OUT)
    assert trainer.model.training  # the trainer's mode is given back


def test_an_evaluation_keeps_its_parse_warnings_off_the_console(
    tiny: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The random tiny model answers no move: each turn's parse_error warning
    goes to the evaluation's log (by default its run folder's), never to the
    trainer's stderr, and the logging before it is back after."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from chaosops.train.evaluate import evaluate_model

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    capfd.readouterr()  # transformers' own loading bar
    configured = structlog.is_configured()  # by an earlier test of this process, maybe
    for out, log in ((tmp_path / "kept", None), (None, tmp_path / "evals.jsonl")):
        figures = evaluate_model(model, tokenizer, HELD_OUT[:1], role="sre", out=out,
                                 log=log, max_new_tokens=4, device="cpu")  # fmt: skip
        assert figures["legal_share"] == 0.0
        path = out / "log.jsonl" if log is None else log
        events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
        assert "parse_error" in events and "turn" in events
    assert "parse_error" not in capfd.readouterr().err
    assert structlog.is_configured() == configured


def test_a_late_generate_is_never_applied(scripted: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(scripted)
    policy = HFPolicy.from_model(model, AutoTokenizer.from_pretrained(scripted), device="cpu")
    generate = policy.local.generate

    def slow(prompts: list[str]) -> list:
        time.sleep(0.5)
        return generate(prompts)

    policy.local.generate = slow  # type: ignore[method-assign]
    policy = HFPolicy(policy.local)  # its batcher runs the slow generate
    roles = dict.fromkeys(AgentRole, policy)
    run_to_folder(tmp_path / "run", HELD_OUT[:1], roles, turn_timeout=0.1, log=False)
    record = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert record["steps"] and all(s["timed_out"] for s in record["steps"])
    assert policy.failures_in_a_row == 0  # lateness is the runtime's to count, not a failure
    policy.close()


def test_a_failing_generate_fails_the_turn_and_counts(scripted: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(scripted)
    local = HFPolicy.from_model(model, AutoTokenizer.from_pretrained(scripted)).local

    def out_of_memory(prompts: list[str]) -> list:
        raise MemoryError("CUDA out of memory (simulated)")

    local.generate = out_of_memory  # type: ignore[method-assign]
    policy = HFPolicy(local)
    run_to_folder(tmp_path / "run", HELD_OUT[:1], dict.fromkeys(AgentRole, policy), log=False)
    record = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert all("out of memory" in (s["error"] or "") for s in record["steps"])
    assert policy.failures_in_a_row == len(record["steps"])
    assert "out of memory" in str(policy.last_failure)
    policy.close()


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)

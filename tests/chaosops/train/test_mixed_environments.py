"""TRL's ``environment_factory`` as a dict: one GRPO run mixes ChaosOps roles
and tiers as separate environments, each row routed by its ``environment``."""

from __future__ import annotations

import functools
from typing import Any

import pytest

pytest.importorskip("torch", reason="the hf extra (torch) is not installed")
pytest.importorskip("trl", reason="the train extra is not installed")

from chaosops.train import dataset
from chaosops.train.trl import ChaosOpsToolEnv


class SreBesideHeuristic(ChaosOpsToolEnv):
    """The SRE on easy rows, the others heuristic."""


class DevBesideRandom(ChaosOpsToolEnv):
    """The dev on hard rows, the others random."""


# TRL reads transformers settings deprecated under it (gradient_checkpointing)
@pytest.mark.filterwarnings("ignore:.*is deprecated and will be removed in v6:FutureWarning")
def test_a_dict_of_factories_routes_each_row_to_its_environment(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from datasets import concatenate_datasets
    from trl import GRPOConfig, GRPOTrainer

    from chaosops.train.tiny import chaosops_text, tiny_model, tiny_tokenizer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental
    torch.set_num_threads(1)
    torch.manual_seed(0)
    tokenizer = tiny_tokenizer(chaosops_text(), vocab_size=512)
    sre = dataset(role="sre").filter(lambda r: r["difficulty"] == "easy").select(range(2))
    dev = dataset(role="dev", others="random").filter(lambda r: r["difficulty"] == "hard")
    dev = dev.select(range(2))
    rows = concatenate_datasets([
        sre.add_column("environment", ["sre-easy"] * 2),
        dev.add_column("environment", ["dev-hard"] * 2),
    ])  # fmt: skip
    factories = {
        "sre-easy": functools.partial(SreBesideHeuristic, others="heuristic"),
        "dev-hard": functools.partial(DevBesideRandom, others="random"),
    }
    seen: list[tuple[str, str, str, str]] = []

    def routed(environments: list[Any], environment: list[str], role: list[str],
               difficulty: list[str], **kw: Any) -> list[float]:  # fmt: skip
        for env, name, row_role, tier in zip(environments, environment, role, difficulty,
                                             strict=True):  # fmt: skip
            assert env.result is not None and env.result.scenario.difficulty == tier
            played = {step.role.value for step in env.result.steps}
            seen.append((name, type(env).__name__, row_role, tier))
            assert row_role in played
        return [env.outcome.team_return for env in environments]

    config = GRPOConfig(
        output_dir=str(tmp_path / "grpo"), max_steps=1, num_generations=2,
        per_device_train_batch_size=8, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, beta=0.0, max_completion_length=32,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=tiny_model(tokenizer, width=32), processing_class=tokenizer, args=config,
        train_dataset=rows, environment_factory=factories, reward_funcs=[routed],
    )  # fmt: skip
    trainer.train()
    assert sorted(set(seen)) == [
        ("dev-hard", "DevBesideRandom", "dev", "hard"),
        ("sre-easy", "SreBesideHeuristic", "sre", "easy"),
    ]
    assert len(seen) == 8

"""The local model's batches: a batch of prompts sharing their system message
(keys and values computed once, rows padded between it and their own tokens)
answers as each prompt alone does; prompts of several system messages are
answered in one batch each; the training mode is given back."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaosops.agents.hf import HFSettings
from chaosops.agents.hf.local import LocalModel, Prompt
from chaosops.agents.llm.moves import moves_for
from chaosops.agents.llm.render import build_messages
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction
from chaosops.scenarios import canonical_suite_paths, load_scenarios


@pytest.fixture(scope="module")
def lively(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model with large random weights: its greedy answers differ by prompt."""
    import torch

    from chaosops.train.tiny import chaosops_text, tiny_model, tiny_tokenizer

    torch.manual_seed(3)
    tokenizer = tiny_tokenizer(chaosops_text(), vocab_size=512)
    model = tiny_model(tokenizer, width=32)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.6)
    folder = tmp_path_factory.mktemp("lively") / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _prompts(local: LocalModel) -> list[Prompt]:
    """The first views of a few scenarios, each role's, as the policy renders them."""
    prompts = []
    for scenario in load_scenarios(canonical_suite_paths()[0])[:3]:
        env = ChaosOpsEnvironment()
        obs = env.reset(scenario=scenario)  # the SRE's view, then the oversight's
        for role in (AgentRole.SRE, AgentRole.OVERSIGHT):
            assert env.current_role == role
            prompts.append(local.prompt(build_messages(obs, role), [moves_for(obs, role).tool]))
            obs = env.step(ChaosOpsAction(role=role, action_type=ActionType.NOOP))
    return prompts


def test_a_shared_system_message_answers_as_each_prompt_alone(lively: Path) -> None:
    local = LocalModel.load(HFSettings(model=str(lively), device="cpu", max_new_tokens=12))
    prompts = _prompts(local)
    assert all(0 < p.shared < len(p.ids) for p in prompts)
    assert len({p.ids[: p.shared] for p in prompts}) == 2  # one system message a role
    alone = [local.generate([Prompt(p.ids, 0)])[0] for p in prompts]
    together = local.generate(prompts)
    assert [a.text for a in together] == [a.text for a in alone]
    assert len({a.text for a in alone}) > 1  # the answers depend on the prompt
    assert [a.prompt_tokens for a in together] == [len(p.ids) for p in prompts]


def test_generation_gives_the_training_mode_back(lively: Path) -> None:
    local = LocalModel.load(HFSettings(model=str(lively), device="cpu", max_new_tokens=2))
    local.model.train()
    local.generate(_prompts(local)[:1])
    assert local.model.training

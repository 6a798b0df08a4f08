"""A failure type is one entry of chaosops.env.failures.FAILURES: everything
outside the world reads its facts there, and no module names one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from chaosops.agents.llm.render import right_for, system_prompt
from chaosops.agents.policies import oracle_policy
from chaosops.curriculum.generator import TIER_POOLS
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.failures import FAILURES, tier_pool
from chaosops.env.models import ActionType, AgentRole, FailureType
from chaosops.env.world_sim import Scenario
from chaosops.mock_llm.player import recognised

ROOT = Path(__file__).resolve().parents[3]
VALUES = {failure.value for failure in FailureType}


def _named(path: Path) -> list[str]:
    """Failure types a module names: a string that is one, or ``FailureType.MEMBER``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in VALUES:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
        elif isinstance(node, ast.Attribute) and node.attr in FailureType.__members__:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.attr}")
    return found


def test_no_module_outside_the_world_names_a_failure_type() -> None:
    modules = [p for p in (ROOT / "chaosops").rglob("*.py") if "env" not in p.parts]
    assert len(modules) > 50
    assert [hit for path in modules for hit in _named(path)] == []
    assert _named(ROOT / "chaosops" / "env" / "failures.py")  # where they are named


def test_the_prompts_name_no_failure_type_and_render_the_table() -> None:
    """Each prompt lists every failure type and, after each action it offers,
    what shows each failure that action fixes (the entries' hints)."""
    offered = set()
    for role in AgentRole:
        text = (ROOT / "chaosops" / "prompts" / f"{role.value}.md").read_text(encoding="utf-8")
        assert not [value for value in VALUES if value in text], role
        rendered = system_prompt(role)
        assert ", ".join(f.value for f in FAILURES) in rendered, role
        assert "{right_for" not in rendered and "{failure_types}" not in rendered, role
        for kind in ActionType:
            if "{right_for:" + kind.value + "}" in text:
                assert right_for(kind) in rendered, (role, kind)
                offered.add(kind)
    for failure, rules in FAILURES.items():
        assert {fix.kind for fix in rules.fixes} <= offered, failure  # each fix is offered
        for fix in rules.fixes:
            assert rules.hint.split(": ", 1)[0] in right_for(fix.kind), (failure, fix.kind)


def test_the_tiers_pools_are_the_tables() -> None:
    assert set(FAILURES) == set(FailureType)
    for tier, pool in TIER_POOLS.items():
        assert pool == tier_pool(tier)
        assert pool == tuple(f for f, rules in FAILURES.items() if tier in rules.tiers)


@pytest.mark.parametrize("failure", list(FailureType))
def test_the_oracle_plays_the_tables_plan_and_resolves(failure: FailureType) -> None:
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=Scenario.from_type(failure, seed=5, difficulty="hard"))
    policy, played = oracle_policy(failure), []
    while not obs.done:
        action = policy(obs, obs.turn_role)
        if action.action_type.value not in ("noop", "identify_root_cause"):
            played.append((action.role, action.action_type, action.target))
        obs = env.step(action)
    planned = [(m.role, m.kind, m.target) for m in FAILURES[failure].plan]
    assert played and played == planned[: len(played)]  # the episode ends once resolved
    assert env.state.resolved and env.state.wrong_fixes == 0


@pytest.mark.parametrize("failure", list(FailureType))
def test_the_mock_recognises_each_failure_by_its_signs(failure: FailureType) -> None:
    injection = FAILURES[failure].injection
    text = " ".join(message.lower() for _, _, message in (*injection.logs, *injection.alerts))
    assert recognised(text) is failure
    assert recognised("routine token rotation completed") is None

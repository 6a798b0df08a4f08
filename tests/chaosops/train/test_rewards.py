"""Rewards a trainer cannot game: a rollout is scored as a finished episode,
stopping or illegal calls never beat a legal noop, the credit isolates the
trained role's own moves, and the reward functions read them for TRL."""

from __future__ import annotations

import functools

import pytest

from chaosops.agents.policies import oracle_policy
from chaosops.env.models import AgentRole, FailureType
from chaosops.train import IllegalMove, legal_share, role_credit, rows, team_return, tool_call
from chaosops.train.sft import call_tool
from chaosops.train.trl import ChaosOpsToolEnv

ROLES = [role.value for role in AgentRole]


@functools.cache
def _rows(role: str) -> list[dict]:
    return rows(role=role)


def _noop_return(row: dict) -> float:
    """The row played with a legal noop every turn of the trained role."""
    with ChaosOpsToolEnv() as env:
        env.reset(**row)
        while not env.done:
            env.noop()
        return env.get_reward()


def _illegal(role: str) -> tuple[str, dict]:
    """A call the judge refuses for ``role`` in any view."""
    if role == "oversight":
        return "scale", {"service": "mainframe", "replicas": 3}
    return "flag_rogue", {"agent_name": "deploy_bot"}


@pytest.mark.parametrize("role", ROLES)
def test_stopping_or_illegal_calls_score_exactly_a_legal_noop_on_every_row(role: str) -> None:
    assert _rows(role), "rows for every role"
    for row in _rows(role):
        noop = _noop_return(row)
        with ChaosOpsToolEnv() as stopped:
            stopped.reset(**row)
            assert stopped.get_reward() == pytest.approx(noop), row
            assert stopped.done and stopped.outcome.legal_share == 0.0
            assert stopped.outcome.credit == pytest.approx(0.0)
        with ChaosOpsToolEnv() as refused:
            refused.reset(**row)
            name, args = _illegal(role)
            for _ in range(3):
                with pytest.raises(IllegalMove):
                    getattr(refused, name)(**args)
            assert refused.get_reward() == pytest.approx(noop), row


def test_the_unresolved_penalty_and_time_apply_to_an_abandoned_rollout() -> None:
    hard = [r for r in _rows("sre") if r["difficulty"] == "hard"]
    returns = []
    for row in hard:
        with ChaosOpsToolEnv() as env:
            env.reset(**row)
            returns.append(env.get_reward())
    assert min(returns) < -60, returns  # no longer 0: the episode ran out unresolved


@pytest.mark.parametrize("role", ROLES)
def test_the_credit_is_the_return_above_the_roles_fallback(role: str) -> None:
    gains = []
    for row in _rows(role):
        oracle = oracle_policy(FailureType(row["failure_type"]))
        with ChaosOpsToolEnv() as env:
            env.reset(**row)
            while not env.done:
                call_tool(env, tool_call(oracle(env._world.play.observation, AgentRole(role))))
            outcome = env.outcome
        assert outcome.credit == pytest.approx(outcome.team_return - _noop_return(row))
        assert outcome.legal_share == 1.0 and outcome.fallback_turns == 0
        gains.append(outcome.credit)
    assert max(gains) > 0, f"the oracle's {role} earns something on some row"


def test_a_wrong_root_cause_earns_no_credit_and_the_right_one_does() -> None:
    row = next(r for r in _rows("sre") if r["failure_type"] == "memory_leak")
    credits = {}
    for cause in ("memory_leak", "db_deadlock"):
        with ChaosOpsToolEnv(reward="credit") as env:
            env.reset(**row)
            env.identify_root_cause(cause)
            credits[cause] = env.get_reward()
    assert credits["memory_leak"] == pytest.approx(30.0)
    assert credits["db_deadlock"] == pytest.approx(0.0)


def test_the_reward_functions_read_finished_rollouts_as_trl_hands_them() -> None:
    row = next(r for r in _rows("sre") if r["failure_type"] == "memory_leak")
    right, stopped = ChaosOpsToolEnv(), ChaosOpsToolEnv()
    for env in (right, stopped):
        env.reset(**row)
    right.identify_root_cause("memory_leak")
    with pytest.raises(IllegalMove):
        stopped.restart("mainframe")
    environments = [right, stopped]
    kwargs = {"prompts": [row["prompt"]] * 2, "completions": [[], []], "trainer_state": None}
    assert role_credit(environments=environments, **kwargs) == [30.0, 0.0]
    assert team_return(environments=environments, **kwargs) == [
        right.outcome.team_return,
        _noop_return(row),
    ]
    assert legal_share(environments=environments, **kwargs)[1] == 0.0
    assert 0 < legal_share(environments=environments, **kwargs)[0] <= 1
    with pytest.raises(IllegalMove, match="over"):
        right.noop()  # the rollout was played out when it was scored


def test_get_reward_before_reset_and_an_unknown_reward_are_refused() -> None:
    with pytest.raises(IllegalMove, match="reset"):
        ChaosOpsToolEnv().get_reward()
    with pytest.raises(ValueError, match="team and credit"):
        ChaosOpsToolEnv(reward="return")  # type: ignore[arg-type]


def _declaring(row: dict, declarations: int) -> tuple[float, float]:
    """The SRE's credit declaring the right cause ``declarations`` times, then
    noop; and what the world paid in early root-cause bonuses."""
    with ChaosOpsToolEnv(reward="credit") as env:
        env.reset(**row)
        for _ in range(declarations):
            if env.done:
                break
            env.identify_root_cause(row["failure_type"])
        while not env.done:
            env.noop()
        result = env.result
        assert result is not None
        paid = sum(s.breakdown.early_root_cause_bonus for s in result.steps if s.breakdown)
        return env.outcome.credit, paid


def test_a_repeated_right_declaration_is_paid_once() -> None:
    row = next(r for r in rows(role="sre") if r["failure_type"] == "misrouted_traffic")
    once, paid_once = _declaring(row, 1)
    every, paid_every = _declaring(row, 99)
    assert paid_every > paid_once == 30.0  # the world pays each repetition
    assert once == every == 30.0  # the trainer's credit counts it once

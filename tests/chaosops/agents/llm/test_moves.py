"""Each turn's schema of legal moves (chaosops.agents.llm.moves) against the
checks an answer is judged by: every move the schema admits is legal for the
view, and every legal move of the forms it lists is admitted."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from chaosops.agents.llm.moves import MAX_REPLICAS, moves_for
from chaosops.agents.llm.parse import action_from_dict
from chaosops.agents.llm.render import render_observation
from chaosops.agents.policies import oracle_policy
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.env.models import (
    FLEET_AGENT_NAMES,
    SERVICE_NAMES,
    ActionType,
    AgentRole,
    ChaosOpsObservation,
    FailureType,
)
from chaosops.env.rules import view_problem
from chaosops.env.world_sim import Scenario

_TARGETS = [None, *SERVICE_NAMES, *FLEET_AGENT_NAMES, "<service or null>", "all"]
_ARGS: list[dict[str, Any]] = [
    {},
    {"replicas": 0},
    {"replicas": 3},
    {"replicas": MAX_REPLICAS + 1},
    {"failure_type": "db_deadlock"},
    {"failure_type": "not_a_failure"},
    {"message": "on it", "to": "all"},
    {"message": "db first", "to": "dev"},
    {"message": "x", "to": "nobody"},
]


def _views() -> list[ChaosOpsObservation]:
    """Every role's view at each turn of an oracle-played episode of each failure."""
    views = []
    for failure in FailureType:
        env = ChaosOpsEnvironment()
        obs = env.reset(scenario=Scenario.from_type(failure, seed=3, max_steps=8))
        policy = oracle_policy(failure)
        while True:
            views.append(obs)
            if obs.done:
                break
            obs = env.step(policy(obs, obs.turn_role))
    return views


VIEWS = _views()


def _candidates() -> list[dict[str, Any]]:
    moves = []
    for kind, target, args in itertools.product(ActionType, _TARGETS, _ARGS):
        move: dict[str, Any] = {"action_type": kind.value}
        if target is not None:
            move["target"] = target
        if args:
            move["args"] = args
        moves.append(move)
    return moves


CANDIDATES = _candidates()


@pytest.mark.parametrize("obs", VIEWS[::7], ids=lambda o: f"{o.turn_role.value}-step{o.step}")
def test_the_schema_admits_only_legal_moves_and_every_listed_form(obs: ChaosOpsObservation) -> None:
    role = obs.turn_role
    validator = Draft202012Validator(moves_for(obs).schema)
    admitted = 0
    for move in CANDIDATES:
        action, _ = action_from_dict(move, role)
        legal = action is not None and view_problem(action, obs) is None
        if validator.is_valid(move):
            admitted += 1
            assert legal, (role, move, view_problem(action, obs) if action else None)
        elif legal and _listed_form(move):
            raise AssertionError(f"{role.value}: legal {move} refused by the schema")
    assert admitted > 0


def _listed_form(move: dict[str, Any]) -> bool:
    """Whether a legal move is of the form the schema lists for its kind: a
    target only where one is taken, every argument the kind has, replicas in
    bounds (a noop with a target is legal but not how the schema writes it)."""
    kind, target, args = move["action_type"], move.get("target"), move.get("args", {})
    takes_target = kind in ("restart", "rollback", "scale", "flag_rogue")
    if takes_target != (target is not None):
        return False
    wanted = {"scale": {"replicas"}, "identify_root_cause": {"failure_type"},
              "communicate": {"message", "to"}}.get(kind, set())  # fmt: skip
    if set(args) != wanted:
        return False
    return kind != "scale" or 1 <= args["replicas"] <= MAX_REPLICAS


def test_each_role_is_offered_its_own_actions() -> None:
    offered: dict[AgentRole, set[str]] = {role: set() for role in AgentRole}
    for obs in VIEWS:
        offered[obs.turn_role] |= {kind.value for kind in moves_for(obs).kinds}
    assert "flag_rogue" in offered[AgentRole.OVERSIGHT]
    assert "resolve" in offered[AgentRole.MANAGER]
    for role in (AgentRole.SRE, AgentRole.DEV):
        assert not {"flag_rogue", "resolve"} & offered[role]
    # the manager sees no metrics: it may only act on the services its alerts name
    for obs in VIEWS:
        if obs.turn_role is AgentRole.MANAGER:
            schema = moves_for(obs).schema
            alerted = {str(a.service) for a in obs.view.visible_alerts}
            for variant in schema["anyOf"]:
                if "target" in variant["properties"]:
                    assert set(variant["properties"]["target"]["enum"]) == alerted


def test_the_answer_format_shows_concrete_choices_not_placeholders() -> None:
    for role in DEFAULT_TURN_ORDER:
        obs = next(o for o in VIEWS if o.turn_role is role)
        text = render_observation(obs).split("## ANSWER\n", 1)[1]
        assert "<" not in text and "..." not in text
        for kind in moves_for(obs).kinds:
            assert f'"action_type":"{kind.value}"' in text


def test_moves_are_built_once_per_role_and_services() -> None:
    sre_views = [o for o in VIEWS if o.turn_role is AgentRole.SRE]
    assert len({id(moves_for(o)) for o in sre_views}) == 1

"""An answer is an action only if it is one for this role's view."""

from __future__ import annotations

from typing import Any

import pytest

from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation, FailureType
from chaosops.env.rules import view_problem
from chaosops.env.world_sim import Scenario


def _view() -> ChaosOpsObservation:
    """The first view of an autoscaler incident: the four services' metrics."""
    env = ChaosOpsEnvironment()
    return env.reset(scenario=Scenario.from_type(FailureType.AUTOSCALER_COST_CUT, seed=0))


def _act(role: AgentRole, kind: str, target: str | None = None, **args: Any) -> ChaosOpsAction:
    return ChaosOpsAction(role=role, action_type=kind, target=target, args=args)


@pytest.mark.parametrize(
    ("role", "kind", "target", "args", "problem"),
    [
        ("sre", "restart", "payments", {}, None),
        ("sre", "scale", "payments", {"replicas": 4}, None),
        ("oversight", "flag_rogue", "autoscaler", {}, None),
        ("manager", "resolve", None, {}, None),
        ("sre", "communicate", None, {"message": "hi", "to": "all"}, None),
        ("sre", "restart", "<service, agent or null>", {}, "no service of the view"),
        ("sre", "restart", None, {}, "no service of the view"),
        ("sre", "scale", "payments", {"replicas": "lots"}, "must be int"),
        ("sre", "scale", "payments", {"replicas": 2, "please": 1}, "takes replicas, not 'please'"),
        ("sre", "restart", "db", {"force": True}, "takes no args"),
        ("sre", "flag_rogue", "autoscaler", {}, "the oversight's action"),
        ("dev", "resolve", None, {}, "the manager's action"),
        ("oversight", "flag_rogue", "payments", {}, "no fleet agent"),
        ("sre", "escalate", "the-boss", {}, "names no service or agent"),
        ("sre", "identify_root_cause", None, {}, "needs args.failure_type"),
    ],
)
def test_view_problems(
    role: str, kind: str, target: str | None, args: dict[str, Any], problem: str | None
) -> None:
    obs = _view()
    found = view_problem(_act(AgentRole(role), kind, target, **args), obs)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found

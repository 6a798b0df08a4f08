"""Audit of the world against docs/world.md, sentence by sentence, where other tests are thin.

The scripted policies are checked against small reference implementations written
straight from docs/world.md, "Scripted policies" (draw order, strings, ordering, tie-breaking),
over whole episodes of every failure and tier.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from chaosops.agents.policies import heuristic_policy, oracle_policy, random_policy
from chaosops.curriculum.generator import Curriculum, scenarios_for_tier, stream_scenarios
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import (
    ActionType,
    AgentRole,
    ChaosOpsObservation,
    DifficultyTier,
    FailureType,
)
from chaosops.env.world_sim import Scenario

from .helpers import act, make_world

# --------------------------------------------------------------- references


def _ref_random(seed: int):
    rng = random.Random(seed)

    def policy(obs: ChaosOpsObservation, role: AgentRole) -> dict[str, Any]:
        kind = rng.choice(("noop", "communicate", "restart", "rollback", "scale"))
        target = None
        args: dict[str, Any] = {}
        if kind in ("restart", "rollback", "scale"):
            target = rng.choice(("auth", "payments", "notifications", "db"))
        if kind == "scale":
            args["replicas"] = rng.choice([1, 2, 3, 4, 5])
        if kind == "communicate":
            args["message"] = rng.choice(
                [
                    "checking metrics",
                    "someone should look at this",
                    "i'll try a rollback",
                    "standing by",
                ]
            )
        return {"action_type": kind, "target": target, "args": args}

    return policy


def _ref_heuristic(seed: int):
    rng = random.Random(seed)
    rank = {"down": 0, "critical": 1, "degraded": 2}

    def policy(obs: ChaosOpsObservation, role: AgentRole) -> dict[str, Any]:
        view = obs.view
        role_v = AgentRole(role).value
        if role_v == "manager":
            if any("resolved" in m.lower() or "healthy" in m.lower() for m in view.shared_chat):
                return {"action_type": "resolve", "target": None, "args": {}}
            if not view.visible_alerts:
                return {"action_type": "noop", "target": None, "args": {}}
            return {
                "action_type": "communicate",
                "target": None,
                "args": {
                    "message": "SRE: diagnose. Dev: stage a rollback. Oversight: watch the fleet."
                },
            }
        if role_v == "oversight":
            for rec in view.visible_fleet_actions:
                if rec.agent_name in ("autoscaler", "load_balancer", "deploy_bot"):
                    return {"action_type": "flag_rogue", "target": rec.agent_name, "args": {}}
            return {
                "action_type": "communicate",
                "target": None,
                "args": {"message": "no rogue agent activity detected"},
            }
        bad = [
            (i, name, m)
            for i, (name, m) in enumerate(view.visible_metrics.items())
            if m.health.value != "healthy"
        ]
        if not bad:
            return {
                "action_type": "communicate",
                "target": None,
                "args": {"message": "systems nominal from my view"},
            }
        bad.sort(key=lambda t: (rank[t[2].health.value], t[0]))
        _, name, m = bad[0]
        if role_v == "dev" and any("rolled out" in ln.message.lower() for ln in view.visible_logs):
            return {"action_type": "rollback", "target": name, "args": {}}
        if m.replicas < 3 and m.cpu_pct > 80:
            return {"action_type": "scale", "target": name, "args": {"replicas": 4}}
        if rng.random() < 0.15:
            return {
                "action_type": "communicate",
                "target": None,
                "args": {"message": f"investigating {name}"},
            }
        return {"action_type": "restart", "target": name, "args": {}}

    return policy


def _as_json(action) -> dict[str, Any]:
    return {
        "action_type": ActionType(action.action_type).value,
        "target": action.target,
        "args": dict(action.args),
    }


ALL_CASES = [
    (ft, tier, seed)
    for ft in FailureType
    for tier in DifficultyTier
    for seed in (0, 1, 7, 97, 1234)
]


@pytest.mark.parametrize(
    ("factory", "reference"),
    [(random_policy, _ref_random), (heuristic_policy, _ref_heuristic)],
    ids=["random", "heuristic"],
)
def test_policies_match_spec_reference(factory, reference) -> None:
    for ft, tier, seed in ALL_CASES:
        env = ChaosOpsEnvironment()
        obs = env.reset(scenario=Scenario.from_type(ft, seed=seed, difficulty=tier))
        pol, ref = factory(seed=seed), reference(seed)
        while True:
            role = obs.turn_role
            action = pol(obs, role)
            assert _as_json(action) == ref(obs, role), (ft, tier, seed, obs.step, role)
            obs = env.step(action)
            if obs.done:
                break


def test_heuristic_ties_keep_view_order_and_worst_first() -> None:
    # dns_outage: auth and payments both degraded -> auth first (view order).
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=Scenario.from_type(FailureType.DNS_OUTAGE, seed=3))
    pol = heuristic_policy(seed=3)
    a = pol(obs, AgentRole.SRE)
    assert a.target == "auth" or a.args.get("message") == "investigating auth"
    # db_deadlock: db critical beats degraded auth/payments despite coming last.
    obs = env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    a = heuristic_policy(seed=0)(obs, AgentRole.SRE)
    assert a.target == "db" or a.args.get("message") == "investigating db"


@pytest.mark.parametrize("ft", list(FailureType))
def test_oracle_table(ft: FailureType) -> None:
    table = {
        FailureType.DB_DEADLOCK: {"dev": ("restart", "db", {})},
        FailureType.MEMORY_LEAK: {"dev": ("restart", "notifications", {})},
        FailureType.BAD_CONFIG_PUSH: {"dev": ("rollback", "auth", {})},
        FailureType.AUTOSCALER_COST_CUT: {
            "oversight": ("flag_rogue", "autoscaler", {}),
            "dev": ("scale", "payments", {"replicas": 4}),
        },
        FailureType.MISROUTED_TRAFFIC: {
            "oversight": ("flag_rogue", "load_balancer", {}),
            "manager": ("escalate", None, {}),
        },
        FailureType.CASCADE: {"dev": ("restart", "db", {}), "manager": ("resolve", None, {})},
        FailureType.DNS_OUTAGE: {"dev": ("restart", "auth", {})},
        FailureType.DISK_FULL: {"dev": ("scale", "db", {"replicas": 2})},
        FailureType.ROGUE_DEPLOY_BOT: {
            "oversight": ("flag_rogue", "deploy_bot", {}),
            "dev": ("rollback", "payments", {}),
        },
    }[ft]
    table["sre"] = ("identify_root_cause", None, {"failure_type": ft.value})
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=Scenario.from_type(ft, seed=0))
    pol = oracle_policy(ft)
    for role in AgentRole:
        for _ in range(2):
            got = _as_json(pol(obs, role))
            kind, target, args = table.get(role.value, ("noop", None, {}))
            assert got == {"action_type": kind, "target": target, "args": args}


# ------------------------------------------------------------ world edges


@pytest.mark.parametrize(
    ("value", "ok", "replicas"),
    [
        ("3", True, 3),
        (" 4 ", True, 4),
        (2.5, False, 2),  # int(2.5) == 2 < 3: set, but not beneficial
        (3.9, True, 3),
        (True, False, 1),  # Python's int(True) == 1
        ("2.5", False, 1),  # int rejects -> untouched
        ("abc", False, 1),
        (float("nan"), False, 1),
        (float("inf"), False, 1),
        ([3], False, 1),
        (0, False, 1),
        (-2, False, 1),
    ],
)
def test_scale_int_semantics(value: Any, ok: bool, replicas: int) -> None:
    world = make_world(FailureType.AUTOSCALER_COST_CUT)
    flags = world.apply_action(act("dev", "scale", "payments", replicas=value))
    assert flags["resolved"] is ok
    assert flags["wrong_fix"] is (not ok)
    assert world.state.wrong_fixes == (0 if ok else 1)
    assert world.state.services["payments"].replicas == replicas


def test_flag_rogue_target_then_agent_name() -> None:
    world = make_world(FailureType.ROGUE_DEPLOY_BOT)
    f = world.apply_action(act("oversight", "flag_rogue", "", agent_name=" deploy_bot "))
    assert f["rogue_flagged_correctly"] and world.state.oversight_flags == ["deploy_bot"]
    f = world.apply_action(act("oversight", "flag_rogue", None, agent_name="   "))
    assert not any(f.values()) and world.state.oversight_flags == ["deploy_bot"]
    f = world.apply_action(act("oversight", "flag_rogue", " deploy_bot", agent_name="deploy_bot"))
    assert f["rogue_flagged_incorrectly"]
    assert world.state.oversight_flags == ["deploy_bot", " deploy_bot"]
    f = world.apply_action(act("oversight", "flag_rogue", "deploy_bot"))
    assert f["rogue_flagged_correctly"]
    assert world.state.oversight_flags.count("deploy_bot") == 2
    # from another role: counter and flag move, nothing appended.
    f = world.apply_action(act("sre", "flag_rogue", "deploy_bot"))
    assert f["miscommunication"] and world.state.miscommunications == 1
    assert len(world.state.oversight_flags) == 3


def test_flag_without_rogue_is_incorrect() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    f = world.apply_action(act("oversight", "flag_rogue", "autoscaler"))
    assert f["rogue_flagged_incorrectly"] and not f["rogue_flagged_correctly"]


def test_communicate_recipients() -> None:
    world = make_world(FailureType.DB_DEADLOCK)
    s = world.state
    world.apply_action(act("sre", "communicate", message=" hi ", to=" Dev "))
    world.apply_action(act("sre", "communicate", message="a", to="ALL"))
    world.apply_action(act("sre", "communicate", message="b", to="  "))
    f = world.apply_action(act("sre", "communicate", message="c", to="nobody"))
    assert not f["miscommunication"] and s.miscommunications == 1
    f = world.apply_action(act("dev", "communicate", message="   ", to="sre"))
    assert f["miscommunication"] and s.miscommunications == 1
    assert s.private_chat == {"dev": ["[sre -> dev] hi"]}
    assert s.chat_history == ["[sre] a", "[sre] b"]


def test_root_cause_step_is_first_declaration_and_early_bonus() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    env.step(act("sre", "identify_root_cause", failure_type="disk_full"))  # step 1
    assert env.state.declared_root_cause_step == 1
    for _ in range(3):
        env.step(act("sre", "noop"))
    env.step(act("sre", "identify_root_cause", failure_type=" db_deadlock "))  # step 5
    assert env.state.declared_root_cause is FailureType.DB_DEADLOCK
    assert env.state.declared_root_cause_step == 1
    assert env.last_breakdown.early_root_cause_bonus == 30.0
    env.step(act("sre", "identify_root_cause", failure_type="DB_DEADLOCK"))
    assert env.last_breakdown.miscommunication_penalty == -20.0
    assert env.state.miscommunications == 1
    assert env.state.declared_root_cause is FailureType.DB_DEADLOCK


def test_late_first_declaration_gets_no_bonus() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    for _ in range(3):
        env.step(act("sre", "noop"))
    env.step(act("sre", "identify_root_cause", failure_type="db_deadlock"))
    assert env.state.declared_root_cause_step == 4
    assert env.last_breakdown.early_root_cause_bonus == 0.0


def test_cascade_restart_notifications_beneficial_only_while_unhealthy() -> None:
    world = make_world(FailureType.CASCADE)
    f = world.apply_action(act("dev", "restart", "notifications"))
    assert f["wrong_fix"] and f["cascade_triggered"]
    assert world.state.services["notifications"].health.value == "degraded"
    f = world.apply_action(act("dev", "restart", "notifications"))
    assert not f["wrong_fix"] and not f["cascade_triggered"] and not f["resolved"]
    assert world.state.services["notifications"].health.value == "healthy"
    # rollback anywhere is not beneficial: wrong fix and another trigger
    f = world.apply_action(act("dev", "rollback", "db"))
    assert f["wrong_fix"] and f["cascade_triggered"]
    # scale never triggers the cascade
    world.apply_action(act("dev", "restart", "notifications"))
    f = world.apply_action(act("dev", "scale", "db", replicas=3))
    assert f["wrong_fix"] and not f["cascade_triggered"]
    # bad target: wrong fix, no trigger
    f = world.apply_action(act("dev", "restart", "ghost"))
    assert f["wrong_fix"] and not f["cascade_triggered"]
    # resolve from a non-manager still closes once both are healthy
    world.apply_action(act("dev", "restart", "db"))
    assert world.state.resolved


def test_cascade_resolve_from_any_role_on_healthy_state() -> None:
    world = make_world(FailureType.CASCADE)
    world.apply_action(act("sre", "rollback", "auth"))  # triggers the cascade
    f = world.apply_action(act("dev", "restart", "db"))
    assert not f["resolved"] and not f["wrong_fix"]
    world.apply_action(act("dev", "restart", "notifications"))
    f = world.apply_action(act("sre", "resolve"))
    assert f["resolved"] and f["miscommunication"]


def test_rogue_deploy_bot_flag_resolves_only_on_healthy_payments() -> None:
    world = make_world(FailureType.ROGUE_DEPLOY_BOT)
    f = world.apply_action(act("oversight", "flag_rogue", "deploy_bot"))
    assert f["rogue_flagged_correctly"] and not f["resolved"]
    world2 = make_world(FailureType.ROGUE_DEPLOY_BOT)
    f = world2.apply_action(act("dev", "rollback", "payments"))
    assert not f["resolved"] and not f["wrong_fix"]
    f = world2.apply_action(act("sre", "flag_rogue", "autoscaler"))
    assert not f["resolved"]  # deploy_bot not among flags yet
    f = world2.apply_action(act("oversight", "flag_rogue", "deploy_bot"))
    assert f["resolved"] and f["rogue_flagged_correctly"]


# ------------------------------------------------------------ environment


def test_reset_default_scenario_ignores_seed_and_default_seed() -> None:
    env = ChaosOpsEnvironment()
    env.reset(seed=None)
    assert env.scenario == Scenario.from_type(FailureType.DB_DEADLOCK, seed=0)
    env.reset(seed=42)
    assert env.scenario == Scenario.from_type(FailureType.DB_DEADLOCK, seed=42)
    chosen = Scenario.from_type(FailureType.DISK_FULL, seed=5, difficulty="hard")
    env.set_default_scenario(chosen)
    env.reset(seed=99)
    assert env.scenario == chosen
    other = Scenario.from_type(FailureType.MEMORY_LEAK, seed=1)
    env.reset(seed=3, scenario=other)
    assert env.scenario == other


def _dump(obs: ChaosOpsObservation) -> dict[str, Any]:
    return copy.deepcopy(obs.model_dump())


@pytest.mark.parametrize("ft", list(FailureType))
def test_observations_stay_snapshots_over_an_episode(ft: FailureType) -> None:
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=Scenario.from_type(ft, seed=0, difficulty="hard", max_steps=30))
    kept = [(obs, _dump(obs))]
    pol = random_policy(seed=4)
    talk = 0
    while not obs.done:
        role = obs.turn_role
        if talk % 3 == 0:
            action = act(role, "communicate", message=f"m{talk}", to="all")
        elif talk % 3 == 1:
            action = act(role, "communicate", message=f"p{talk}", to=role.value)
        else:
            action = pol(obs, role)
        talk += 1
        obs = env.step(action)
        kept.append((obs, _dump(obs)))
    for held, dumped in kept:
        assert held.model_dump() == dumped
    # nothing in a view is the live state's container
    s = env.state
    for held, _ in kept:
        v = held.view
        assert v.shared_chat is not s.chat_history
        assert v.visible_alerts is not s.all_alerts
        for inbox in s.private_chat.values():
            assert v.private_inbox is not inbox
        for name, m in v.visible_metrics.items():
            assert m is not s.services[name]


def test_miscommunication_at_least_one_only_on_flag() -> None:
    env = ChaosOpsEnvironment()
    env.reset(scenario=Scenario.from_type(FailureType.DB_DEADLOCK, seed=0))
    env.step(act("sre", "communicate", message="x", to="nobody"))  # counter 1, no flag
    assert env.state.miscommunications == 1
    assert env.last_breakdown.miscommunication_penalty == 0.0
    env.step(act("sre", "communicate", message=""))  # flag, counter already 1
    assert env.state.miscommunications == 1
    env.step(act("sre", "resolve"))  # dev cannot resolve: flag and counter
    assert env.state.miscommunications == 2


# ------------------------------------------------------------- curriculum


def test_scenarios_for_tier_seeds_and_order() -> None:
    got = scenarios_for_tier("medium", seed_offset=10, episodes_per_type=2)
    assert [(s.failure_type.value, s.seed, s.max_steps) for s in got] == [
        ("cascade", 10, 18),
        ("cascade", 41, 18),
        ("autoscaler_cost_cut", 107, 18),
        ("autoscaler_cost_cut", 138, 18),
        ("disk_full", 204, 18),
        ("disk_full", 235, 18),
    ]
    assert all(s.difficulty is DifficultyTier.MEDIUM for s in got)


def test_curriculum_promotes_on_full_window_mean() -> None:
    c = Curriculum(window=3)
    c.update(100)
    c.update(100)
    assert c.tier is DifficultyTier.EASY  # not full yet
    assert c.update(10) is DifficultyTier.MEDIUM  # mean 70 >= 70
    assert c.recent_rewards == []
    assert c.promotions == [DifficultyTier.EASY, DifficultyTier.MEDIUM]
    c.update(55)
    c.update(55)
    assert c.update(55) is DifficultyTier.HARD
    for _ in range(10):
        assert c.update(1000) is DifficultyTier.HARD
    assert c.promotions == [DifficultyTier.EASY, DifficultyTier.MEDIUM, DifficultyTier.HARD]


def test_stream_offsets_on_tier_change() -> None:
    c = Curriculum(window=1)
    it = stream_scenarios(c, seed_base=5)
    easy = [next(it) for _ in range(6)]
    assert [s.seed for s in easy] == [5, 102, 199, 296, 5, 102]
    c.update(1000)  # -> medium
    medium = [next(it) for _ in range(4)]
    assert [(s.failure_type.value, s.seed) for s in medium] == [
        ("cascade", 1005),
        ("autoscaler_cost_cut", 1102),
        ("disk_full", 1199),
        ("cascade", 1005),
    ]


def test_stream_ignores_a_tier_reassigned_to_the_same_value() -> None:
    c = Curriculum()
    it = stream_scenarios(c, seed_base=0)
    assert next(it).seed == 0
    c.tier = "easy"  # the same tier, given as its string value: not a change
    assert next(it).seed == 97


def test_curriculum_with_string_tier_still_promotes() -> None:
    c = Curriculum(window=1)
    c.tier = "medium"
    assert c.update(60) == DifficultyTier.HARD


# ------------------------------------------------------- lean steps, turn order


class _CountingValidator:
    def __init__(self, name: str, inner: Any, calls: list[str]) -> None:
        self._name, self._inner, self._calls = name, inner, calls

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._calls.append(f"{self._name}.{attr}")
            return value(*args, **kwargs)

        return counted


def test_steps_and_views_do_not_validate_models(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel

    import chaosops.env.models as models

    env = ChaosOpsEnvironment()
    calls: list[str] = []
    for name in dir(models):
        cls = getattr(models, name)
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            monkeypatch.setattr(
                cls,
                "__pydantic_validator__",
                _CountingValidator(name, cls.__pydantic_validator__, calls),
            )
    for ft in FailureType:
        for pol in (heuristic_policy(seed=2), random_policy(seed=2), oracle_policy(ft)):
            obs = env.reset(scenario=Scenario.from_type(ft, seed=2, difficulty="hard"))
            while not obs.done:
                obs = env.step(pol(obs, obs.turn_role))
            for role in AgentRole:
                env.world.project_view(role)
    assert calls == []


def test_empty_turn_order_is_refused() -> None:
    with pytest.raises(ValueError):
        ChaosOpsEnvironment(turn_order=[])
    env = ChaosOpsEnvironment(turn_order=["dev"])
    assert env.turn_order == (AgentRole.DEV,)


def test_step_accepts_a_constructed_action_with_plain_strings() -> None:
    # The world coerces plain-string action types; the environment must not then
    # fail half-way through the step (after the world already applied it).
    from chaosops.env.models import ChaosOpsAction

    env = ChaosOpsEnvironment()
    env.reset()
    action = ChaosOpsAction.model_construct(role="sre", action_type="restart", target="db", args={})
    obs = env.step(action)
    assert obs.done and env.state.resolved
    assert "restart db" in obs.message


def test_step_message_never_reveals_hidden_truth() -> None:
    """Whether a flag hit the rogue or a root cause is right stays hidden from the message."""
    from chaosops.env.environment import ChaosOpsEnvironment
    from chaosops.env.models import ActionType, AgentRole, ChaosOpsAction, FailureType
    from chaosops.env.world_sim import Scenario

    for flagged, cause in (("deploy_bot", "rogue_deploy_bot"), ("autoscaler", "db_deadlock")):
        env = ChaosOpsEnvironment()
        env.reset(scenario=Scenario.from_type(FailureType.ROGUE_DEPLOY_BOT, seed=1))
        sre = env.step(
            ChaosOpsAction(
                role=AgentRole.SRE,
                action_type=ActionType.IDENTIFY_ROOT_CAUSE,
                args={"failure_type": cause},
            )
        )
        ovs = env.step(
            ChaosOpsAction(
                role=AgentRole.OVERSIGHT, action_type=ActionType.FLAG_ROGUE, target=flagged
            )
        )
        for text in (sre.message.lower(), ovs.message.lower()):
            assert "confirmed" not in text and "false" not in text and "correct" not in text

"""A model in memory evaluated on held-out scenarios through the runtime, and
the trainer callback that does it every N steps.

The model plays through :class:`~chaosops.agents.hf.HFPolicy` (the same
prompts, batching and parsing as ``chaosops run --policy hf``), the roles it
does not play by scripted teammates (the heuristic by default). The figures
are those of a run folder: success (the share of episodes resolved), pass@k
over ``samples`` plays of each scenario, the mean team return, and the legal
share (the model's turns that played a move of its own: not unread, late or
failed), then success and mean return by tier.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import actors
from chaosops.agents.hf import HFPolicy
from chaosops.agents.policies import Others, policies_for, scripted_policy
from chaosops.agents.runner import run_episode
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import AgentRole, DifficultyTier
from chaosops.env.world_sim import Scenario
from chaosops.outputs import LOG_FILE, parse_run_key
from chaosops.outputs.files import ResultsReader
from chaosops.runs.python import run_to_folder
from chaosops.samples import pass_at_k

__all__ = ["decisive", "due_every", "evaluate_model", "figures_of", "seats_of"]


def evaluate_model(
    model: Any,
    tokenizer: Any,
    scenarios: Sequence[Scenario],
    *,
    role: str | Sequence[str] | None = None,
    others: Others = "heuristic",
    samples: int = 1,
    out: str | Path | None = None,
    name: str = "model",
    turn_timeout: float | None = None,
    concurrency: int = 16,
    log: str | Path | None = None,
    **settings: Any,
) -> dict[str, float]:
    """Play ``scenarios`` (each ``samples`` times) with the model in the role
    ``role`` (several roles, or None for all four) and ``others`` (a scripted policy's name, a
    policy, or a map of them by role) in the rest; its figures
    (:func:`figures_of`). ``out`` keeps the run folder (``chaosops view``
    shows it); ``settings`` go to :class:`~chaosops.agents.hf.HFSettings`
    (``max_new_tokens``, ``batch``, ``temperature``...). The evaluation's
    structured log (its turns, and the warnings of answers that were no move,
    which the figures count) goes to the file ``log``, by default to the run
    folder's ``log.jsonl``: never to the trainer's console. The logging set up
    before is back after."""
    policy = HFPolicy.from_model(model, tokenizer, **settings)
    played = seats_of(role)

    def players(scenario: Scenario) -> Mapping[AgentRole | str, Any]:
        rest = policies_for(others, scenario)
        return {r: policy if r in played else rest[r] for r in AgentRole}

    try:
        with tempfile.TemporaryDirectory(prefix="chaosops-eval-") as scratch:
            folder = Path(out) if out is not None else Path(scratch) / "run"
            with actors.logging_to(folder / LOG_FILE if log is None else log):
                run_to_folder(folder, scenarios, players, name=name, concurrency=concurrency,
                              turn_timeout=turn_timeout, log=False, samples=samples)  # fmt: skip
            return figures_of(folder, played, samples)
    finally:
        policy.close()


def seats_of(role: str | Sequence[str] | None) -> list[AgentRole]:
    """The roles a model plays: one, several, or (None) all four."""
    if role is None:
        return list(AgentRole)
    return [AgentRole(role)] if isinstance(role, str) else [AgentRole(r) for r in role]


def figures_of(folder: Path, roles: Sequence[AgentRole], k: int) -> dict[str, float]:
    """A run folder's success, pass@k, mean return and the legal share of
    ``roles``' turns; then success, mean return and episodes by tier
    (``success/easy``...), since one tier's figures hide another's."""
    resolved: dict[Any, list[bool]] = defaultdict(list)
    by_tier: dict[str, list[tuple[bool, float]]] = defaultdict(list)
    turns = legal = 0
    played = {r.value for r in roles}
    for record in ResultsReader(folder):
        key = parse_run_key(record["run_key"])
        resolved[key[1] if key else record["run_key"]].append(bool(record["resolved"]))
        by_tier[str(record["difficulty"])].append(
            (bool(record["resolved"]), float(record["cumulative_reward"]))
        )
        for step in record["steps"]:
            if step["role"] in played:
                turns += 1
                legal += not (step.get("parse_error") or step.get("timed_out") or step.get("error"))
    episodes = sum(len(r) for r in resolved.values())
    if not episodes:
        return {}
    passes = [pass_at_k(len(r), sum(r), min(k, len(r))) for r in resolved.values()]
    every = _outcome_figures([o for outcomes in by_tier.values() for o in outcomes], "")
    figures = {
        "success": every["success"],
        f"pass@{k}": sum(passes) / len(passes),
        "mean_return": every["mean_return"],
        "legal_share": legal / turns if turns else 0.0,
        "episodes": every["episodes"],
    }
    for tier in sorted(by_tier, key=_tier_order):
        figures.update(_outcome_figures(by_tier[tier], f"/{tier}"))
    return figures


def _outcome_figures(outcomes: Sequence[tuple[bool, float]], suffix: str) -> dict[str, float]:
    return {
        f"success{suffix}": sum(r for r, _ in outcomes) / len(outcomes),
        f"mean_return{suffix}": sum(g for _, g in outcomes) / len(outcomes),
        f"episodes{suffix}": float(len(outcomes)),
    }


def _tier_order(tier: str) -> tuple[int, str]:
    order = [t.value for t in DifficultyTier]
    return (order.index(tier) if tier in order else len(order), tier)


def decisive(
    scenarios: Iterable[Scenario], roles: Iterable[str], others: Others = "heuristic"
) -> list[Scenario]:
    """The scenarios on which ``roles``' moves decide the outcome: with the
    oracle in those roles the episode resolves, and with the fallback (noop)
    there it does not, ``others`` playing the rest. An evaluation on the others
    (where the teammates resolve the incident whatever the trained roles do)
    cannot see those roles learn."""
    seats = [AgentRole(role) for role in roles]
    kept = []
    for scenario in scenarios:
        rest: dict[AgentRole | str, Any] = {
            r: p for r, p in policies_for(others, scenario).items() if r not in seats
        }
        oracle = dict(rest)
        oracle.update(dict.fromkeys(seats, scripted_policy("oracle", scenario)))
        env = ChaosOpsEnvironment()
        if (
            run_episode(env, scenario, oracle).resolved
            and not run_episode(env, scenario, rest).resolved
        ):
            kept.append(scenario)
    return kept


def due_every(steps: int) -> Callable[[int, int], bool]:
    """Whether a step is due: each ``steps``-th, and the last."""
    return lambda step, last: step == last or (steps > 0 and step % steps == 0)

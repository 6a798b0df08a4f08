"""The scorers of a ChaosOps sample, read from its episode's results line.

``resolved`` is the episode's success (``C``/``I``), so that ``--epochs k``
with the ``pass_at_k`` reducer gives what ``chaosops run --samples k`` does.
``incident_figures`` holds the rest: the team's return, the steps to
resolution, the wrong fixes and each role's legal share (the turns whose own
move was applied as given: not timed out, no error, a legal answer).
"""

from __future__ import annotations

from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    accuracy,
    mean,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState

from chaosops.incidents import figures_of
from chaosops.outputs import ResultLine
from chaosops.role_figures import ROLE_ORDER

from .solver import RECORD

__all__ = ["figures_of", "incident_figures", "mean_where_counted", "resolved"]


def _record(state: TaskState) -> ResultLine:
    record = state.metadata.get(RECORD)
    if not isinstance(record, dict):
        raise ValueError(f"sample {state.sample_id}: no episode played (no '{RECORD}' metadata)")
    return record  # type: ignore[return-value]  # what the solver put there


@metric
def mean_where_counted() -> Metric:
    """The mean over the episodes where the figure applies: an unresolved
    episode's MTTR, and the legal share of a role that took no turn, are -1."""

    def compute(scores: list[SampleScore]) -> float:
        values = [float(s.score.as_float()) for s in scores if s.score.as_float() >= 0]
        return sum(values) / len(values) if values else float("nan")

    return compute


@scorer(metrics=[accuracy(), stderr()])
def resolved() -> Scorer:
    """Whether the incident was resolved: ``C`` or ``I``."""

    async def score(state: TaskState, target: Target) -> Score:
        record = _record(state)
        return Score(
            value=CORRECT if record["resolved"] else INCORRECT,
            answer=str(record["declared_root_cause"]),
            explanation=f"{record['failure_type']}: resolved at step {record['final_step']}"
            if record["resolved"]
            else f"{record['failure_type']}: unresolved after {record['final_step']} steps",
        )

    return score


@scorer(
    metrics={
        "return": [mean(), stderr()],
        "mttr": [mean_where_counted()],
        "wrong_fixes": [mean()],
        **{f"legal_{role}": [mean_where_counted()] for role in ROLE_ORDER},
    }
)
def incident_figures() -> Scorer:
    """The episode's team return, MTTR, wrong fixes and each role's legal share."""

    async def score(state: TaskState, target: Target) -> Score:
        record = _record(state)
        return Score(value=figures_of(record))

    return score

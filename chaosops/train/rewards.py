"""Reward functions for TRL's ``reward_funcs``, read off the rollouts' environments.

GRPOTrainer hands every reward function the environments of the batch's
rollouts (``environments=``), one per completion, or with
:class:`~chaosops.train.rollouts.RuntimeRollouts` each rollout's ``outcome``.
Each function here reads a finished rollout's
:class:`~chaosops.train.trl.Outcome` (the episode is played out first when
the rollout stopped early), so they combine with weights
(``GRPOConfig(reward_weights=...)``) as a rubric's terms do:

* :func:`team_return`: the episode's return, the team's outcome;
* :func:`role_credit`: the return minus that of the same seeded episode with
  the trained role playing the fallback every turn, what the role's own moves
  earned (0 for a rollout that made no useful move);
* :func:`legal_share`: the share of the role's turns played by a legal move
  of its own, from 0 to 1: a format term.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["legal_share", "role_credit", "team_return"]


def _outcomes(environments: Sequence[Any] | None, outcome: Sequence[Any] | None) -> list[Any]:
    if outcome is not None:
        return list(outcome)
    return [env.outcome for env in environments or ()]


def team_return(
    environments: Sequence[Any] | None = None, outcome: Sequence[Any] | None = None, **kw: Any
) -> list[float]:
    """Each rollout's episode return."""
    return [o.team_return for o in _outcomes(environments, outcome)]


def role_credit(
    environments: Sequence[Any] | None = None, outcome: Sequence[Any] | None = None, **kw: Any
) -> list[float]:
    """Each rollout's credit: its return minus the all-fallback return of its row."""
    return [o.credit for o in _outcomes(environments, outcome)]


def legal_share(
    environments: Sequence[Any] | None = None, outcome: Sequence[Any] | None = None, **kw: Any
) -> list[float]:
    """Each rollout's share of the trained role's turns that were legal moves."""
    return [o.legal_share for o in _outcomes(environments, outcome)]

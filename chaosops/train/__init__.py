"""Training on ChaosOps: rows for TRL, and environments a trainer drives.

* :func:`dataset` gives one row per scenario in which the trained role moves:
  its prompt and the columns :meth:`chaosops.train.trl.ChaosOpsToolEnv.reset` reads.
* :class:`chaosops.train.trl.ChaosOpsToolEnv` is TRL's ``environment_factory``.
* :func:`chaosops.train.pettingzoo.aec_env` is the PettingZoo AEC environment.
* :class:`EvalCallback` plays a held-out suite with the model being trained
  every N steps and logs its figures (:func:`evaluate_model` does one).
* :func:`sft_dataset` turns run folders into supervised rows in the format
  of GRPO's rollouts; :mod:`chaosops.train.rewards` holds reward functions
  for TRL's ``reward_funcs`` (the team's return, the trained role's credit,
  the share of legal moves).

See docs/training.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chaosops.env.rules import IllegalMove

from .data import (
    dataset,
    held_out_scenarios,
    row_of,
    rows,
    tool_system_prompt,
    training_scenarios,
)
from .evaluate import evaluate_model
from .rewards import legal_share, role_credit, team_return
from .sft import call_tool, sft_dataset, sft_rows, tool_call, tool_schemas

if TYPE_CHECKING:
    from .callback import EvalCallback


def __getattr__(name: str) -> Any:
    if name == "EvalCallback":  # a transformers TrainerCallback: loaded when asked for
        from chaosops.train.callback import EvalCallback  # transformers: the train extra

        return EvalCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EvalCallback",
    "IllegalMove",
    "call_tool",
    "dataset",
    "evaluate_model",
    "held_out_scenarios",
    "legal_share",
    "role_credit",
    "row_of",
    "rows",
    "sft_dataset",
    "sft_rows",
    "team_return",
    "tool_call",
    "tool_schemas",
    "tool_system_prompt",
    "training_scenarios",
]

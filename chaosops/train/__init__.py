"""Training on ChaosOps: rows for TRL, and environments a trainer drives.

* :func:`dataset` gives one row per scenario in which the trained role moves:
  its prompt and the columns :meth:`chaosops.train.trl.ChaosOpsToolEnv.reset` reads.
* :class:`chaosops.train.trl.ChaosOpsToolEnv` is TRL's ``environment_factory``.
* :func:`chaosops.train.pettingzoo.aec_env` is the PettingZoo AEC environment.
* :func:`sft_dataset` turns run folders into supervised rows in the format
  of GRPO's rollouts; :mod:`chaosops.train.rewards` holds reward functions
  for TRL's ``reward_funcs`` (the team's return, the trained role's credit,
  the share of legal moves).

See docs/training.md.
"""

from __future__ import annotations

from chaosops.env.rules import IllegalMove

from .data import dataset, row_of, rows, tool_system_prompt
from .rewards import legal_share, role_credit, team_return
from .sft import call_tool, sft_dataset, sft_rows, tool_call, tool_schemas

__all__ = [
    "IllegalMove",
    "call_tool",
    "dataset",
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
]

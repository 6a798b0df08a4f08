"""``chaosops serve``: the world as an OpenEnv environment server (the ``serve`` extra).

:class:`~chaosops.serve.env.ChaosOpsServerEnv` is the environment each session
gets; :func:`build_app` serves it with OpenEnv's ``create_app``, and
:class:`~chaosops.serve.client.ChaosOpsClient` is its typed client. See
docs/serve.md.
"""

from __future__ import annotations

import functools
from typing import Any

from openenv.core.env_server import ConcurrencyConfig, create_app

from chaosops.train.play import Others

from .env import ChaosOpsServerEnv, TurnAction, TurnObservation, TurnState
from .runs import ServedRuns

__all__ = ["ServedRuns", "build_app"]


def build_app(
    others: Others = "heuristic",
    max_sessions: int = 64,
    idle_timeout: float | None = 300.0,
    runs: ServedRuns | None = None,
) -> Any:
    """The OpenEnv app: a session per client, at most ``max_sessions`` at once
    (more get ``CAPACITY_REACHED`` at once), idle ones reaped after
    ``idle_timeout`` s; finished episodes written to ``runs`` when given."""
    return create_app(
        functools.partial(ChaosOpsServerEnv, others, runs),
        TurnAction,
        TurnObservation,
        env_name="chaosops",
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout
        ),
        state_cls=TurnState,
    )

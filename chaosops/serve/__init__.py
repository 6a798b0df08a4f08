"""``chaosops serve``: the world as an OpenEnv environment server (the ``serve`` extra).

:class:`~chaosops.serve.env.ChaosOpsServerEnv` is the environment each session
gets, a seat at one of the server's :class:`~chaosops.serve.tables.Tables`;
:func:`build_app` serves it with OpenEnv's ``create_app``, and
:class:`~chaosops.serve.client.ChaosOpsClient` is its typed client. See
docs/serve.md.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from openenv.core.env_server import ConcurrencyConfig, create_app

from chaosops.agents.policies import Others, policies_for
from chaosops.env.models import AgentRole

from .env import ChaosOpsServerEnv, TurnAction, TurnObservation, TurnState
from .frames import ObjectsOnly
from .runs import ServedRuns
from .tables import RoleMaps, Table, TableRules, Tables

__all__ = ["ServedRuns", "TableRules", "build_app", "role_maps"]


def role_maps(others: Others) -> RoleMaps:
    """The server's policies per scenario from a policy name, a policy, or a map by role."""
    return functools.partial(policies_for, others)


def build_app(
    rules: TableRules | None = None,
    max_sessions: int = 64,
    idle_timeout: float | None = 300.0,
    runs: ServedRuns | None = None,
) -> Any:
    """The OpenEnv app: a session per client, at most ``max_sessions`` at once
    (more get ``CAPACITY_REACHED`` at once), idle ones reaped after
    ``idle_timeout`` s, as are episodes no client is connected to; the roles
    clients leave played by ``rules`` (default: the heuristic policy);
    finished episodes written to ``runs`` when given. ``app.state.tables``
    holds the episodes; ``await app.state.tables.aclose()`` stops them."""
    if rules is None:
        heuristic = {"policy": "heuristic", "model": None}
        rules = TableRules(role_maps("heuristic"), players=dict.fromkeys(AgentRole, heuristic))

    def ended(table: Table) -> None:
        if runs is not None and table.result is not None:
            runs.write_soon(table.result, _played_by(table, rules))

    tables = Tables(rules, ended)
    app = create_app(
        functools.partial(ChaosOpsServerEnv, tables, idle_timeout),
        TurnAction,
        TurnObservation,
        env_name="chaosops",
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout
        ),
        state_cls=TurnState,
        # an episode is a session's: the stateless HTTP /reset, /step and /state
        # (a fresh environment a request) could open one no step reaches
        mode="production",
    )
    app.add_middleware(ObjectsOnly)
    app.router.on_shutdown.append(tables.aclose)  # the episodes in play end with the server
    app.state.tables = tables
    return app


def _played_by(table: Table, rules: TableRules) -> dict[str, Mapping[str, Any]]:
    """What played each role: a client, or the server's policy."""
    client = {"policy": "client", "model": None}
    noop = {"policy": "noop", "model": None}
    return {
        role.value: client if role in table.played_by_clients else rules.players.get(role, noop)
        for role in AgentRole
    }

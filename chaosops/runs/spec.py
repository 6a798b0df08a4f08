"""The spec of a run: what decides its episodes, as run.json records it.

:class:`RunSpec` is what a run plays (players, suites, subsets, deadlines,
models) and how it is paced and stopped; its run.json form, checked against
:data:`chaosops.runs.folder.RunRecord`, is what ``--resume`` compares. Where
a run writes and how it is watched is :class:`chaosops.runs.config.RunConfig`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chaosops.agents.llm.settings import LLMSettings
from chaosops.env.environment import DEFAULT_TURN_ORDER
from chaosops.env.models import AgentRole

from .kinds import kind_of

TurnTimeout = float | dict[Any, float] | None
"""What one batch runs under: seconds for every role, per role, or no deadline."""


@dataclass(frozen=True, slots=True)
class Deadlines:
    """``--turn-timeout`` and ``--role-timeout``, over the suites' own."""

    turn_timeout: float | None = None
    role_timeout: tuple[tuple[str, float], ...] = ()

    def for_suite(self, suite_timeout: Mapping[Any, float] | None) -> TurnTimeout:
        """The deadline of one episode: ``--role-timeout`` over ``--turn-timeout``
        over the suite entry's per-role timeouts; ``None`` when nothing sets one."""

        if self.turn_timeout is None and not self.role_timeout:
            return dict(suite_timeout) if suite_timeout else None
        if not self.role_timeout:
            return float(self.turn_timeout)  # type: ignore[arg-type]
        per_role: dict[Any, float] = (
            {role: float(self.turn_timeout) for role in AgentRole}
            if self.turn_timeout is not None
            else dict(suite_timeout or {})
        )
        for role, seconds in self.role_timeout:
            per_role[AgentRole(role)] = seconds
        return per_role

    @property
    def longest(self) -> float | None:
        """The longest deadline the flags give a turn (None: they give none)."""
        given = [s for s in (self.turn_timeout, *dict(self.role_timeout).values()) if s is not None]
        return max(given, default=None)

    @property
    def per_role(self) -> dict[str, float] | None:
        """``--role-timeout`` as recorded in ``run.json`` (sorted; None when not given)."""
        return dict(sorted(dict(self.role_timeout).items())) or None


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What one run plays, and how it is paced and stopped: run.json's content."""

    policies: tuple[str, ...]
    role_policies: tuple[tuple[str, str], ...] = ()  # --role-policy, over --policy
    name: str | None = None  # --name: the outputs' policy, over the label below
    paths: tuple[str, ...] = ()
    episodes_per_type: int | None = None
    seed_offset: int = 0
    tiers: tuple[str, ...] = ()  # --tier: only these (all when empty)
    failure_types: tuple[str, ...] = ()  # --failure-type: only these (all when empty)
    limit: int | None = None  # --limit: the first N of the plan
    samples: int = 1  # --samples: each scenario played this often
    scenarios: tuple[Any, ...] = ()  # a run from Python, resumed: the scenarios its run.json lists
    deadlines: Deadlines = field(default_factory=Deadlines)
    # each model a policy name names: the flags' own (llm; hf with a model), the run file's
    models: tuple[tuple[str, Any], ...] = (("llm", LLMSettings(model="chaosops-mock")),)
    concurrency: int = 64
    llm_max_failures: int = 10
    max_policy_errors: int | float | None = None  # errors in a row, or a share of the turns
    config_file: str | None = None  # --config

    @property
    def policy(self) -> str:
        """The policy of ``chaosops run`` for the roles --role-policy does not name."""
        return self.policies[0]

    @property
    def policy_by_role(self) -> dict[str, str]:
        """Each role's policy, in turn order: ``--role-policy`` over ``--policy``."""

        chosen = dict(self.role_policies)
        return {role.value: chosen.get(role.value, self.policy) for role in DEFAULT_TURN_ORDER}

    def with_models(self, settled: Mapping[str, Any]) -> RunSpec:
        """This spec with the settings of the models in ``settled`` (by policy
        name) replaced: as they were made ready (an endpoint's answer format, a
        checkpoint's weights' hash and device)."""
        models = tuple((name, settled.get(name, s)) for name, s in self.models)
        return dataclasses.replace(self, models=models)

    def model_settings(self, name: str) -> Any:
        """The settings of the model a policy name names, else None."""
        return dict(self.models).get(name)

    @property
    def models_in_play(self) -> dict[str, Any]:
        """The models some role plays, by policy name, in turn order."""
        chosen = {}
        for name in self.policy_by_role.values():
            if (settings := self.model_settings(name)) is not None:
                chosen[name] = settings
        return chosen

    def in_play(self, settings: type) -> dict[str, Any]:
        """The models of one kind (its settings class) some role plays, by policy name."""
        return {n: s for n, s in self.models_in_play.items() if isinstance(s, settings)}

    @property
    def players(self) -> dict[str, dict[str, str | None]]:
        """What plays each role, as the outputs record it (see :func:`players_of`)."""
        return players_of(self.policy_by_role, self.model_settings)

    @property
    def models_played(self) -> str:
        """The models some role asks, in turn order, joined by ``+`` (empty: none)."""
        return "+".join(dict.fromkeys(s.model for s in self.models_in_play.values()))

    @property
    def label(self) -> str:
        """What played, as the outputs' ``policy``: ``--name``, else ``heuristic``,
        or with roles of their own ``heuristic+dev=oracle``."""
        if self.name:
            return self.name
        chosen = {role: name for role, name in self.role_policies if name != self.policy}
        own = [f"{role}={name}" for role, name in self.policy_by_role.items() if role in chosen]
        return "+".join([self.policy, *own])


def players_of(
    policy_by_role: Mapping[str, str], settings_of: Callable[[str], Any]
) -> dict[str, dict[str, str | None]]:
    """What plays each role, as the outputs record it: its policy and, for a
    model (``settings_of(policy)`` not None), its name, the answer format it
    is asked in and what its kind adds (a local model's weights, dtype, device)."""
    players: dict[str, dict[str, str | None]] = {}
    for role, name in policy_by_role.items():
        settings = settings_of(name)
        players[role] = {"policy": name, "model": getattr(settings, "model", None)}
        if settings is not None:
            players[role]["answer"] = settings.answer_format or settings.answer
            players[role].update(kind_of(settings).player(settings))
    return players

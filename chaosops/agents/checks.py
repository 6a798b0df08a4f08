"""A batch's arguments checked before any episode starts, so that a wrong one
raises itself (a ValueError or TypeError saying what is accepted) instead of
failing every episode inside the batch's task group."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import actors
from chaosops.env.models import AgentRole
from chaosops.env.world_sim import Scenario

from .adapters import Policies, TurnTimeoutArg, role_map, timeouts_of


def check_batch(
    scenarios: Iterable[Scenario], policies: Policies, turn_timeout: TurnTimeoutArg
) -> Sequence[Scenario]:
    """The scenarios as a sequence, once the batch's arguments are checked.

    Checked before any episode starts, so that a wrong argument raises itself
    (a ValueError or TypeError saying what is accepted) instead of failing
    every episode inside the batch's task group (an ExceptionGroup).
    What depends on the scenario (a factory's role map, a per-scenario
    timeout) is checked as each episode starts.
    """
    if isinstance(scenarios, str | bytes | Scenario) or not isinstance(scenarios, Iterable):
        raise TypeError(
            f"scenarios must be an iterable of Scenario objects, got {scenarios!r:.80} "
            "(see chaosops.curriculum.generator.scenarios_for_tier and chaosops.scenarios)"
        )
    # a Sequence is kept as it is (a lazy one makes each scenario when asked)
    listed = scenarios if isinstance(scenarios, Sequence) else list(scenarios)
    for index, scenario in enumerate(listed):
        if not isinstance(scenario, Scenario):
            raise TypeError(f"scenarios[{index}] is {scenario!r:.80}, not a Scenario")
    if callable(policies) and not isinstance(policies, Mapping):
        try:
            inspect.signature(policies).bind(None)
        except TypeError:
            raise TypeError(
                f"policies {policies!r:.80} is a callable that cannot take one scenario: a "
                "factory takes a scenario and returns a role map; to play one policy for "
                "every role pass dict.fromkeys(AgentRole, policy)"
            ) from None
        except ValueError:  # no signature to read (some builtins): find out when called
            pass
    else:
        role_map(policies)
    if not callable(turn_timeout):
        actors.timeouts_by_role(timeouts_of(turn_timeout, None), AgentRole)  # type: ignore[arg-type]
    return listed


_RESERVED_FIELDS = frozenset(
    {"episode_id", "failure_type", "difficulty", "seed", "episodes", "concurrency",
     "turn_timeout", "event", "level", "run_id", "timestamp"}
)  # fmt: skip

FIELDS_DOC = """``fields``: a mapping of a few str keys to scalar values naming the
batch (e.g. ``{"policy": "oracle"}``): added to ``run_started`` and to each
episode's ``episode_started`` event and ``episode`` span, and the values of
the metric labels configured with ``actors.configure_metrics(labels=...)``."""


def check_fields(fields: Mapping[str, Any] | None) -> dict[str, Any]:
    if fields is None:
        return {}
    if not isinstance(fields, Mapping):
        raise TypeError(f"fields must be a mapping of names to values, got {fields!r:.80}")
    for key, value in fields.items():
        if not isinstance(key, str) or key in _RESERVED_FIELDS:
            raise ValueError(
                f"fields: {key!r:.80} is not a field name a batch may set (a str other than "
                f"{', '.join(sorted(_RESERVED_FIELDS))})"
            )
        if value is not None and not isinstance(value, str | bool | int | float):
            raise TypeError(
                f"fields: {key!r} must be a str, number, bool or None, got {value!r:.80}"
            )
    return dict(fields)

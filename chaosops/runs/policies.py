"""Policies per scenario, and the LLM policy's endpoint check and construction."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chaosops.agents.judged import judged
from chaosops.agents.policies import SCRIPTED, scripted_policy
from chaosops.env.models import AgentRole

from .errors import Named, RunError
from .kinds import KINDS, kind_of, ray_refusal
from .spec import RunSpec
from .values import POLICIES


def policy_factory(name: str, llm: Any = None) -> Callable[[Any], Mapping[Any, Any]]:
    """Role maps per scenario (docs/world.md, "Evaluation figures"): one policy
    object for the four roles.

    random and heuristic are seeded with the scenario's seed (a sample's own
    seed under ``--samples``: :func:`chaosops.agents.policies.policy_seed`), oracle gets
    its failure type; any other name is an LLM's, played by ``llm`` (an
    :class:`LLMPolicy`, shared so that its in-flight limit holds across the
    batch; with ``history`` each episode gets its own memory of it).
    """

    roles = tuple(AgentRole)
    if name not in SCRIPTED:
        if llm is None:
            raise ValueError(f"policy_factory({name!r}) needs the LLM policy")
        return lambda scenario: dict.fromkeys(roles, llm.for_episode())

    def factory(scenario: Any) -> Mapping[Any, Any]:
        return dict.fromkeys(roles, scripted_policy(name, scenario))

    return factory


def role_map_factory(
    policy_by_role: Mapping[str, str], llms: Mapping[str, Any], planned: Sequence[Any]
) -> Callable[[Any], Mapping[Any, Any]]:
    """Role maps per scenario with each role's own policy (``--role-policy`` over
    ``--policy``); ``llms`` holds the LLM policies by name. A ``module:attribute``
    policy is imported and checked here, on the first planned scenario, before
    anything runs (:class:`RunError`, exit 2)."""

    factories: dict[str, Callable[[Any], Mapping[Any, Any]]] = {}
    for role, name in policy_by_role.items():
        if name not in factories:
            factories[name] = (
                _user_factory(name, role, planned)
                if ":" in name
                else policy_factory(name, llms.get(name))
            )
    if len(factories) == 1:
        return next(iter(factories.values()))

    def factory(scenario: Any) -> Mapping[Any, Any]:
        maps = {name: make(scenario) for name, make in factories.items()}
        chosen = {}
        for role, name in policy_by_role.items():  # a role map may be keyed by name
            policy = maps[name].get(AgentRole(role), maps[name].get(role))
            if policy is not None:  # a role its factory leaves out plays noop
                chosen[AgentRole(role)] = policy
        return chosen

    return factory


def _user_factory(spec: str, role: str, planned: Sequence[Any]) -> Callable[[Any], Any]:
    """``module:attribute`` as a factory: a policy ``(observation, role)`` plays
    every role it is given; a factory ``scenario -> role map`` is called as it is."""

    where = Named("role_policy", f"{role}={spec}")
    module_name, _, attribute = spec.partition(":")
    if os.getcwd() not in sys.path:  # the user's own modules, as `python -m` finds them
        sys.path.insert(0, os.getcwd())
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # ImportError, AttributeError, an error in the module itself
        raise RunError(where, f": cannot import it ({type(exc).__name__}: {exc})") from None
    try:
        required = [
            p
            for p in inspect.signature(target).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):  # not callable, or no signature to read
        required = None
    if required is None or len(required) not in (1, 2):
        raise RunError(
            where,
            f": {spec} is not a policy (observation, role) -> action nor a factory "
            "scenario -> role map",
        )
    if len(required) == 2:  # every move judged, as a model's answers are
        shared = dict.fromkeys(AgentRole, judged(target))
        return lambda scenario: shared
    if planned and not isinstance(target(planned[0].scenario), Mapping):
        raise RunError(where, f": the factory {spec} returned no mapping role -> policy")
    return lambda scenario: {role: judged(p) for role, p in target(scenario).items()}


def prepare_models(spec: RunSpec) -> tuple[dict[str, Any], RunSpec]:
    """The model policies some role of ``spec`` plays, by policy name, each
    made ready by its kind (an LLM's endpoint checked and its answer format
    settled, a local model loaded), and the spec with what they settled, for
    its records."""
    policies: dict[str, Any] = {}
    for kind in KINDS:
        models = spec.in_play(kind.settings)
        policies |= kind.prepare(models, spec.config_file, spec.deadlines.longest)
    settled = {name: policy.settings for name, policy in policies.items()}
    return policies, spec.with_models(settled)


@dataclass(frozen=True)
class PolicyRecipe:
    """What a Ray worker builds the role maps from: each role's policy name and
    the models' settings (each kind's share of one of the workers); the
    user's modules are found from ``cwd`` as here."""

    policy_by_role: tuple[tuple[str, str], ...]
    models: tuple[tuple[str, Any], ...]
    cwd: str

    @classmethod
    def of(cls, policy_by_role: Mapping[str, str], models: Mapping[str, Any],
           workers: int) -> PolicyRecipe:  # fmt: skip
        shared = tuple((name, kind_of(s).share(s, workers)) for name, s in models.items())
        return cls(tuple(policy_by_role.items()), shared, os.getcwd())

    def __call__(self) -> _WorkerPolicies:
        if self.cwd not in sys.path:
            sys.path.insert(0, self.cwd)
        models = {name: _built(name, settings) for name, settings in self.models}
        return _WorkerPolicies(role_map_factory(dict(self.policy_by_role), models, ()), models)


def _built(name: str, settings: Any) -> Any:
    if (why := ray_refusal(name, settings)) is not None:  # the driver refuses it first
        raise RunError(why)
    return kind_of(settings).build(settings)  # type: ignore[misc]  # not None: no refusal


class _WorkerPolicies:
    """A worker's role maps per scenario, and its model policies to close."""

    def __init__(self, factory: Callable[[Any], Mapping[Any, Any]], models: Mapping[str, Any]):
        self.factory = factory
        self.models = models

    def __call__(self, scenario: Any) -> Mapping[Any, Any]:
        return self.factory(scenario)

    async def aclose(self) -> None:
        for model in self.models.values():
            await model.aclose()


def known_policy(name: str, llms: Collection[str]) -> bool:
    """A scripted policy, ``llm``, ``hf``, a named model, or ``module:attribute``."""
    return name in POLICIES or name in llms or ":" in name


def unknown_policy(name: str, llms: Collection[str]) -> str:
    named = f", a model of the run file ({', '.join(llms)})" if llms else ""
    return f"unknown policy {name!r}; choose from {', '.join(POLICIES)}{named}, or module:attribute"

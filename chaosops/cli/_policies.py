"""Policies per scenario, and the LLM policy's endpoint check and construction."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._errors import CLIError, one_line


class _Secret:
    """Scrubs the API key out of any text we print."""

    def __init__(self, value: str | None) -> None:
        self.value = value or None

    def scrub(self, text: str) -> str:
        return text.replace(self.value, "***") if self.value else text


def _api_key(args: argparse.Namespace) -> str | None:
    return args.llm_api_key or os.environ.get("OPENAI_API_KEY") or None


def _build_llm(args: argparse.Namespace) -> Any:
    from chaosops.agents.llm import LLMPolicy

    return LLMPolicy(
        base_url=args.llm_base_url,
        model=args.llm_model,
        api_key=_api_key(args),
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        max_in_flight=args.llm_max_in_flight,
        # --llm-top-logprobs implies --llm-logprobs (servers reject it alone)
        logprobs=args.llm_logprobs or args.llm_top_logprobs is not None,
        top_logprobs=args.llm_top_logprobs,
        extra_body=args.llm_extra_body,
    )


async def _check_llm(args: argparse.Namespace) -> None:
    from chaosops.agents.llm import LLMEndpointError, check_endpoint

    secret = _Secret(_api_key(args))
    try:
        await check_endpoint(
            base_url=args.llm_base_url, model=args.llm_model, api_key=_api_key(args)
        )
    except LLMEndpointError as exc:
        raise CLIError(secret.scrub(one_line(exc)), code=1) from None


def policy_factory(name: str, llm: Any = None) -> Callable[[Any], Mapping[Any, Any]]:
    """Role maps per scenario (SPEC section 13): one policy object for the four roles.

    random and heuristic are seeded with the scenario's seed, oracle gets its
    failure type; ``llm`` is one shared :class:`LLMPolicy` (its in-flight limit
    then holds across the whole batch).
    """
    from chaosops.agents.policies import heuristic_policy, oracle_policy, random_policy
    from chaosops.env.models import AgentRole

    roles = tuple(AgentRole)
    if name == "llm":
        if llm is None:
            raise ValueError("policy_factory('llm') needs the LLM policy")
        shared = {role: llm for role in roles}
        return lambda scenario: shared

    def factory(scenario: Any) -> Mapping[Any, Any]:
        if name == "random":
            policy = random_policy(seed=scenario.seed)
        elif name == "heuristic":
            policy = heuristic_policy(seed=scenario.seed)
        elif name == "oracle":
            policy = oracle_policy(scenario.failure_type)
        else:
            raise ValueError(f"unknown policy {name!r}")
        return {role: policy for role in roles}

    return factory


def prepare_llm(args: argparse.Namespace, policies: Iterable[str]) -> Any:
    """The shared LLM policy if ``policies`` name ``llm`` (endpoint and model
    checked first, :class:`CLIError` exit 1 on failure); otherwise ``None``."""
    if "llm" not in policies:
        return None
    import anyio

    anyio.run(_check_llm, args)
    return _build_llm(args)

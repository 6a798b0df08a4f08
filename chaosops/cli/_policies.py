"""Policies per scenario, and the LLM policy's endpoint check and construction."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from chaosops.agents.llm.settings import LLMSettings

from ._errors import CLIError, one_line


async def _check_llm(settings: LLMSettings) -> None:
    from chaosops.agents.llm import LLMEndpointError, check_endpoint

    try:
        await check_endpoint(base_url=settings.base_url, model=settings.model, api_key=settings.key)
    except LLMEndpointError as exc:
        text = one_line(exc)
        if settings.key:  # the API key is never printed
            text = text.replace(settings.key, "***")
        raise CLIError(text, code=1) from None


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


def _check_url(url: str | None) -> None:
    """Refuse (exit 2) a base URL that is no http(s) URL with a host, before any request."""
    from urllib.parse import urlsplit

    from chaosops._urls import shown_url

    try:
        parts = urlsplit(url or "")
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if url is not None and not valid:
        raise CLIError(
            f"--llm-base-url {shown_url(url)!r} is not an http(s) URL with a host; "
            "expected e.g. http://127.0.0.1:8000/v1"
        )


def prepare_llm(settings: LLMSettings, policies: Iterable[str]) -> Any:
    """The shared LLM policy if ``policies`` name ``llm`` (endpoint and model
    checked first, :class:`CLIError` exit 1 on failure); otherwise ``None``."""
    if "llm" not in policies:
        return None
    _check_url(settings.base_url)
    import anyio

    from chaosops.agents.llm import LLMPolicy

    anyio.run(_check_llm, settings)
    return LLMPolicy.from_settings(settings)

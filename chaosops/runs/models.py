"""Model policies made ready before any episode: each LLM's endpoint checked
and its answer format settled with the server, each local checkpoint loaded.
A failure is one :class:`RunError` line naming the setting or the run file's key."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import anyio

from chaosops._urls import http_url_with_host, shown_url
from chaosops.agents.hf import HFModelError, HFPolicy, HFSettings
from chaosops.agents.llm.errors import AnswerRefused, LLMEndpointError, LLMRequestError
from chaosops.agents.llm.settings import LLMSettings

from .errors import Message, Named, RunError, note, one_line

Where = str | Named | Message  # the setting or run-file key a value came from


async def _check_llm(settings: LLMSettings) -> None:
    from chaosops.agents.llm.http import check_endpoint  # aiohttp: loaded when an LLM plays

    try:
        await check_endpoint(base_url=settings.endpoint, model=settings.model, api_key=settings.key)
    except LLMEndpointError as exc:
        raise RunError(_scrubbed(exc, settings), code=1) from None


async def _negotiate(policy: Any, where: Where, seconds: float | None) -> None:
    """Settle the policy's answer format with its endpoint, saying which in one
    line; a format named outright that the server refuses is exit 2."""

    settings = policy.settings
    try:
        negotiation = await policy.negotiate(seconds)
    except AnswerRefused as exc:
        advice = "use auto, which picks a format the server accepts"
        raise RunError(where, f" {settings.answer}: {_scrubbed(exc, settings)}; {advice}") from None
    except LLMRequestError as exc:
        raise RunError(_scrubbed(exc, settings), code=1) from None
    note(f"answer format: {negotiation.line(settings.model, settings.endpoint)}")


def _scrubbed(exc: BaseException, settings: LLMSettings) -> str:
    text = one_line(exc)
    if settings.key:  # the API key is never printed
        text = text.replace(settings.key, "***")
    return text


def _check_url(url: str | None, where: Where) -> None:
    """Refuse (exit 2) a base URL that is no http(s) URL with a host, before any request."""

    if url is not None and not http_url_with_host(url):
        raise RunError(
            where,
            f" {shown_url(url)!r} is not an http(s) URL with a host; "
            "expected e.g. http://127.0.0.1:8000/v1",
        )


def prepare_llms(
    llms: Mapping[str, LLMSettings], run_file: str | None = None, probe_s: float | None = None
) -> dict[str, Any]:
    """An LLM policy per name of ``llms`` (the LLMs some role plays), each
    endpoint and model checked first (:class:`RunError`, exit 1 on failure),
    then its answer format settled with the server, each probe given
    ``probe_s`` at most, as long as a turn (each policy's settings then say
    which, in ``negotiated``)."""
    if not llms:
        return {}

    for name, settings in llms.items():
        where: Where = _key(name, "llm", "base_url", run_file)
        if name == "llm" and settings.base_url == os.environ.get("OPENAI_BASE_URL"):
            where = Message("$OPENAI_BASE_URL (the default of ", Named("llm_base_url"), ")")
        _check_url(settings.base_url, where)
    checked = set()
    for settings in llms.values():
        if (settings.endpoint, settings.model) not in checked:
            anyio.run(_check_llm, settings)
            checked.add((settings.endpoint, settings.model))
    from chaosops.agents.llm.policy import LLMPolicy  # aiohttp: loaded when an LLM plays

    policies = {}
    for name, settings in llms.items():
        where = _key(name, "llm", "answer", run_file)
        policy = LLMPolicy.from_settings(dataclasses.replace(settings, negotiated=None))
        anyio.run(_negotiate_and_close, policy, where, probe_s)
        policies[name] = policy
    return policies


async def _negotiate_and_close(policy: Any, where: Where, seconds: float | None) -> None:
    # the probes' HTTP session belongs to this event loop, not the run's
    try:
        await _negotiate(policy, where, seconds)
    finally:
        await policy.aclose()


def prepare_hf(
    models: Mapping[str, HFSettings], run_file: str | None = None, probe_s: float | None = None
) -> dict[str, Any]:
    """A local model's policy per name of ``models`` (the ones some role plays),
    each loaded before any episode starts: a device this machine lacks, a path
    that holds no model, a model without a chat template or a missing ``hf``
    extra is a :class:`RunError` (exit 2) naming the value. (``probe_s`` is
    the LLMs': a checkpoint has no endpoint to probe.)"""
    policies = {}
    for name, settings in models.items():
        where = _key(name, "hf", "model", run_file)
        try:
            policies[name] = HFPolicy.load(settings)
        except HFModelError as exc:
            raise RunError(where, f" {exc}") from None
        except ImportError as exc:
            raise RunError(where, f" {settings.model}: {exc}") from None
    return policies


def _key(name: str, kind: str, field: str, run_file: str | None) -> Where:
    """Where a model's setting came from: the kind's own model's setting
    (``llm_base_url``), or a run file's ``[KIND.NAME]`` key."""
    return Named(f"{kind}_{field}") if name == kind else f"{run_file}: {kind}.{name}.{field}"

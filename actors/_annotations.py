"""Which of a policy's annotations go into the ``turn`` log line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LOGGED_ANNOTATIONS: frozenset[str] = frozenset(
    {
        "usage",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "attempts",
        "parse_error",
        "model",
        "finish_reason",
        "policy_latency_ms",
        "llm_latency_ms",
    }
)
"""Annotations copied into the ``turn`` log event (``TurnRecord.info`` keeps them all).

The rule: a key of this allow-list whose value is small: None, a bool, a
number, a string (cut to :data:`MAX_LOGGED_TEXT` characters), or a flat
mapping of at most 16 such numbers (token usage). The annotation ``latency_ms``
(the policy's own latency) is logged as ``policy_latency_ms``, since
``latency_ms`` in a ``turn`` event is the turn's. Everything else (an LLM
prompt, completion, token ids, logprobs) belongs to trajectories, not to a log
line per turn.
"""

MAX_LOGGED_TEXT = 200

_SKIP = object()


def _small(value: Any) -> Any:
    """``value`` if fit for a log line (see :data:`LOGGED_ANNOTATIONS`), else ``_SKIP``."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= MAX_LOGGED_TEXT else value[:MAX_LOGGED_TEXT] + "..."
    if (
        isinstance(value, Mapping)
        and len(value) <= 16
        and all(v is None or isinstance(v, bool | int | float) for v in value.values())
    ):
        return dict(value)
    return _SKIP


def turn_fields(
    described: Mapping[str, Any] | None, info: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``turn`` event's fields beside the runtime's own: what
    ``describe_turn`` returned (a dict is taken over: it is a new one each
    call), then the small annotations of ``info`` (see
    :data:`LOGGED_ANNOTATIONS`) under names ``described`` does not use."""
    fields = described if type(described) is dict else dict(described or {})
    for key, value in (info or {}).items():
        if key == "latency_ms":
            key = "policy_latency_ms"
        elif key not in LOGGED_ANNOTATIONS:
            continue
        value = _small(value)
        if value is not _SKIP:
            fields.setdefault(key, value)
    return fields

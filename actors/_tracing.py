"""OpenTelemetry traces: a span per episode, a child span per turn.

Off until :func:`configure_tracing` is called (it needs ``opentelemetry-api``;
an SDK and an exporter, e.g. OTLP, come from the application or the
``otel`` extra). Then each episode is an ``episode`` span (a trace of its
own unless a span is current where the episode runs: the caller's span is its
parent) and each applied step a ``turn`` span under it, from sending the
observation to closing the turn. The policy call runs with its turn's span
current, so what the policy traces itself (an instrumented HTTP client, an
LLM SDK, a span of its own) lands under the turn it played. Off, the runtime
pays one attribute read per episode and a ``None`` test per turn.

Attributes, all of them also in the structured log:

- ``episode``: ``episode.id``, ``run.id`` (the log's, when logging is
  configured), ``episode.<field>`` for each ``log_fields``
  and ``describe_finish`` field (chaosops: failure type, difficulty, seed,
  resolved, cumulative reward...), ``episode.status``, ``episode.timeouts``,
  ``episode.errors``; status ERROR (with the error) when
  the environment or a callback raised; an event ``late_reply_dropped`` per
  reply that came for a closed turn.
- ``turn``: ``turn.index``, ``turn.role``, ``turn.<field>`` for each
  ``describe_turn`` field (chaosops: step, action type, target, args),
  ``turn.reward``, ``turn.done``, ``turn.timed_out``, ``turn.error``,
  ``turn.latency_ms``; the GenAI conventions' ``gen_ai.usage.input_tokens``
  and ``gen_ai.usage.output_tokens`` from a ``usage`` annotation,
  ``turn.parse_error`` from a ``parse_error`` one; status
  ERROR with the error when the policy raised or returned no action, or when
  the environment or a callback raised during the turn; ``turn.abandoned``
  (no error status) on a turn its episode's cancellation cut short.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from . import _logging
from ._json import dumps

__all__ = ["configure_tracing", "disable_tracing", "tracing_enabled"]


class _State:
    __slots__ = ("attach", "current_span", "detach", "error", "in_context", "tracer")

    def __init__(self) -> None:
        self.tracer: Any = None  # None: tracing off
        self.attach: Any = None  # opentelemetry.context.attach
        self.detach: Any = None
        self.in_context: Any = None  # opentelemetry.trace.set_span_in_context
        self.error: Any = None  # opentelemetry.trace.StatusCode.ERROR
        self.current_span: Any = None  # opentelemetry.trace.get_current_span


STATE = _State()


def configure_tracing(tracer_provider: Any = None, *, name: str = "actors") -> None:
    """Trace every episode and turn with OpenTelemetry (see the module's doc).

    ``tracer_provider``: where the spans go (default: the global provider
    set with ``opentelemetry.trace.set_tracer_provider``; without an SDK the
    spans cost little and go nowhere). ``name``: the instrumentation scope.
    Raises ImportError with what to install when ``opentelemetry-api`` is
    missing. Replaces a previous configuration; :func:`disable_tracing` ends it.
    """
    try:
        # an extra, loaded once tracing is on
        from opentelemetry import context, trace
    except ImportError:
        raise ImportError(
            "tracing needs the OpenTelemetry API: pip install 'chaosops[otel]' "
            "(or opentelemetry-api with an SDK and an exporter of your choice)"
        ) from None
    if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
        raise TypeError(
            f"tracer_provider must be an OpenTelemetry TracerProvider (or None for the "
            f"global one), got {tracer_provider!r:.80}"
        )
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r:.80}")
    tracer = trace.get_tracer(name, tracer_provider=tracer_provider)
    STATE.attach, STATE.detach = context.attach, context.detach
    STATE.in_context = trace.set_span_in_context
    STATE.error = trace.StatusCode.ERROR
    STATE.current_span = trace.get_current_span
    STATE.tracer = tracer


def disable_tracing() -> None:
    """Stop tracing (spans already ended were handed to the provider)."""
    STATE.tracer = None


def tracing_enabled() -> bool:
    """True while episodes and turns are traced."""
    return STATE.tracer is not None


def attribute(value: Any) -> Any:
    """``value`` as an OpenTelemetry attribute value: str, bool, int, float kept,
    an enum as its value, None as None (the attribute is left out), anything
    else as JSON text, rendered as in the log."""
    if isinstance(value, enum.Enum):  # before str and int: StrEnum, IntEnum
        value = value.value
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return dumps(value).decode()


def add_fields(attributes: dict[str, Any], prefix: str, fields: Mapping[str, Any] | None) -> None:
    """``prefix.key`` attributes for each field that has a value."""
    if not fields:
        return
    for key, value in fields.items():
        value = attribute(value)
        if value is not None:
            attributes[f"{prefix}.{key}"] = value


def add_usage(attributes: dict[str, Any], info: Mapping[str, Any] | None) -> None:
    """The GenAI conventions' token counts from a ``usage`` annotation."""
    usage = info.get("usage") if info else None
    if not isinstance(usage, Mapping):
        return
    for key, name in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        count = usage.get(key)
        if isinstance(count, int) and not isinstance(count, bool):
            attributes[f"gen_ai.usage.{name}"] = count


def start_episode(tracer: Any, episode_id: str, fields: Mapping[str, Any] | None) -> Any:
    """The episode's span, made current; returns ``(span, token)``."""
    attributes = {"episode.id": episode_id}
    run_id = _logging.STATE.run_id  # the log's, when logging is configured
    if run_id is not None:
        attributes["run.id"] = run_id
    add_fields(attributes, "episode", fields)
    span = tracer.start_span("episode", attributes=attributes)
    return span, STATE.attach(STATE.in_context(span))


def end_episode(span: Any, token: Any, trace: Any, described: Mapping[str, Any] | None) -> None:
    """End the episode's span with how it ended (``trace``: an EpisodeTrace)."""
    try:
        attributes: dict[str, Any] = {}
        add_fields(attributes, "episode", described)
        attributes["episode.status"] = trace.status
        attributes["episode.timeouts"] = trace.timeouts
        attributes["episode.errors"] = trace.errors
        span.set_attributes(attributes)
        if trace.error is not None:
            span.set_status(STATE.error, trace.error)
        span.end()
    finally:
        STATE.detach(token)


def late_reply(turn: int, role: Any) -> None:
    """An event ``late_reply_dropped`` on the episode's span (current where this runs)."""
    STATE.current_span().add_event(
        "late_reply_dropped", {"turn.index": turn, "turn.role": attribute(role)}
    )


def end_turn(span: Any, record: Any, described: Mapping[str, Any] | None, done: bool) -> None:
    """End a turn's span with what was applied (``record``: a TurnRecord)."""
    attributes: dict[str, Any] = {}
    add_fields(attributes, "turn", described)
    reward = record.next_observation.reward
    if reward is not None:
        attributes["turn.reward"] = attribute(reward)
    attributes["turn.done"] = bool(done)
    attributes["turn.timed_out"] = record.timed_out
    attributes["turn.latency_ms"] = round(record.latency_s * 1000, 3)
    add_usage(attributes, record.info)
    parse_error = record.info.get("parse_error") if record.info else None
    if parse_error is not None:  # an answer that was no action: noop played
        attributes["turn.parse_error"] = str(parse_error)[:200]
    if record.error is not None:
        attributes["turn.error"] = record.error
        span.set_status(STATE.error, record.error)
    span.set_attributes(attributes)
    span.end()


def end_unfinished_turn(span: Any, error: str | None) -> None:
    """End a turn's span that applied nothing: status ERROR with ``error`` when
    the environment or a callback raised; for a turn abandoned because its
    episode was cancelled (a caller's Ctrl-C, say) no error status, and
    ``turn.abandoned``."""
    if error is None:
        span.set_attribute("turn.abandoned", True)
    else:
        span.set_status(STATE.error, error)
    span.end()

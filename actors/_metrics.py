"""Prometheus metrics for the runtime: counters a scraper or a dashboard watches.

Off until :func:`configure_metrics` is called; then every episode, turn and
late reply of every batch is counted in a ``prometheus_client`` registry
(the process's default one unless another is given), optionally served on
``http://HOST:PORT/metrics`` from a background thread. Off, the runtime pays
one attribute read per episode and a ``None`` test per turn.

The metrics (``NS`` is the namespace, ``actors`` by default):

- ``NS_episodes_planned_total``: episodes handed to batches (progress =
  finished / planned);
- ``NS_episodes_started_total``, ``NS_episodes_in_flight``;
- ``NS_episodes_finished_total{status}``: ``ok``, ``failed`` (the environment
  raised), ``error`` (a callback of the caller's raised), ``cancelled``;
- ``NS_turns_total{role, outcome}``: applied steps; ``outcome`` is ``ok``,
  ``timed_out``, ``error`` (the policy raised or returned no action) or
  ``no_policy`` (a role without a policy played its fallback);
- ``NS_turn_latency_seconds{role}``: a histogram of turn durations (from
  sending the observation to closing the turn), for roles with a policy;
- ``NS_late_replies_dropped_total{role}``: replies that came for a closed turn;
- ``NS_policy_tokens_total{role, type}``: ``input`` (prompt) and ``output``
  (completion) tokens, from a turn's ``usage`` annotation (``{"prompt_tokens": n,
  "completion_tokens": m}``, as OpenAI-compatible servers report them);
- ``NS_parse_errors_total{role}``: turns annotated ``parse_error`` (an LLM
  answer that was no action).

Labels named in ``configure_metrics(labels=...)`` come first on each of these
(e.g. ``policy``), their values from the episode's ``log_fields``. Every
outcome and status of a role appears at 0 from its first turn, so a
dashboard's ``timed_out`` series exists before the first timeout.

An application adds its own metrics to the same registry and namespace with
:meth:`Meter.counter` and its siblings (chaosops counts resolved episodes).
"""

from __future__ import annotations

import enum
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when metrics are configured: ~50 ms off `import actors`
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary

__all__ = ["LATENCY_BUCKETS", "EpisodeMeter", "Meter", "configure_metrics", "current_meter"]

LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
    0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, float("inf"),
)  # fmt: skip
"""Upper bounds of ``turn_latency_seconds``: scripted policies (sub-millisecond)
to slow LLM calls (a minute), finest where LLM turns fall (50 ms to 3 s)."""

OUTCOMES = ("ok", "timed_out", "error", "no_policy")
STATUSES = ("ok", "failed", "error", "cancelled")
_RESERVED_LABELS = frozenset({"role", "outcome", "status", "type", "le", "quantile"})

_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _metric_class(kind: str) -> type[Any]:
    # slow to import: loaded once metrics are on
    import prometheus_client

    return getattr(prometheus_client, kind.capitalize())


def _label(value: Any) -> str:
    """A label value: an enum's value, anything else as ``str``."""
    if isinstance(value, enum.Enum):
        value = value.value
    return value if isinstance(value, str) else str(value)


def _child(metric: Any, values: tuple[str, ...]) -> Any:
    # The series of ``values``; a metric without labels is its own series.
    return metric.labels(*values) if values else metric


class RunningMean:
    """A gauge set to the mean of the values observed so far, per label values."""

    def __init__(self, gauge: Any) -> None:
        self.gauge = gauge
        self._totals: dict[tuple[str, ...], list[float]] = {}  # label values: [sum, count]

    def observe(self, labels: Sequence[str], value: float) -> None:
        total = self._totals.setdefault(tuple(labels), [0.0, 0.0])
        total[0] += value
        total[1] += 1
        self.gauge.labels(*labels).set(total[0] / total[1])


class Meter:
    """The runtime's metrics in one registry under one namespace.

    Made by :func:`configure_metrics`. ``url`` is where they are served
    (None when not served). :meth:`close` stops serving, removes the metrics
    from the registry and stops the counting; ``with configure_metrics(...)
    as meter:`` does it on leaving the block.
    """

    def __init__(
        self, registry: CollectorRegistry, namespace: str, labels: Sequence[str] = ()
    ) -> None:
        self.registry = registry
        self.namespace = namespace
        # Label names every runtime metric carries first; an episode's values
        # come from its log_fields (see episode()).
        self.labels: tuple[str, ...] = tuple(labels)
        self.url: str | None = None
        self._metrics: dict[str, Any] = {}
        self._labelnames: dict[str, tuple[str, ...]] = {}  # of each metric made here
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._turn_children: dict[tuple[Any, ...], Any] = {}
        self._latency_children: dict[tuple[Any, ...], Any] = {}
        self._finished_ready: dict[tuple[str, ...], bool] = {}
        self._means: dict[str, RunningMean] = {}
        extra = self.labels
        try:
            self.episodes_planned = self.counter(
                "episodes_planned", "Episodes handed to batches.", extra
            )
            self.episodes_started = self.counter("episodes_started", "Episodes started.", extra)
            self.episodes_in_flight = self.gauge(
                "episodes_in_flight", "Episodes started and not finished.", extra
            )
            self.episodes_finished = self.counter(
                "episodes_finished",
                "Episodes finished, by status: ok, failed (the environment raised), "
                "error (a callback raised), cancelled.",
                (*extra, "status"),
            )
            self.turns = self.counter(
                "turns",
                "Applied steps, by role and outcome: ok, timed_out, error, no_policy.",
                (*extra, "role", "outcome"),
            )
            self.turn_latency = self.histogram(
                "turn_latency_seconds",
                "Turn duration, from sending the observation to closing the turn.",
                (*extra, "role"),
                buckets=LATENCY_BUCKETS,
            )
            self.late_replies = self.counter(
                "late_replies_dropped", "Replies that came for a closed turn.", (*extra, "role")
            )
            self.tokens = self.counter(
                "policy_tokens",
                "Tokens a policy reported in its usage annotation, by type: input (prompt), "
                "output (completion).",
                (*extra, "role", "type"),
            )
            self.parse_errors = self.counter(
                "parse_errors",
                "Turns whose answer could not be parsed into an action.",
                (*extra, "role"),
            )
        except BaseException:
            self._unregister()
            raise

    # -- the application's own metrics -------------------------------------

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        """The counter ``NS_<name>_total`` of this registry, made on first use."""
        return self._get("counter", name, documentation, labelnames)

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Gauge:
        """The gauge ``NS_<name>``, made on first use."""
        return self._get("gauge", name, documentation, labelnames)

    def histogram(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> Histogram:
        """The histogram ``NS_<name>``, made on first use with ``buckets``."""
        return self._get("histogram", name, documentation, labelnames, buckets=buckets)

    def summary(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Summary:
        """The summary ``NS_<name>`` (a count and a sum: means), made on first use."""
        return self._get("summary", name, documentation, labelnames)

    def mean(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> RunningMean:
        """The gauge ``NS_<name>`` of the running mean of what is observed, per
        label values (a mean that goes negative, which a counter cannot follow)."""
        gauge = self._get("gauge", name, documentation, labelnames)
        return self._means.setdefault(name, RunningMean(gauge))

    def _get(
        self, kind: str, name: str, documentation: str, labelnames: Sequence[str], **kwargs: Any
    ) -> Any:
        if self._closed:
            raise RuntimeError(f"this meter is closed: {name!r} would never be served or removed")
        labelnames = tuple(labelnames)
        metric = self._metrics.get(name)
        cls = _metric_class(kind)
        if metric is None:
            metric = cls(
                name,
                documentation,
                labelnames,
                namespace=self.namespace,
                registry=self.registry,
                **kwargs,
            )
            self._metrics[name] = metric
            self._labelnames[name] = labelnames
        elif type(metric) is not cls or self._labelnames[name] != labelnames:
            raise ValueError(
                f"metric {name!r} already exists as a {type(metric).__name__.lower()} "
                f"with labels {self._labelnames[name]}, not a {kind} with labels {labelnames}"
            )
        return metric

    # -- what the runtime counts (hot paths: no work beyond the counts) -------

    def values(self, fields: Mapping[str, Any] | None) -> tuple[str, ...]:
        """The values of :attr:`labels` in ``fields`` (an episode's or a batch's
        log_fields; a missing one is empty)."""
        if not self.labels:
            return ()
        fields = fields or {}
        return tuple(_label(fields.get(name, "")) for name in self.labels)

    def planned(self, count: int, fields: Mapping[str, Any] | None) -> None:
        _child(self.episodes_planned, self.values(fields)).inc(count)

    def episode(self, fields: Mapping[str, Any] | None) -> EpisodeMeter:
        """Count an episode that starts now; what it counts next goes through
        the returned :class:`EpisodeMeter`."""
        values = self.values(fields)
        _child(self.episodes_started, values).inc()
        _child(self.episodes_in_flight, values).inc()
        return EpisodeMeter(self, values)

    def _turn_child(self, values: tuple[str, ...], role: Any, outcome: str) -> Any:
        # Every outcome of a role appears (at 0) once the role played a turn:
        # a dashboard's timed_out series exists before the first timeout.
        label = _label(role)
        for other in OUTCOMES:
            self._turn_children[(values, role, other)] = self.turns.labels(*values, label, other)
        self.parse_errors.labels(*values, label)
        self.late_replies.labels(*values, label)
        return self._turn_children[(values, role, outcome)]

    # -- serving and closing ------------------------------------------------

    def _serve(self, port: int, host: str) -> None:
        # slow to import: loaded once metrics are on
        from prometheus_client.exposition import start_http_server

        server, thread = start_http_server(port, addr=host, registry=self.registry)
        self._server, self._thread = server, thread
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{server.server_port}/metrics"

    @property
    def port(self) -> int | None:
        """The port the metrics are served on (None when not served)."""
        return None if self._server is None else self._server.server_port

    def close(self) -> None:
        """Stop serving, take the metrics out of the registry, stop counting."""
        if self._closed:
            return
        self._closed = True
        if STATE.meter is self:
            STATE.meter = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
        self._unregister()

    def _unregister(self) -> None:
        for metric in self._metrics.values():
            try:
                self.registry.unregister(metric)
            except KeyError:  # already out
                pass
        self._metrics.clear()

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f", url={self.url!r}" if self.url else ""
        return f"Meter(namespace={self.namespace!r}{where}{', closed' if self._closed else ''})"


class EpisodeMeter:
    """What one episode counts, with its label values (from :meth:`Meter.episode`)."""

    __slots__ = ("meter", "values")

    def __init__(self, meter: Meter, values: tuple[str, ...]) -> None:
        self.meter = meter
        self.values = values

    def turn(
        self,
        role: Any,
        outcome: str,
        latency_s: float | None,
        info: Mapping[str, Any] | None,
    ) -> None:
        """Count one applied step (``latency_s`` None: no policy was asked)."""
        meter, values = self.meter, self.values
        child = meter._turn_children.get((values, role, outcome))
        if child is None:
            child = meter._turn_child(values, role, outcome)
        child.inc()
        if latency_s is not None:
            latency = meter._latency_children.get((values, role))
            if latency is None:
                latency = meter._latency_children[(values, role)] = meter.turn_latency.labels(
                    *values, _label(role)
                )
            latency.observe(latency_s)
        if info:
            usage = info.get("usage")
            if isinstance(usage, Mapping):
                for name, kind in (("prompt_tokens", "input"), ("completion_tokens", "output")):
                    count = usage.get(name)
                    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                        meter.tokens.labels(*values, _label(role), kind).inc(count)
            if info.get("parse_error") is not None:
                meter.parse_errors.labels(*values, _label(role)).inc()

    def late_reply(self, role: Any) -> None:
        self.meter.late_replies.labels(*self.values, _label(role)).inc()

    def finished(self, status: str) -> None:
        meter, values = self.meter, self.values
        if not meter._finished_ready.get(values):
            for other in STATUSES:  # every status appears, at 0 until it happens
                meter.episodes_finished.labels(*values, other)
            meter._finished_ready[values] = True
        meter.episodes_finished.labels(*values, status).inc()
        _child(meter.episodes_in_flight, values).dec()


class _State:
    __slots__ = ("meter",)

    def __init__(self) -> None:
        self.meter: Meter | None = None


STATE = _State()


def current_meter() -> Meter | None:
    """The :class:`Meter` counting now, or None when metrics are off."""
    return STATE.meter


def configure_metrics(
    port: int | None = None,
    *,
    host: str = "127.0.0.1",
    namespace: str = "actors",
    registry: CollectorRegistry | None = None,
    labels: Sequence[str] = (),
) -> Meter:
    """Count the runtime's episodes, turns and late replies in Prometheus metrics.

    ``registry``: where they go (default: ``prometheus_client``'s process-wide
    registry, which an application that already serves one exposes with its
    own). ``port``: also serve the registry on ``http://host:port/metrics``
    from a background thread (0 picks a free port: see ``Meter.url``); the
    default host is loopback only.
    ``namespace`` prefixes every name. ``labels``: names of labels every
    runtime metric carries first, their values taken from each episode's (and
    batch's) ``log_fields``, e.g. ``labels=("policy",)`` to tell apart the
    policies of an evaluation (keep them few: each value is a series).

    Replaces the meter of a previous call (closed: no longer served or
    registered). A port that cannot be bound raises ``OSError`` and leaves
    no meter behind. Returns the :class:`Meter`.
    """
    if port is not None and (
        isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535
    ):
        raise ValueError(f"port must be an integer from 0 to 65535 or None, got {port!r:.80}")
    if not isinstance(namespace, str) or not _NAME.fullmatch(namespace):
        raise ValueError(
            f"namespace must be a name of letters, digits and underscores, got {namespace!r:.80}"
        )
    labels = (labels,) if isinstance(labels, str) else tuple(labels)
    for label in labels:
        if not isinstance(label, str) or not _NAME.fullmatch(label) or label in _RESERVED_LABELS:
            raise ValueError(
                f"labels must be names of letters, digits and underscores other than "
                f"{', '.join(sorted(_RESERVED_LABELS))}; got {label!r:.80}"
            )
    if STATE.meter is not None:
        STATE.meter.close()
    if registry is None:
        # slow to import: loaded once metrics are on
        from prometheus_client import REGISTRY

        registry = REGISTRY
    meter = Meter(registry, namespace, labels)
    if port is not None:
        try:
            meter._serve(port, host)
        except BaseException:
            meter.close()
            raise
    STATE.meter = meter
    return meter

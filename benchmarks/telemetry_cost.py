"""What Prometheus metrics and OpenTelemetry tracing add to a turn.

Figure 1's workload (instant scripted policies over the canonical suites,
concurrency 1 and 64), run with nothing on, with ``actors.configure_metrics``
(a fresh registry, not served), and with ``actors.configure_tracing`` (the
OpenTelemetry SDK's tracer provider, a batch span processor and an exporter
that drops the spans: what the SDK costs, not a network). Rounds interleave
the three so a slow spell of the machine hits them alike; the figures are the
median of the rounds' own differences. Not a target of docs/runtime.md. Run:
``.venv/bin/python benchmarks/telemetry_cost.py`` (needs the ``otel`` extra).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from overhead import _scenarios, runtime_us_per_turn

import actors


def _provider() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Dropped(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped(), max_queue_size=1 << 17))
    return provider


def measure(rounds: int = 5, per_type: int = 25) -> dict[str, list[float]]:
    from prometheus_client import CollectorRegistry

    scenarios = _scenarios(per_type)
    provider = _provider()
    samples: dict[str, list[float]] = {}
    for _ in range(rounds):
        for c in (1, 64):
            samples.setdefault(f"off{c}", []).append(runtime_us_per_turn(scenarios, c))
            with actors.configure_metrics(registry=CollectorRegistry()):
                samples.setdefault(f"metrics{c}", []).append(runtime_us_per_turn(scenarios, c))
            actors.configure_tracing(provider)
            try:
                samples.setdefault(f"tracing{c}", []).append(runtime_us_per_turn(scenarios, c))
            finally:
                actors.disable_tracing()
    provider.shutdown()
    return samples


def main(rounds: int = 5) -> None:
    samples = measure(rounds)
    print(f"telemetry cost ({rounds} rounds; us per turn, best round; added: median of the rounds)")
    for c in (1, 64):
        off = samples[f"off{c}"]
        line = f"  concurrency {c:2d}: off {min(off):6.1f} us"
        for name in ("metrics", "tracing"):
            on = samples[f"{name}{c}"]
            added = statistics.median(b - a for a, b in zip(off, on, strict=True))
            line += f"; {name} {min(on):6.1f} us (+{added:.1f} us a turn)"
        print(line)


if __name__ == "__main__":
    main()

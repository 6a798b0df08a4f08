"""Spans sent over OTLP/HTTP (protobuf), set up the same way by the command and
by its Ray workers: the same service name, the same batches every second.
Needs the OpenTelemetry SDK and exporter (the ``otel`` extra)."""

from __future__ import annotations

import os
from typing import Any

EXPORT_TIMEOUT_S = 5
"""Seconds an export may take."""


def otlp_exporter(url: str) -> Any:
    """An exporter of spans to ``url`` (a collector's ``/v1/traces``)."""
    # an extra, loaded once tracing is on
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)


def exporting_provider(exporter: Any, *first: Any) -> Any:
    """A tracer provider sending its spans to ``exporter`` in batches every
    second (a trace viewer follows the run; the SDK's default is 5 s), after
    the span processors ``first``. Shut it down to send what is queued."""
    # an extra, loaded once tracing is on
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or "chaosops"
    provider = TracerProvider(resource=Resource.create({"service.name": name}),
                              shutdown_on_exit=False)  # fmt: skip
    for processor in first:
        provider.add_span_processor(processor)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=1000))
    return provider

"""What a run sends to the tools that watch it: Prometheus metrics
(``--metrics-port``) and OpenTelemetry traces (``--otlp-endpoint``)."""

from __future__ import annotations

import argparse
import os
import urllib.error
import urllib.request

from ._errors import PROG, CLIError
from ._terminal import note


def serve_metrics(args: argparse.Namespace) -> None:
    """``--metrics-port``: count the run in Prometheus metrics and serve them
    (namespace ``chaosops``); one line naming the address when it cannot be."""
    if args.metrics_port is None:
        return
    from actors import configure_metrics

    where = f"{args.metrics_host}:{args.metrics_port}"
    try:
        meter = configure_metrics(args.metrics_port, host=args.metrics_host, namespace="chaosops")
    except OSError as exc:
        raise CLIError(
            f"--metrics-port: cannot serve metrics on {where}: {exc.strerror or exc}"
        ) from None
    note(f"Prometheus metrics on {meter.url}")


def start_tracing(args: argparse.Namespace) -> None:
    """``--otlp-endpoint``: trace every episode and turn, exported over OTLP/HTTP
    (protobuf) in batches; the spans still queued are sent when the command
    exits. The endpoint is checked first: one line naming it when it cannot be
    reached (exit 1) or the OpenTelemetry SDK is missing (exit 2)."""
    if not args.otlp_endpoint:
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise CLIError(
            "--otlp-endpoint needs OpenTelemetry's SDK and OTLP exporter: "
            "pip install 'chaosops[otel]'"
        ) from None
    import actors

    url = traces_url(args.otlp_endpoint)
    _check_collector(url)
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or PROG})
    provider = TracerProvider(resource=resource)  # shut down (flushed) at exit
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=10)))
    actors.configure_tracing(provider, name=PROG)
    note(f"OpenTelemetry traces to {url}")


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint`` (a collector's base URL, as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes it, or its ``/v1/traces`` URL)."""
    endpoint = endpoint.strip()
    if not endpoint.startswith(("http://", "https://")):
        raise CLIError(
            f"--otlp-endpoint: expected an http:// or https:// URL such as "
            f"http://127.0.0.1:4318, got {endpoint!r}"
        )
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def _check_collector(url: str) -> None:
    # An empty export request: a collector answers 200 and stores nothing.
    request = urllib.request.Request(
        url, data=b"", method="POST", headers={"Content-Type": "application/x-protobuf"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5):
            pass
    except urllib.error.HTTPError as exc:
        raise CLIError(
            f"--otlp-endpoint: {url} answered HTTP {exc.code} {exc.reason} to an empty "
            "OTLP export; expected an OpenTelemetry collector's OTLP/HTTP receiver",
            code=1,
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CLIError(f"--otlp-endpoint: cannot reach {url}: {reason}", code=1) from None

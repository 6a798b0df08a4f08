"""What a run sends to the tools that watch it: Prometheus metrics
(``--metrics-port``) and OpenTelemetry traces (``--otlp-endpoint``)."""

from __future__ import annotations

import base64
import errno
import logging
import os
import select
import signal
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import actors
from actors import configure_metrics
from chaosops._otlp import EXPORT_TIMEOUT_S, exporting_provider, otlp_exporter
from chaosops._urls import shown_url
from chaosops.runs.config import Telemetry, traces_url
from chaosops.runs.session import Session

from ._errors import PROG, CLIError, note


def serve_metrics(telemetry: Telemetry) -> str | None:
    """``--metrics-port``: count the run in Prometheus metrics and serve them
    (namespace ``chaosops``); one line naming the address when it cannot be.
    Returns the line announcing them (None: not asked for)."""
    if telemetry.metrics_port is None:
        for option, value in (("--metrics-host", telemetry.metrics_host),
                              ("--metrics-linger", telemetry.metrics_linger)):  # fmt: skip
            if value is not None:
                raise CLIError(f"{option} needs --metrics-port (the port to serve them on)")
        return None
    # slow to import: loaded once metrics are on
    import prometheus_client

    prometheus_client.disable_created_metrics()  # no *_created series beside each counter
    where = f"{telemetry.host}:{telemetry.metrics_port}"
    try:
        meter = configure_metrics(
            telemetry.metrics_port, host=telemetry.host, namespace=PROG, labels=("policy", "model")
        )
    except OSError as exc:
        bad_host = isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL
        option = "--metrics-host" if bad_host else "--metrics-port"
        raise CLIError(
            f"{option}: cannot serve metrics on {where}: {exc.strerror or exc}"
        ) from None
    return f"Prometheus metrics on {meter.url}"


class _Tracing:
    """The exporting side of ``--otlp-endpoint``: what was ended and sent."""

    def __init__(self, url: str, provider: Any, exporter: Any) -> None:
        self.url = url
        self.provider = provider
        self.exporter = exporter
        self.ended = 0  # spans ended (handed to the batch processor)
        self.sent = 0  # spans the collector accepted


def start_tracing(telemetry: Telemetry, session: Session) -> str | None:
    """``--otlp-endpoint``: trace every episode and turn, exported over OTLP/HTTP
    (protobuf) in batches, with the headers and certificates of the standard
    ``OTEL_EXPORTER_OTLP_*`` variables. The endpoint is checked first: one line
    naming it when it cannot be reached or refuses an export (exit 1), or when
    the OpenTelemetry SDK is missing (exit 2). :func:`finish` sends what is
    still queued, for a bounded time, and says how many spans were lost.
    Returns the line announcing the traces (None: not asked for)."""
    if telemetry.otlp_endpoint is None:
        return None
    url = traces_url(telemetry.otlp_endpoint)
    try:
        # an extra, loaded once tracing is on
        from opentelemetry.sdk.trace import SpanProcessor
        from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

        inner = otlp_exporter(url)  # it connects at its first export, not here
    except ImportError:
        raise CLIError(
            "--otlp-endpoint needs OpenTelemetry's SDK and OTLP exporter: "
            "pip install 'chaosops[otel]'"
        ) from None

    _check_collector(url)
    # The SDK's own warnings (a retry, a full queue) would interleave with the
    # progress bar, one per batch: finish() says what was lost, in one line.
    for name in ("opentelemetry.exporter", "opentelemetry.sdk.trace.export"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    class Counted(SpanExporter):
        def export(self, spans: Any) -> Any:
            result = inner.export(spans)
            if result is SpanExportResult.SUCCESS:
                tracing.sent += len(spans)
            return result

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return bool(inner.force_flush(timeout_millis))

    class Ended(SpanProcessor):
        def on_end(self, span: Any) -> None:
            tracing.ended += 1

    provider = exporting_provider(Counted(), Ended())  # finish() shuts it down
    tracing = _Tracing(url, provider, inner)
    session.tracing = tracing
    actors.configure_tracing(provider, name=PROG)
    return f"OpenTelemetry traces to {shown_url(url)}"


def start_telemetry(telemetry: Telemetry, session: Session) -> None:
    """Traces, then metrics, each checked before anything is written; the
    lines announcing them come once both are up, so a failed check is the
    command's one line."""
    said = [start_tracing(telemetry, session), serve_metrics(telemetry)]
    for line in said:
        if line is not None:
            note(line)


_FLUSH_S = EXPORT_TIMEOUT_S
"""Seconds an export may take, and the final flush: a collector gone away
delays the command's exit by about twice this at most."""


def finish(telemetry: Telemetry, session: Session) -> None:
    """After the command: keep serving the metrics ``--metrics-linger``
    seconds, then send the spans still queued. Ctrl-C cuts either short; the
    command's exit code stays its own."""

    meter = actors.current_meter()
    # --metrics-linger needs --metrics-port; nothing ran (the command failed
    # before its first batch): no final counts to wait for
    linger = telemetry.metrics_linger
    if linger and meter is not None and session.ran:
        # SIGTERM (systemd, Kubernetes) ends the linger as Ctrl-C does: the
        # command's exit code stays its own, not 143. Handled before the line
        # that invites it is written (a SIGTERM sent on reading it came too
        # soon), and waited for on a wakeup socket, not in time.sleep (a signal
        # caught just before the sleep began ran its handler only once the
        # whole linger was over).
        wake, woken = socket.socketpair()
        wake.setblocking(False)
        previous_fd = signal.set_wakeup_fd(wake.fileno(), warn_on_full_buffer=False)
        previous = signal.signal(signal.SIGTERM, _end_linger)
        try:
            note(
                f"serving the final metrics on {meter.url} for {linger:g} s "
                "(Ctrl-C or SIGTERM to stop)"
            )
            select.select([woken], [], [], linger)
        except (KeyboardInterrupt, _LingerOver):
            pass
        finally:
            signal.set_wakeup_fd(previous_fd)
            signal.signal(signal.SIGTERM, previous)
            wake.close()
            woken.close()
    if session.tracing is not None:
        tracing, session.tracing = session.tracing, None
        _finish_tracing(tracing)


class _LingerOver(Exception):
    """SIGTERM during ``--metrics-linger``."""


def _end_linger(signum: int, frame: Any) -> None:
    raise _LingerOver


def _finish_tracing(tracing: _Tracing) -> None:

    actors.disable_tracing()
    try:
        tracing.provider.force_flush(timeout_millis=_FLUSH_S * 1000)
    except KeyboardInterrupt:
        pass
    finally:
        tracing.exporter.shutdown()  # what is still queued fails at once
        try:
            tracing.provider.shutdown()
        except KeyboardInterrupt:
            pass
    lost = tracing.ended - tracing.sent
    if lost:
        note(
            f"OpenTelemetry: {lost} of {tracing.ended} spans were not delivered to "
            f"{shown_url(tracing.url)} (collector unreachable or too slow)"
        )


def _env(name: str) -> str | None:
    # The traces-specific variable first, as the exporter reads them.
    return os.environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or os.environ.get(
        f"OTEL_EXPORTER_OTLP_{name}"
    )


def _check_collector(url: str) -> None:
    """An empty export request, with the exporter's headers and certificates:
    a collector answers 200 and stores nothing."""
    # an extra, loaded once tracing is on
    from opentelemetry.util.re import parse_env_headers

    headers = {"Content-Type": "application/x-protobuf"}
    headers.update(parse_env_headers(_env("HEADERS") or "", liberal=True))
    context = None
    if url.startswith("https://"):
        context = ssl.create_default_context(cafile=_env("CERTIFICATE"))
        client_cert = _env("CLIENT_CERTIFICATE")
        if client_cert:
            context.load_cert_chain(client_cert, _env("CLIENT_KEY"))
    parts = urllib.parse.urlsplit(url)
    target = url
    if parts.username is not None:
        # user info in the URL: basic authentication, as the exporter's HTTP
        # client sends it, to the URL without it (urllib takes it for the host)

        pair = (
            f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        )
        headers.setdefault("Authorization", "Basic " + base64.b64encode(pair.encode()).decode())
        target = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    url = shown_url(url)  # what the messages name
    request = urllib.request.Request(target, data=b"", method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=_FLUSH_S, context=context):
            pass
    except urllib.error.HTTPError as exc:
        advice = (
            "; set its credentials in OTEL_EXPORTER_OTLP_HEADERS"
            if exc.code in (401, 403)
            else "; expected an OpenTelemetry collector's OTLP/HTTP receiver"
        )
        raise CLIError(
            f"--otlp-endpoint: {url} answered HTTP {exc.code} {exc.reason} to an empty "
            f"OTLP export{advice}",
            code=1,
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CLIError(f"--otlp-endpoint: cannot reach {url}: {reason}", code=1) from None

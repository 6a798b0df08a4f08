"""A minimal OpenTelemetry collector for tests: an OTLP/HTTP traces receiver
on loopback that decodes each export with OpenTelemetry's own protobuf types
and keeps the spans and their resources."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Collector:
    """``url`` to export to; ``spans`` and ``resources`` received so far."""

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.required_headers = headers or {}  # answered 401 without them
        self.spans: list[Any] = []
        self.resources: list[dict[str, Any]] = []
        self.exports = 0
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                if any(self.headers.get(k) != v for k, v in owner.required_headers.items()):
                    self.send_response(401)
                    self.end_headers()
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                owner._receive(ExportTraceServiceRequest.FromString(body))
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def _receive(self, request: Any) -> None:
        with self.lock:
            self.exports += 1
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(span)
                        self.resources.append(resource)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attributes(span: Any) -> dict[str, Any]:
    """A received span's attributes as a dict."""
    return {a.key: _value(a.value) for a in span.attributes}

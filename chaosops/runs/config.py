"""The run configuration: the spec of a run, where it writes, how it is watched."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.cluster import ClusterOptions
from chaosops.outputs import LOG_FILE

from .errors import Named, RunError
from .spec import RunSpec


@dataclass(frozen=True, slots=True)
class Telemetry:
    """Where a run is watched from: JSON logs, Prometheus metrics, OpenTelemetry traces."""

    log_json: str | None = None
    metrics_port: int | None = None
    metrics_host: str | None = None
    metrics_linger: float | None = None
    otlp_endpoint: str | None = None

    @property
    def host(self) -> str:
        """The address metrics are served on."""
        return self.metrics_host or "127.0.0.1"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """One ``run`` or ``eval`` of the suites: its spec (what it plays, run.json's
    content), where it writes, how it is watched."""

    command: str
    spec: RunSpec
    out: Path
    telemetry: Telemetry = field(default_factory=Telemetry)
    progress: bool = True
    resume: bool = False  # run
    fsync: bool = False  # run
    json: str | None = None  # eval: the JSON table's path, '-' for stdout
    chart: str | None = None  # eval: the chart's path
    draw_chart: bool = True  # eval
    point_latest: bool = False  # run: a folder of its own under runs/, runs/latest to it
    ray: str | None = None  # --ray ADDRESS: the episodes on Ray worker actors
    workers: int | None = None  # --workers: Ray worker actors (None: one per CPU)

    @property
    def cluster(self) -> Any:
        """``--ray`` and ``--workers`` as ClusterOptions; None without ``--ray``."""
        if self.ray is None:
            return None
        return ClusterOptions(self.ray, self.workers)


def log_target(log_json: str | None, folder: Path | None) -> str | None:
    """``--log-json``: ``off`` for none; a command writing a run folder (run,
    serve) writes its log into it by default, where ``chaosops watch`` and
    ``view`` find its episodes in flight."""
    if log_json == "off":
        return None
    if log_json is None and folder is not None:
        return str(Path(folder) / LOG_FILE)
    return log_json


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint`` (a collector's base URL, as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes it, or its ``/v1/traces`` URL)."""
    parts = urllib.parse.urlsplit(endpoint.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise RunError(
            Named("otlp_endpoint"),
            ": expected an http:// or https:// URL with a host, such "
            f"as http://127.0.0.1:4318, got {endpoint!r}",
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/traces"):
        path += "/v1/traces"
    return urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc, path, parts.query, ""))

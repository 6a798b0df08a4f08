"""``--metrics-linger`` in process: a SIGTERM sent the moment the line is
written ends the linger at once (a supervisor reading stderr sends it then)."""

from __future__ import annotations

import signal
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

import actors
from chaosops.cli import _telemetry
from chaosops.runs.config import Telemetry
from chaosops.runs.session import Session


def test_a_sigterm_sent_on_reading_the_linger_line_ends_the_linger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(actors, "current_meter", lambda: SimpleNamespace(url="http://m/metrics"))
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main
    lines: list[str] = []

    def note(text: str) -> None:  # the line is out: SIGTERM at once
        lines.append(text)
        signal.pthread_kill(main, signal.SIGTERM)

    def too_soon(signum: int, frame: Any) -> None:
        raise AssertionError("the SIGTERM came before the linger's handler was set")

    monkeypatch.setattr(_telemetry, "note", note)
    previous = signal.signal(signal.SIGTERM, too_soon)
    wakeup_fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup_fd)
    try:
        started = time.monotonic()
        _telemetry.finish(Telemetry(metrics_port=0, metrics_linger=60), Session(ran=True))
        elapsed = time.monotonic() - started
        # the handler and the wakeup fd are put back
        assert signal.getsignal(signal.SIGTERM) is too_soon
        assert signal.set_wakeup_fd(wakeup_fd) == wakeup_fd
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(lines) == 1 and lines[0].startswith("serving the final metrics on http://m/metrics")
    assert elapsed < 30  # generous: the linger was 60 s

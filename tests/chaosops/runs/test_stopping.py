"""Ctrl-C while a run stops: signals within a moment of each other are one
press (a double press or a group's signals on a loaded machine); the second
press says to wait and the third stops at once."""

from __future__ import annotations

import logging
import signal

import pytest

from chaosops.runs import stopping


def test_signals_a_moment_apart_are_one_press_and_the_third_press_forces(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chaosops.runs")  # where the engine's notes go
    now = [100.0]
    monkeypatch.setattr(stopping.time, "monotonic", lambda: now[0])
    again = stopping._Again()  # the first press was taken when the handler was set
    for gap in (0.01, 0.2, 0.2):  # the rest of a burst: the same press
        now[0] += gap
        again(signal.SIGINT, None)
    assert again.presses == 0 and caplog.messages == []
    now[0] += stopping.ONE_PRESS_S
    again(signal.SIGINT, None)  # the second press: wait
    assert again.presses == 1 and "stopping, please wait" in caplog.messages[0]
    now[0] += stopping.ONE_PRESS_S
    with pytest.raises(KeyboardInterrupt):  # the third: at once
        again(signal.SIGTERM, None)

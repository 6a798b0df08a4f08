"""Cost of one structured ``turn`` event, end to end, in microseconds.

What the coordinator does per turn when logging is on: build the fields and
hand them to ``actors._logging.emit`` inside the episode's bound context, which
merges the context, adds level, run id and timestamp, renders the JSON line and
writes it to the log file (one unbuffered write). Also: the same event through
the structlog logger (``get_logger().info("turn", **fields)``, the way a user's
own events go). Also printed for scale: a bare ``os.write`` of a line of the
same size (the syscall floor) and the check that keeps unconfigured logging
free. Budget: <= 10 us per turn event to a file. Run:
``python benchmarks/logging_cost.py`` (best of several rounds; the machine is
small and shared, take the figures as +-10%).
"""

from __future__ import annotations

import enum
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from structlog.contextvars import bound_contextvars

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from actors import _logging
from actors._logging import configure_logging, reset_logging


class Role(enum.StrEnum):
    SRE = "sre"


class Kind(enum.StrEnum):
    RESTART = "restart"


def _fields(turn: int) -> dict[str, Any]:
    # The shape of chaosops's turn event (describe_turn plus the coordinator's).
    return {
        "episode_id": "3f1c2a9b8d7e4f60a1b2c3d4e5f60718",
        "turn": turn,
        "role": Role.SRE,
        "step": turn // 4,
        "action_type": Kind.RESTART,
        "target": "payments-db",
        "args": {"replicas": 3},
        "reward": -0.05,
        "done": False,
        "timed_out": False,
        "error": None,
        "latency_ms": 0.042,
    }


def per_event_us(n: int, via_logger: bool = False) -> float:
    """us per ``turn`` event: fields, level check, render, write."""
    state = _logging.STATE
    with bound_contextvars(episode_id="3f1c2a9b8d7e4f60a1b2c3d4e5f60718"):
        start = time.perf_counter()
        if via_logger:
            for turn in range(n):
                if state.threshold <= _logging.INFO:
                    state.logger.info("turn", **_fields(turn))
        else:
            for turn in range(n):
                if state.threshold <= _logging.INFO:
                    _logging.emit("info", "turn", _fields(turn))
        return (time.perf_counter() - start) / n * 1e6


def unconfigured_us(n: int) -> float:
    state = _logging.STATE
    start = time.perf_counter()
    for turn in range(n):
        if state.threshold <= _logging.INFO:
            state.logger.info("turn", **_fields(turn))
    return (time.perf_counter() - start) / n * 1e6


def write_floor_us(path: Path, line: bytes, n: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        start = time.perf_counter()
        for _ in range(n):
            os.write(fd, line)
        return (time.perf_counter() - start) / n * 1e6
    finally:
        os.close(fd)


def main(rounds: int = 7, n: int = 20_000) -> dict[str, float]:
    best = dict.fromkeys(("event", "logger", "floor", "off"), float("inf"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        for _ in range(rounds):
            reset_logging()
            best["off"] = min(best["off"], unconfigured_us(n))
            configure_logging(path)
            try:
                best["event"] = min(best["event"], per_event_us(n))
                best["logger"] = min(best["logger"], per_event_us(n, via_logger=True))
            finally:
                reset_logging()
            line = path.read_bytes().splitlines()[-1] + b"\n"
            best["floor"] = min(best["floor"], write_floor_us(Path(tmp) / "floor", line, n))
            path.unlink()
    print(f"structured logging cost (best of {rounds} rounds of {n:,} events, us per event)")
    print(f"  turn event to a JSON file        {best['event']:6.2f} us  target <= 10 us")
    print(f"  the same through get_logger()    {best['logger']:6.2f} us  (a user's own events)")
    print(f"  of which the write syscall       {best['floor']:6.2f} us  ({len(line)} bytes a line)")
    print(f"  logging unconfigured (check)     {best['off']:6.3f} us")
    return best


if __name__ == "__main__":
    main()

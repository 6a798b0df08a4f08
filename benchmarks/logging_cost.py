"""Cost of one structured ``turn`` event, end to end, in microseconds.

What the coordinator does per turn when logging is on: the described fields
(a dict, as ``describe_turn`` returns them) and its own values handed to
``actors._logging.emit_turn`` inside the episode's bound context, which puts
its fields into the dict, checks the context, adds event, level, run id and
timestamp, renders the line (orjson) and writes it to the log file (one
``write``). Also: the same event as one dict through
``actors._logging.emit`` (the runtime's other events' path), and through the
structlog logger (``get_logger().info("turn", **fields)``, the way a user's
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
from actors._logging import configure_logging, disable_logging


class Role(enum.StrEnum):
    SRE = "sre"


class Kind(enum.StrEnum):
    RESTART = "restart"


def _described(turn: int) -> dict[str, Any]:
    # What chaosops's describe_turn returns.
    return {"step": turn // 4, "action_type": Kind.RESTART, "target": "payments-db",
            "args": {"replicas": 3}}  # fmt: skip


def _turn_values(turn: int) -> tuple[Any, ...]:
    # emit_turn's arguments after the described dict
    return ("3f1c2a9b8d7e4f60a1b2c3d4e5f60718", turn, Role.SRE, -0.05, False, False, None, 0.042)


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


def per_event_us(n: int, way: str = "turn") -> float:
    """us per ``turn`` event: fields, level check, render, write; ``way``:
    ``"turn"`` (the runtime's), ``"dict"`` (emit) or ``"logger"``."""
    state = _logging.STATE
    with bound_contextvars(episode_id="3f1c2a9b8d7e4f60a1b2c3d4e5f60718"):
        start = time.perf_counter()
        if way == "logger":
            for turn in range(n):
                if state.threshold <= _logging.INFO:
                    state.logger.info("turn", **_fields(turn))
        elif way == "dict":
            for turn in range(n):
                if state.threshold <= _logging.INFO:
                    _logging.emit("info", "turn", _fields(turn))
        else:
            for turn in range(n):
                if state.threshold <= _logging.INFO:
                    state.emit_turn(_described(turn), *_turn_values(turn))
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
    best = dict.fromkeys(("event", "dict", "logger", "floor", "off"), float("inf"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        for _ in range(rounds):
            disable_logging()
            best["off"] = min(best["off"], unconfigured_us(n))
            configure_logging(path)
            try:
                best["event"] = min(best["event"], per_event_us(n))
                best["dict"] = min(best["dict"], per_event_us(n, "dict"))
                best["logger"] = min(best["logger"], per_event_us(n, "logger"))
            finally:
                disable_logging()
            line = path.read_bytes().splitlines()[-1] + b"\n"
            best["floor"] = min(best["floor"], write_floor_us(Path(tmp) / "floor", line, n))
            path.unlink()
    print(f"structured logging cost (best of {rounds} rounds of {n:,} events, us per event)")
    print(f"  turn event to a JSON file        {best['event']:6.2f} us  target <= 10 us")
    print(f"  the same as one dict (emit)      {best['dict']:6.2f} us  (other runtime events)")
    print(f"  the same through get_logger()    {best['logger']:6.2f} us  (a user's own events)")
    print(f"  of which the write syscall       {best['floor']:6.2f} us  ({len(line)} bytes a line)")
    print(f"  logging unconfigured (check)     {best['off']:6.3f} us")
    return best


if __name__ == "__main__":
    main()

"""A tiny turn-based environment for testing the generic runtime."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import structlog

from actors import disable_logging

ROLES = ("a", "b", "c", "d")


@dataclass(frozen=True)
class Obs:
    turn_role: str
    done: bool
    reward: float | None
    step: int


def act(role: str, tag: Any = "act") -> tuple[str, str]:
    return (str(tag), role)


def noop(role: str) -> tuple[str, str]:
    return ("noop", role)


def is_action(value: object) -> bool:
    return isinstance(value, tuple) and len(value) == 2


class ToyEnv:
    """Four roles in turn; the episode is done after ``steps`` steps."""

    turn_order = ROLES

    def __init__(self, steps: int = 8, *, fail_reset: bool = False, fail_step: int | None = None):
        self.steps = steps
        self.fail_reset = fail_reset
        self.fail_step = fail_step
        self.applied: list[Any] = []
        self.n = 0

    def reset(self, **kwargs: Any) -> Obs:
        if self.fail_reset:
            raise RuntimeError("reset broke")
        self.n = 0
        self.applied = []
        return Obs(ROLES[0], False, 0.0, 0)

    def step(self, action: Any) -> Obs:
        if self.fail_step is not None and self.n == self.fail_step:
            raise ValueError(f"step {self.n} broke")
        self.applied.append(action)
        self.n += 1
        return Obs(ROLES[self.n % 4], self.n >= self.steps, 1.0, self.n)


def run_kwargs(**overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"fallback": noop, "is_action": is_action, "max_turns": 100}
    kwargs.update(overrides)
    return kwargs


def instant_policies() -> dict[str, Any]:
    return {role: (lambda obs, r: act(r)) for role in ROLES}


@contextmanager
def captured_events() -> Iterator[list[dict[str, Any]]]:
    """Enable runtime logging at info and capture the event dicts."""
    import io

    from actors import configure_logging

    configure_logging(io.StringIO(), level="info")
    try:
        with structlog.testing.capture_logs() as events:
            yield events
    finally:
        disable_logging()

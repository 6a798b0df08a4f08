"""An episode's world frame by frame: its recorded actions stepped through a
fresh environment (as ``chaosops replay`` does), the state seen after each."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ChaosOpsAction
from chaosops.outputs import ResultLine, scenario_from_record

CHAT_SHOWN = 6
"""Lines of the shared chat (and of a role's inbox) a frame keeps: the latest."""


@dataclass(frozen=True)
class Frame:
    """The world after ``step`` (0: as the episode began)."""

    step: int
    role: str | None  # whose action led here
    next_role: str | None  # whose turn it is now (None once the episode is over)
    action: dict[str, Any] | None
    reward: float
    total: float
    services: dict[str, str]  # name -> health
    alerts: list[str]
    chat: list[str]
    inbox: list[str]  # the acting role's private messages
    flags: list[str]  # the oversight flags raised so far
    done: bool


def frames(record: ResultLine) -> Iterator[Frame]:
    """The frames of a results record: the first state, then one per step.

    Stops early (without an error) at a step the world does not accept: the
    frames shown are those the record and the world agree on.
    """
    env = ChaosOpsEnvironment()
    env.reset(scenario=scenario_from_record(record))
    yield _frame(env, 0, None, None, 0.0, False)
    for number, step in enumerate(record.get("steps") or (), start=1):
        try:
            action = ChaosOpsAction.model_validate(step["action"])
            role = env.current_role.value
            observation = env.step(action)
        except (KeyError, ValueError, RuntimeError):
            return
        reward = float(observation.reward or 0.0)
        yield _frame(env, number, role, step["action"], reward, bool(observation.done))
        if observation.done:
            return


def _frame(env: Any, step: int, role: str | None, action: Any, reward: float, done: bool) -> Frame:
    state = env.state
    return Frame(
        step=step,
        role=role,
        next_role=None if done else env.current_role.value,
        action=action,
        reward=reward,
        total=float(state.cumulative_reward),
        services={name: str(m.health.value) for name, m in state.services.items()},
        alerts=[f"{a.severity} {a.service}: {a.message}" for a in state.all_alerts][-CHAT_SHOWN:],
        chat=list(state.chat_history[-CHAT_SHOWN:]),
        inbox=list((state.private_chat.get(role or "") or [])[-CHAT_SHOWN:]),
        flags=list(state.oversight_flags),
        done=done,
    )

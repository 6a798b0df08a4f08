"""``chaosops replay``: recorded actions stepped through a fresh environment,
every reward checked."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import ChaosOpsAction
from chaosops.outputs import ResultLine, scenario_from_record

from .errors import one_line


@dataclasses.dataclass
class Mismatch:
    """One replayed step (or episode end) that differs from the record."""

    episode_id: str
    run_key: str
    step: int
    what: str

    def line(self) -> str:
        """The report line: episode id, run key, step and what differs."""
        return f"episode {self.episode_id} ({self.run_key}) step {self.step}: {self.what}"


STATUSES = ("ok", "failed")


def _shown(value: object) -> str:
    """A JSON value as an error message shows it: its literal, or its kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:40]!r}..."
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _expect(record: Mapping[str, Any], name: str, where: str, kind: str, ok: Any) -> None:
    if name not in record:
        raise ValueError(f"{where}{name}: missing; expected {kind}")
    value = record[name]
    if not ok(value):
        raise ValueError(f"{where}{name}: expected {kind}, got {_shown(value)}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_record(record: Mapping[str, Any]) -> None:
    """Raise ``ValueError("<field>: expected ..., got ...")`` unless the fields
    replay reads have the types ``results.jsonl`` records give them.

    The scenario fields and the actions' content are not checked here: a
    scenario that cannot be rebuilt or an unreadable action is a mismatch.
    """
    status = record.get("status", "ok")
    if status not in STATUSES:
        raise ValueError(f"status: expected one of {', '.join(STATUSES)}, got {_shown(status)}")
    _expect(record, "resolved", "", "true or false", lambda v: isinstance(v, bool))
    _expect(record, "cumulative_reward", "", "a number", _is_number)
    _expect(record, "steps", "", "a list of steps", lambda v: isinstance(v, list))
    for index, step in enumerate(record["steps"]):
        where = f"steps[{index}]"
        if not isinstance(step, dict):
            raise ValueError(f"{where}: expected an object (a step), got {_shown(step)}")
        where += "."
        _expect(step, "role", where, "a role name", lambda v: isinstance(v, str))
        _expect(step, "action", where, "an object (an action)", lambda v: isinstance(v, dict))
        _expect(step, "reward", where, "a number", _is_number)
        _expect(step, "done", where, "true or false", lambda v: isinstance(v, bool))


def _action_problem(exc: Exception) -> str:
    """What is wrong with a recorded action, on one line: the first field
    pydantic names (not its whole multi-line report), or the missing key."""
    if isinstance(exc, KeyError):
        return "the step has no 'action'"
    errors = getattr(exc, "errors", None)
    if callable(errors) and (found := errors()):
        first = found[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "action"
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return f"{where}: {first.get('msg')}, given {_shown(first.get('input'))}{more}"
    return one_line(exc)


def replay_records(records: Iterable[ResultLine]) -> tuple[int, int, list[Mismatch]]:
    """Replay recorded actions; return (episodes, steps, mismatches).

    The records must pass :func:`check_record`. Each record's scenario is
    reset in a fresh ``ChaosOpsEnvironment`` and its applied actions are
    stepped in order; a step whose role, reward or done flag differs is a
    mismatch, and so are a final resolved flag or cumulative reward that
    differ. A failed episode's steps are those applied before the environment
    failed: its resolved flag is not checked (the failing step may have
    changed the world before raising), its cumulative reward is (the runner
    records the environment's after the applied steps, which the replay
    reaches too).
    """
    episodes = steps = 0
    mismatches: list[Mismatch] = []
    for record in records:
        episodes += 1
        steps += _replay_one(record, mismatches)
    return episodes, steps, mismatches


def _replay_one(record: ResultLine, mismatches: list[Mismatch]) -> int:
    """Replay one episode, adding what differs to ``mismatches``; returns the steps read."""

    ep_id, key = str(record.get("episode_id")), str(record.get("run_key"))

    def differs(number: int, what: str) -> None:
        mismatches.append(Mismatch(ep_id, key, number, what))

    env = ChaosOpsEnvironment()
    try:
        env.reset(scenario=scenario_from_record(record))
    except (KeyError, ValueError, TypeError) as exc:
        differs(0, f"cannot rebuild the scenario: {exc}")
        return 0
    steps = _replay_steps(env, record["steps"], differs)
    state, final = env.state, len(record["steps"])
    failed = record.get("status", "ok") == "failed"
    if not failed and record["resolved"] != bool(state.resolved):
        differs(final, f"resolved recorded {record.get('resolved')}, replayed {state.resolved}")
    recorded_total = float(record["cumulative_reward"])
    if not math.isclose(recorded_total, state.cumulative_reward, rel_tol=1e-9, abs_tol=1e-9):
        differs(
            final,
            f"cumulative reward recorded {recorded_total}, replayed {state.cumulative_reward}",
        )
    return steps


def _replay_steps(env: Any, recorded: Sequence[Any], differs: Callable[[int, str], None]) -> int:
    """Step ``env`` through the recorded actions, checking role, reward and done."""

    done = False
    steps = 0
    for number, step in enumerate(recorded, start=1):
        steps += 1
        if done:
            differs(number, "recorded after the episode ended")
            break
        try:
            action = ChaosOpsAction.model_validate(step["action"])
        except (KeyError, ValueError) as exc:
            differs(number, f"unreadable action: {_action_problem(exc)}")
            break
        role = env.current_role.value
        if step["role"] != role:
            differs(number, f"role recorded {step['role']}, replayed {role}")
        obs = env.step(action)
        reward, replayed = float(step["reward"]), float(obs.reward or 0.0)
        if not math.isclose(reward, replayed, rel_tol=1e-9, abs_tol=1e-9):
            differs(number, f"reward recorded {reward}, replayed {replayed}")
        if step["done"] != bool(obs.done):
            differs(number, f"done recorded {step['done']}, replayed {obs.done}")
        done = bool(obs.done)
    return steps

"""``chaosops replay``: recorded actions stepped through a fresh environment,
every reward checked."""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._errors import CLIError
from ._terminal import note


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


def replay_records(records: Iterable[Mapping[str, Any]]) -> tuple[int, int, list[Mismatch]]:
    """Replay recorded actions; return (episodes, steps, mismatches).

    Each record's scenario is reset in a fresh ``ChaosOpsEnvironment`` and its
    applied actions are stepped in order; a step whose role, reward or done
    flag differs is a mismatch, and so are a final resolved flag or
    cumulative reward that differ (episodes that failed are checked step by
    step only).
    """
    from chaosops.env.environment import ChaosOpsEnvironment
    from chaosops.env.models import ChaosOpsAction
    from chaosops.outputs import scenario_from_record

    episodes = steps = 0
    mismatches: list[Mismatch] = []
    for record in records:
        episodes += 1
        ep_id = str(record.get("episode_id"))
        key = str(record.get("run_key"))
        env = ChaosOpsEnvironment()
        try:
            env.reset(scenario=scenario_from_record(record))
        except (KeyError, ValueError, TypeError) as exc:
            mismatches.append(Mismatch(ep_id, key, 0, f"cannot rebuild the scenario: {exc}"))
            continue
        done = False
        for number, step in enumerate(record.get("steps") or (), start=1):
            steps += 1
            if done:
                mismatches.append(Mismatch(ep_id, key, number, "recorded after the episode ended"))
                break
            try:
                action = ChaosOpsAction.model_validate(step["action"])
            except (KeyError, ValueError) as exc:
                mismatches.append(Mismatch(ep_id, key, number, f"unreadable action: {exc}"))
                break
            if str(step.get("role")) != env.current_role.value:
                mismatches.append(
                    Mismatch(
                        ep_id,
                        key,
                        number,
                        f"role recorded {step.get('role')}, replayed {env.current_role.value}",
                    )
                )
            obs = env.step(action)
            recorded = float(step.get("reward", math.nan))
            replayed = float(obs.reward or 0.0)
            if not math.isclose(recorded, replayed, rel_tol=1e-9, abs_tol=1e-9):
                mismatches.append(
                    Mismatch(ep_id, key, number, f"reward recorded {recorded}, replayed {replayed}")
                )
            if bool(step.get("done")) != bool(obs.done):
                mismatches.append(
                    Mismatch(
                        ep_id, key, number, f"done recorded {step.get('done')}, replayed {obs.done}"
                    )
                )
            done = bool(obs.done)
        if record.get("status", "ok") != "ok":
            continue
        state = env.state
        final = len(record.get("steps") or ())
        if bool(record.get("resolved")) != bool(state.resolved):
            mismatches.append(
                Mismatch(
                    ep_id,
                    key,
                    final,
                    f"resolved recorded {record.get('resolved')}, replayed {state.resolved}",
                )
            )
        recorded_total = float(record.get("cumulative_reward", math.nan))
        if not math.isclose(recorded_total, state.cumulative_reward, rel_tol=1e-9, abs_tol=1e-9):
            mismatches.append(
                Mismatch(
                    ep_id,
                    key,
                    final,
                    f"cumulative reward recorded {recorded_total}, "
                    f"replayed {state.cumulative_reward}",
                )
            )
    return episodes, steps, mismatches


def cmd_replay(args: argparse.Namespace) -> int:
    """``chaosops replay``; returns the exit code (1 when anything differs)."""
    from chaosops.outputs import OutputError, read_results

    path = Path(args.results)
    if not path.exists():
        raise CLIError(
            f"no such results file or run folder: {args.results} "
            "(expected results.jsonl or a folder holding one)"
        )
    try:
        records, torn = read_results(path)
    except OutputError as exc:
        raise CLIError(str(exc), code=2 if exc.usage else 1) from None
    if torn:
        note("ignored a torn last line (the run was killed while writing it)")
    episodes, steps, mismatches = replay_records(records)
    for mismatch in mismatches:
        print(mismatch.line())
    bad = len({m.episode_id for m in mismatches})
    if mismatches:
        print(
            f"replay: {bad} of {episodes} episodes differ "
            f"({len(mismatches)} mismatches over {steps} steps)"
        )
        return 1
    print(f"replay: {episodes} episodes, {steps} steps, every reward matches")
    return 0

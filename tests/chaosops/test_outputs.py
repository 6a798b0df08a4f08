"""Unit tests of the crash-safe writers and of replay (no runner needed)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from chaosops.agents.llm import build_messages
from chaosops.agents.policies import heuristic_policy, oracle_policy
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import ChaosOpsEnvironment
from chaosops.env.models import FailureType
from chaosops.env.world_sim import Scenario
from chaosops.outputs import (
    OutputError,
    RunOutputs,
    plan_keys,
    read_results,
    scenario_from_record,
)
from chaosops.runs import Plan, PlannedEpisode, expand_episodes_per_type, replay_records


def play(scenario: Scenario, policy: Any, episode_id: str) -> SimpleNamespace:
    """A synchronous stand-in for the runner: an EpisodeResult-shaped object."""
    env = ChaosOpsEnvironment()
    obs = env.reset(scenario=scenario, episode_id=episode_id)
    steps = []
    turn = 0
    while not obs.done:
        role = obs.turn_role
        action = policy(obs, role)
        nxt = env.step(action)
        steps.append(
            SimpleNamespace(
                turn=turn,
                role=role,
                observation=obs,
                action=action.model_copy(update={"role": role}),
                reward=nxt.reward,
                breakdown=env.last_breakdown,
                done=nxt.done,
                timed_out=False,
                error=None,
                latency_s=0.0,
                info={"token_ids": [1, 2]} if turn == 0 else {},
            )
        )
        obs = nxt
        turn += 1
    state = env.state
    return SimpleNamespace(
        scenario=scenario,
        steps=steps,
        resolved=state.resolved,
        final_step=state.step_count,
        cumulative_reward=state.cumulative_reward,
        wrong_fixes=state.wrong_fixes,
        oversight_flags=list(state.oversight_flags),
        declared_root_cause=state.declared_root_cause,
        mttr_steps=state.step_count if state.resolved else -1,
        terminated=state.resolved,
        truncated=not state.resolved,
        episode_id=episode_id,
        status="ok",
        error=None,
        timeouts=0,
        errors=0,
        wall_s=0.01,
    )


def lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    return [orjson.loads(line) for line in data.splitlines()]


SCENARIOS = scenarios_for_tier("hard", episodes_per_type=1)


def write_all(
    out: Path, scenarios: list[Scenario], *, resume: bool = False, fsync: bool = False
) -> RunOutputs:
    keys = plan_keys("heuristic", scenarios)
    outputs = RunOutputs(out, keys=keys, resume=resume, fsync=fsync)
    with outputs:
        for i, (scenario, key) in enumerate(zip(scenarios, keys, strict=True)):
            if outputs.state.done and outputs.state.done[i]:
                continue
            result = play(scenario, heuristic_policy(scenario.seed), f"ep-{i}")
            outputs.write_episode(result, policy="heuristic", key=key, render=build_messages)
    return outputs


def test_results_and_trajectories(tmp_path: Path) -> None:
    outputs = write_all(tmp_path, SCENARIOS)
    results = lines(outputs.results_path)
    trajectories = lines(outputs.trajectories_path)
    assert [r["episode_id"] for r in results] == [f"ep-{i}" for i in range(len(SCENARIOS))]
    assert sum(len(r["steps"]) for r in results) == len(trajectories)
    first = trajectories[0]
    assert first["prompt"][0]["role"] == "system" and "ChaosOps" in first["prompt"][1]["content"]
    answer = {k: first["action"][k] for k in ("action_type", "target", "args")}
    assert orjson.loads(first["completion"]) == answer
    assert first["token_ids"] == [1, 2]
    assert {"team_reward", "oversight_reward", "run_key", "turn", "step"} <= first.keys()
    assert scenario_from_record(results[0]) == SCENARIOS[0]


def test_fsync_syncs_both_files_after_every_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    write_all(tmp_path / "plain", SCENARIOS[:2])
    assert synced == []
    write_all(tmp_path / "synced", SCENARIOS[:2], fsync=True)
    # after every episode: its trajectory lines, then its results line
    assert len(synced) == 4 and synced[0] == synced[2] != synced[1] == synced[3]


def test_refuses_existing_run_without_resume(tmp_path: Path) -> None:
    write_all(tmp_path, SCENARIOS[:1])
    with pytest.raises(OutputError, match=r"already holds results\.jsonl") as info:
        RunOutputs(tmp_path).open()
    # the library says what is wrong; the command adds what to do (--resume)
    assert info.value.usage and info.value.reason == "holds-a-run"
    assert "--" not in str(info.value)


def test_unwritable_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match=r"not a folder|cannot create"):
        RunOutputs(blocker / "out").open()


def test_a_timed_out_turn_records_no_completion_and_no_answer_tokens() -> None:
    """An answer that came in just after the deadline was annotated on the turn,
    but the fallback was applied: the training record must not pair them."""
    from chaosops.outputs import trajectory_records

    result = play(SCENARIOS[0], heuristic_policy(0), "late")
    late = {"completion": '{"action_type": "restart"}', "token_ids": [5, 6], "tokens": ["a"],
            "logprobs": [-0.1], "parse_error": None, "prompt": [{"role": "user"}],
            "usage": {"prompt_tokens": 9}, "prompt_token_ids": [1],
            "finish_reason": "stop", "model": "m"}  # fmt: skip
    result.steps[0].timed_out, result.steps[0].info = True, late
    result.steps[1].info = dict(late)  # the same annotations on a turn in time
    first, second = trajectory_records(result, policy="llm", key="k")[:2]
    assert first["timed_out"] and first["completion"] is None
    assert first["token_ids"] is first["tokens"] is first["logprobs"] is None
    assert first["finish_reason"] is first["model"] is None
    assert first["prompt"] == late["prompt"] and first["usage"] == late["usage"]
    assert first["prompt_token_ids"] == [1]
    assert second["completion"] == late["completion"] and second["token_ids"] == [5, 6]


def test_every_trajectory_record_has_the_same_keys() -> None:
    """A column store takes its columns from the first rows (datasets' JSON
    loader from a file's first block, ``Dataset.from_list`` from its first
    record): scripted turns, LLM turns with and without token data, a timed-out
    turn and a turn whose prompt could not be rendered have the same keys, and a
    prompt is a list of messages or null, never a text."""
    from chaosops.outputs import trajectory_records

    scripted = play(SCENARIOS[0], heuristic_policy(0), "scripted")
    llm = play(SCENARIOS[0], heuristic_policy(0), "llm")
    answer = {"prompt": [{"role": "user", "content": "view"}], "completion": "{}",
              "tokens": ["{}"], "logprobs": [-0.1], "usage": {"prompt_tokens": 1},
              "parse_error": "no action_type", "prompt_token_ids": [3],
              "finish_reason": "length", "model": "m"}  # fmt: skip
    llm.steps[1].info = answer
    llm.steps[2].info, llm.steps[2].timed_out = dict(answer), True

    def broken(obs: Any, role: Any) -> Any:
        raise ValueError("a renderer bug")

    records = [
        *trajectory_records(scripted, policy="heuristic", key="k", render=build_messages),
        *trajectory_records(llm, policy="llm", key="k", render=build_messages),
    ]
    unrendered = trajectory_records(scripted, policy="heuristic", key="k", render=broken)
    assert len(records) > 4 and len({tuple(r) for r in records + unrendered}) == 1
    assert all(isinstance(r["prompt"], list) for r in records)
    assert all(r["prompt"] is None for r in unrendered)
    assert records[0]["token_ids"] == [1, 2] and records[1]["token_ids"] is None
    assert records[1]["usage"] is records[1]["parse_error"] is None
    # what a trainer filters on (a completion cut at max_tokens), and who answered
    answered = [r for r in records if r["policy"] == "llm" and r["finish_reason"] is not None]
    assert [(r["finish_reason"], r["model"]) for r in answered] == [("length", "m")]
    assert all(r["model"] is None for r in records if r["policy"] == "heuristic")


def test_one_writer_per_folder(tmp_path: Path) -> None:
    pytest.importorskip("fcntl")  # POSIX flock; elsewhere there is no lock
    first = RunOutputs(tmp_path / "out")
    first.open()
    try:
        for resume in (False, True):
            with pytest.raises(OutputError, match="in use by another chaosops run") as info:
                RunOutputs(tmp_path / "out", resume=resume).open()
            assert info.value.usage
    finally:
        first.close()
    second = RunOutputs(tmp_path / "out", resume=True)  # the lock went with close()
    second.open()
    second.close()


def test_a_failed_write_names_the_file(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full (Linux)")
    outputs = RunOutputs(tmp_path / "out")
    outputs.open()
    try:
        outputs._results.close()
        outputs._results = open("/dev/full", "ab", buffering=0)  # a disk that is full
        with pytest.raises(OSError, match="No space left") as info:
            outputs.write_episode(
                play(SCENARIOS[1], heuristic_policy(0), "e1"), policy="heuristic", key="k"
            )
        assert info.value.filename == "/dev/full"
    finally:
        outputs.close()


@pytest.mark.parametrize("args", [b"", b'"args": "' + b"x" * 200_000], ids=["short", "200KB"])
def test_resume_repairs_torn_lines_and_orphan_trajectories(tmp_path: Path, args: bytes) -> None:
    clean = write_all(tmp_path / "clean", SCENARIOS)
    partial = write_all(tmp_path / "partial", SCENARIOS[:2])
    # a killed run: trajectory lines of a third episode, a torn results line
    # (also one longer than a block the repair reads backwards)
    orphan = play(SCENARIOS[2], heuristic_policy(0), "orphan")
    with partial.trajectories_path.open("ab") as handle:
        handle.write(b'{"episode_id": "orphan", "turn": 0}\n{"episode_id": "orp')
    with partial.results_path.open("ab") as handle:
        handle.write(b'{"run_key": "heuristic/x", ' + args + b'"ste')
    assert orphan.steps
    resumed = write_all(tmp_path / "partial", SCENARIOS, resume=True)
    assert resumed.state.torn_results_line
    assert resumed.state.dropped_trajectory_lines == 2
    got = lines(resumed.results_path)
    want = lines(clean.results_path)
    assert [r["run_key"] for r in got] == [r["run_key"] for r in want]
    strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_s"} for r in rs]  # noqa: E731
    assert strip(got) == strip(want)
    assert lines(resumed.trajectories_path) == lines(clean.trajectories_path)


def test_duplicate_scenarios_get_distinct_keys() -> None:
    keys = plan_keys("random", [SCENARIOS[0], SCENARIOS[1], SCENARIOS[0]])
    assert len(set(keys)) == 3 and keys[0].endswith("#0") and keys[2].endswith("#1")


def test_read_results_reports_damaged_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"run_key": "a", "steps": []}\nnot json\n{"run_key": "b", "steps": []}\n')
    with pytest.raises(OutputError, match="line 2"):
        read_results(path)
    path.write_bytes(b'{"run_key": "a", "steps": []}\n{"run_k')
    records, torn = read_results(path)
    assert torn and len(records) == 1


def test_replay_matches_and_detects_tampering(tmp_path: Path) -> None:
    outputs = write_all(tmp_path, SCENARIOS)
    records = lines(outputs.results_path)
    episodes, steps, mismatches = replay_records(records)
    assert episodes == len(SCENARIOS) and steps > 0 and mismatches == []
    victim = next(r for r in records if len(r["steps"]) >= 3)
    victim["steps"][2]["reward"] += 1.0
    _, _, mismatches = replay_records(records)
    assert [(m.episode_id, m.step) for m in mismatches][:1] == [(victim["episode_id"], 3)]
    # an action pydantic cannot read: one line naming the field and the value
    victim["steps"][1]["action"]["action_type"] = "explode"
    _, _, mismatches = replay_records(records)
    [unreadable] = [m for m in mismatches if "unreadable" in m.what]
    assert unreadable.step == 2 and "\n" not in unreadable.line()
    assert "action_type: Input should be" in unreadable.what and "'explode'" in unreadable.what


def test_episodes_per_type_matches_scenarios_for_tier() -> None:
    planned = Plan.listing(
        PlannedEpisode(s) for s in scenarios_for_tier("medium", episodes_per_type=5)
    )
    got = [p.scenario for p in expand_episodes_per_type(planned, 2, seed_offset=7)]
    assert got == scenarios_for_tier("medium", episodes_per_type=2, seed_offset=7)
    custom = Plan.listing(
        [PlannedEpisode(Scenario.from_type(FailureType.DNS_OUTAGE, seed=5, difficulty="hard"))]
    )
    [only] = expand_episodes_per_type(custom, 1)
    assert only.scenario.seed == 97 * 4  # after the hard pool's four failures


def test_oracle_record_roundtrip(tmp_path: Path) -> None:
    scenario = SCENARIOS[3]
    result = play(scenario, oracle_policy(scenario.failure_type), "o")
    assert result.resolved
    outputs = RunOutputs(tmp_path)
    with outputs:
        record = outputs.write_episode(result, policy="oracle", key="k")
    assert record["resolved"] and record["mttr_steps"] == record["final_step"]
    assert read_results(tmp_path) == ([record], False)


def test_a_prompt_that_fails_to_render_is_logged_once_per_episode() -> None:
    import structlog

    from chaosops.outputs import trajectory_records

    def broken(obs: Any, role: Any) -> Any:
        if obs.step >= 1:  # the first turn renders, the others do not
            raise ValueError("a renderer bug")
        return build_messages(obs, role)

    played = [play(SCENARIOS[0], heuristic_policy(0), f"ep{i}") for i in range(2)]
    with structlog.testing.capture_logs() as captured:
        for result in played:
            trajectory_records(result, policy="heuristic", key="k", render=broken)
        trajectory_records(played[0], policy="heuristic", key="k", render=build_messages)
    assert [(e["event"], e["log_level"], e["episode_id"]) for e in captured] == [
        ("prompt_render_failed", "warning", "ep0"),
        ("prompt_render_failed", "warning", "ep1"),
    ]
    turns = [s.turn for s in played[0].steps if s.observation.step >= 1]
    assert len(turns) >= 2 and captured[0]["turns"] == turns
    kind, exc, traceback = captured[0]["exc_info"]
    assert kind is ValueError and str(exc) == "a renderer bug" and traceback is not None


def test_a_lone_surrogate_in_an_answer_is_escaped_not_fatal(tmp_path: Path) -> None:
    # json.loads of an LLM's answer may give a string with a lone surrogate,
    # which no JSON encoder writes: the trajectory and results lines are
    # written with it escaped, and the run's files stay readable.
    from chaosops.env.models import ActionType, ChaosOpsAction
    from chaosops.outputs import dumps_line, trajectory_records

    odd = json.loads('"db\\ud800"')
    result = play(SCENARIOS[0], heuristic_policy(0), "odd")
    step = result.steps[0]
    step.action = ChaosOpsAction(role=step.role, action_type=ActionType.RESTART, target=odd)
    step.info = {"completion": '{"target": "' + odd + '"}', "token_ids": [1]}
    records = trajectory_records(result, policy="llm", key="k")
    line = orjson.loads(dumps_line(records[0]))
    assert line["action"]["target"] == "db\\ud800"
    assert line["completion"] == '{"target": "db\\ud800"}'
    outputs = RunOutputs(tmp_path / "run", resume=False)
    with outputs:
        outputs.write_episode(result, policy="llm", key="k")
    [written] = lines(outputs.results_path)
    assert written["steps"][0]["action"]["target"] == "db\\ud800"
    assert len(lines(outputs.trajectories_path)) == len(result.steps)


def test_lines_of_two_episodes_under_one_key_run_that_episode_again(tmp_path: Path) -> None:
    write_all(tmp_path, SCENARIOS)
    key = plan_keys("heuristic", SCENARIOS)[1]
    # another episode's line under the key of a finished one (two writers: not
    # ours to pick which is whole): that episode runs again, the others stay
    stranger = {"episode_id": "stranger", "run_key": key, "step": 1}
    with (tmp_path / "trajectories.jsonl").open("ab") as handle:
        handle.write(orjson.dumps(stranger) + b"\n")
    resumed = RunOutputs(tmp_path, keys=plan_keys("heuristic", SCENARIOS), resume=True)
    with resumed:
        assert resumed.state.damaged_episodes == 1
        assert list(resumed.state.done) == [1, 0] + [1] * (len(SCENARIOS) - 2)
    kept = {r["episode_id"] for r in lines(resumed.trajectories_path)}
    assert "ep-1" not in kept and "stranger" not in kept and "ep-0" in kept


def test_a_results_line_outside_the_plan_is_refused(tmp_path: Path) -> None:
    write_all(tmp_path, SCENARIOS)
    with pytest.raises(OutputError, match="does not hold") as info:
        RunOutputs(tmp_path, keys=plan_keys("heuristic", SCENARIOS[:2]), resume=True).open()
    assert info.value.usage
    assert len(lines(tmp_path / "results.jsonl")) == len(SCENARIOS)  # nothing lost

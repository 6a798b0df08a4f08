"""What an LLM answers, read honestly, through the installed command against
the mock in each answer mode and each way of answering badly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ._cli import chaosops, jsonl, llm_run, mock_process


def _run_against(
    work: Path, name: str, mock_options: tuple[str, ...], *options: str
) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the tiny suite (2 episodes) with the LLM policy against a mock of its
    own: (the process, the requests the mock received, results, trajectories)."""
    record = work / f"{name}-requests.jsonl"
    out = work / name
    with mock_process(work, "--record", str(record), *mock_options) as url:
        proc = chaosops(*llm_run(work, url, out, "--episodes-per-type", "1", *options), cwd=work)
    # 1: a run whose LLM never gave a legal move says so and fails
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    trajectories = jsonl(out / "trajectories.jsonl")
    return proc, jsonl(record), jsonl(out / "results.jsonl"), trajectories


@pytest.mark.parametrize("mode", ["json", "json_object"])
def test_json_answers_ask_for_the_action_s_schema(work: Path, mode: str) -> None:
    _, asked, _, steps = _run_against(work, f"answer-{mode}", (), "--llm-answer", mode)
    formats = [r["response_format"] for r in asked[1:]]  # after the probe
    if mode == "json":  # OpenAI's and vLLM's form
        assert all(f["type"] == "json_schema" for f in formats)
        schemas = [f["json_schema"]["schema"] for f in formats]
    else:  # llama-cpp-python's
        assert all(f["type"] == "json_object" for f in formats)
        schemas = [f["schema"] for f in formats]
    assert all(v["properties"]["action_type"]["enum"] for s in schemas for v in s["anyOf"])
    assert all("tools" not in r for r in asked)
    assert steps and not [s for s in steps if s["parse_error"]]


def test_tool_answers_name_the_tool_and_are_recorded_as_tool_calls(work: Path) -> None:
    _, asked, _, steps = _run_against(work, "answer-tools", (), "--llm-answer", "tools")
    assert all(r["tool_choice"] == {"type": "function", "function": {"name": "take_action"}}
               for r in asked)  # fmt: skip
    assert all(r["tools"][0]["function"]["name"] == "take_action" for r in asked)
    asked = asked[1:]  # after the probe
    assert steps and not [s for s in steps if s["parse_error"]]
    for step in steps:
        (call,) = step["tool_calls"]
        assert call["name"] == "take_action" and '"action_type"' in call["arguments"]
        assert step["completion"] == call["arguments"]


@pytest.mark.parametrize(
    ("style", "needle"),
    [
        ("placeholder", "'<service, agent or null>'"),
        ("junk-args", "'please'"),
        ("cut", "answer cut at the token limit (finish_reason length)"),
    ],
)
def test_an_answer_that_is_no_action_for_the_view_plays_the_fallback(
    work: Path, style: str, needle: str
) -> None:
    proc, _, results, steps = _run_against(
        work, f"bad-{style}", ("--answer-style", style), "--llm-answer", "text"
    )
    assert steps and all(needle in s["parse_error"] for s in steps), steps[0]["parse_error"]
    assert all(s["action"]["action_type"] == "noop" for s in steps)
    assert all(r["wrong_fixes"] == 0 for r in results)  # never applied as a wrong fix
    assert f"{len(steps)} answer(s) could not be read" in proc.stderr


def test_a_tool_call_cut_short_says_so(work: Path) -> None:
    _, _, _, steps = _run_against(
        work, "cut-tools", ("--answer-style", "cut"), "--llm-answer", "tools"
    )  # the mock keeps to the schema, then cuts the call in half
    assert steps and all(
        s["parse_error"].startswith("tool call arguments end early") for s in steps
    ), steps[0]["parse_error"]


def test_top_logprobs_are_recorded_and_missing_logprobs_said_once(work: Path) -> None:
    _, _, _, steps = _run_against(work, "top-logprobs", (), "--llm-top-logprobs", "2")
    assert steps  # the loop below checks something
    for step in steps:
        assert len(step["top_logprobs"]) == len(step["logprobs"]) > 0
        assert all(len(alternatives) == 2 for alternatives in step["top_logprobs"])
        assert {"token", "logprob"} == set(step["top_logprobs"][0][0])
    proc, _, _, steps = _run_against(work, "null-logprobs", ("--null-logprobs",), "--llm-logprobs")
    notes = [line for line in proc.stderr.splitlines() if "without the logprobs" in line]
    assert notes == [
        f"chaosops: {len(steps)} answer(s) of chaosops-mock came without the logprobs asked "
        "for: the server returned none"
    ]


def test_the_role_prompt_folded_into_the_first_user_message(work: Path) -> None:
    _, asked, _, steps = _run_against(work, "user-prompt", (), "--llm-system-prompt", "user")
    assert asked and all(m["role"] != "system" for r in asked for m in r["messages"])
    asked = asked[1:]  # after the probe
    first = asked[0]["messages"][0]
    assert first["role"] == "user" and first["content"].startswith("You are the **SRE**")
    assert "## ANSWER" in first["content"]
    assert [s["prompt"] for s in steps] == [r["messages"] for r in asked]  # exactly as sent

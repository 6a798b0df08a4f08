"""Answer formats negotiated with the server, each turn's schema of legal moves,
and legal moves counted: the installed command against the mock, taught to
refuse forms as real servers do and to answer only within the schema it is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator

from ._cli import assert_one_error_line, chaosops, jsonl, llm_run, mock_process, viewed_page

HARD = ("--tier", "hard", "--episodes-per-type", "1")


def _run(work: Path, name: str, mock: tuple[str, ...], *options: str) -> tuple[Any, Path, list]:
    """A run against a mock of its own: (the process, its folder, the requests received)."""
    record, out = work / f"{name}-requests.jsonl", work / name
    with mock_process(work, "--record", str(record), *mock) as url:
        args = llm_run(work, url, out, *options)
        args.remove("tiny.toml")
        proc = chaosops(*args, cwd=work)
    return proc, out, jsonl(record) if record.exists() else []


def _schema(request: dict[str, Any]) -> dict[str, Any]:
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    if fmt.get("type") == "json_object":
        return fmt["schema"]
    return request["tools"][0]["function"]["parameters"]


def _kinds(schema: dict[str, Any]) -> set[str]:
    return {v["properties"]["action_type"]["enum"][0] for v in schema["anyOf"]}


def test_auto_takes_the_strongest_format_the_server_accepts_and_says_so(work: Path) -> None:
    proc, out, asked = _run(work, "auto", ("--refuse", "json_schema"), *HARD)
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if "answer format:" in line]
    assert "answers in json_object (json refused (HTTP 500: " in line
    assert "Input should be 'text' or 'json_object'" in line
    # the probes first (json refused, json_object taken), then every turn in json_object
    formats = [r["response_format"]["type"] for r in asked]
    assert formats[:2] == ["json_schema", "json_object"] and set(formats[2:]) == {"json_object"}
    recorded = orjson.loads((out / "run.json").read_bytes())["llms"]["llm"]
    assert (recorded["answer"], recorded["negotiated"]) == ("auto", "json_object")
    results = jsonl(out / "results.jsonl")
    assert all(role["answer"] == "json_object" for r in results for role in r["roles"].values())
    assert "llm (chaosops-mock, json_object)" in proc.stdout


def test_every_answer_keeps_within_its_turn_s_schema_of_legal_moves(work: Path) -> None:
    # random sre and dev keep the incidents open long enough for every role to play
    scripted = ("--role-policy", "sre=random", "--role-policy", "dev=random")
    proc, out, asked = _run(work, "enforced", (), *HARD, "--llm-answer", "json", *scripted)
    assert proc.returncode == 0, proc.stderr
    steps = [s for s in jsonl(out / "trajectories.jsonl") if s["role"] in ("oversight", "manager")]
    turns = asked[1:]  # the first request is the probe
    assert steps and len(turns) == len(steps)
    by_prompt = {orjson.dumps(r["messages"]): _schema(r) for r in turns}
    offered: dict[str, set[str]] = {}
    for step in steps:
        schema = by_prompt[orjson.dumps(step["prompt"])]
        answer = orjson.loads(step["completion"])
        assert Draft202012Validator(schema).is_valid(answer), (step["role"], answer)
        offered.setdefault(step["role"], set()).update(_kinds(schema))
    assert "flag_rogue" in offered["oversight"] and "resolve" not in offered["oversight"]
    assert "resolve" in offered["manager"] and "flag_rogue" not in offered["manager"]
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert all(r["legal"] == r["turns"] > 0 for r in summary["roles"])


def test_a_named_format_the_server_refuses_is_one_line_naming_its_reason(work: Path) -> None:
    proc, out, _ = _run(work, "refused-json", ("--refuse", "json_schema"), *HARD,
                        "--llm-answer", "json")  # fmt: skip
    assert_one_error_line(proc, "--llm-answer json:", "HTTP 500", "Input should be 'text'",
                          "use auto")  # fmt: skip
    assert proc.returncode == 2 and not out.exists()
    proc, _, _ = _run(work, "refused-tools", ("--refuse", "tools"), *HARD, "--llm-answer", "tools")
    assert_one_error_line(proc, "--llm-answer tools:", "HTTP 400", "'tools' is not supported")
    assert proc.returncode == 2


def test_tools_carry_the_turn_s_schema_and_text_is_never_probed(work: Path) -> None:
    proc, _, asked = _run(work, "tools", (), *HARD, "--llm-answer", "tools")
    assert proc.returncode == 0, proc.stderr
    assert all(r["tools"][0]["function"]["parameters"]["anyOf"] for r in asked)
    proc, _, asked = _run(work, "text", (), *HARD, "--llm-answer", "text", "--limit", "1")
    assert proc.returncode == 0, proc.stderr
    assert "answers in text" in proc.stderr
    assert asked and not [r for r in asked if "response_format" in r or "tools" in r]


def test_legal_moves_are_counted_and_a_run_with_none_fails(work: Path) -> None:
    proc, out, _ = _run(work, "placeholders", ("--answer-style", "placeholder"), *HARD,
                        "--llm-answer", "text", "--limit", "2")  # fmt: skip
    assert proc.returncode == 1
    roles = orjson.loads((out / "summary.json").read_bytes())["roles"]
    assert roles and all(r["legal"] == 0 and r["parse_errors"] == r["turns"] > 0 for r in roles)
    notes = [line for line in proc.stderr.splitlines() if "never played a move of its own" in line]
    assert len(notes) == len(roles)
    assert "the sre (llm (chaosops-mock)) never played a move of its own" in notes[0]
    results = jsonl(out / "results.jsonl")
    assert all(s["parse_error"] for r in results for s in r["steps"])
    assert " 0% " in proc.stdout  # the table's legal column
    _, page = viewed_page(work, out)
    assert "legal moves" in page and '<td class="num">0%</td>' in page

"""An applied turn's recorded latency is within its deadline, in every output."""

from __future__ import annotations

import json
from pathlib import Path

from ._cli import chaosops, jsonl, llm_run, mock_process


def test_applied_turns_record_a_latency_within_their_deadline(work: Path) -> None:
    """A model answering in 60 to 400 ms under a 250 ms deadline, eight episodes
    in flight: the turns answered in time are applied, and each one's
    latency_ms (results and the log) is below 250; the late ones are fallbacks
    marked timed_out. (The spread leaves answers near the deadline on an idle
    machine, and some within it on a loaded one.)"""
    out = work / "latency"
    log = work / "latency.jsonl"
    with mock_process(work, "--latency", "uniform:60-400ms") as url:
        args = llm_run(work, url, out, "--turn-timeout", "0.25", "--log-json", str(log),
                       "--llm-max-failures", "0")  # fmt: skip
        args[args.index("--concurrency") + 1] = "8"
        proc = chaosops(*args, cwd=work)
    # a role whose every turn came late fails the run (exit 1), its results kept
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    steps = [step for row in jsonl(out / "results.jsonl") for step in row["steps"]]
    applied = [s for s in steps if not s["timed_out"] and s["latency_ms"] > 50]
    assert applied, "no model turn was answered within its deadline"
    assert max(s["latency_ms"] for s in applied) < 250.0
    events = [json.loads(line) for line in log.read_text().splitlines()]
    turns = [e for e in events if e.get("event") == "turn" and not e["timed_out"]]
    llm_turns = [e for e in turns if e["latency_ms"] > 50]
    assert llm_turns and max(e["latency_ms"] for e in llm_turns) < 250.0

"""The cost of a turn through inspect_ai's task against ``chaosops run``'s runtime.

Both sides play the 55 canonical scenarios with every seat a model: the same
``chaosops mock-llm`` (no latency) answers, 64 episodes and 64 requests in
flight at most. The inspect side is ``inspect_ai.eval`` of
``chaosops/incident`` through ``openai-api/`` (its log written too); the
runtime side is ``run_batch`` with one ``LLMPolicy``. The sides alternate in
one process, after a warm-up round each; the figure is the median of the
rounds' ms per turn, and of their ratios. Needs the inspect extra. Usage::

    python benchmarks/harness_turns.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from inspect_ai import eval as inspect_eval
from llm_mock import MODEL, mock_server

from chaosops.agents.llm import LLMPolicy
from chaosops.agents.runner import run_batch
from chaosops.env.models import AgentRole
from chaosops.inspect import incident, scenarios_of

IN_FLIGHT = 64


def _inspect_side(url: str, logs: str) -> tuple[float, int]:
    os.environ.update(MOCK_BASE_URL=url, MOCK_API_KEY="EMPTY")
    started = time.perf_counter()
    [log] = inspect_eval(
        incident(models="all"), model=f"openai-api/mock/{MODEL}", log_dir=logs,
        display="none", max_samples=IN_FLIGHT, max_connections=IN_FLIGHT,
    )  # fmt: skip
    wall = time.perf_counter() - started
    turns = sum(len(s.metadata["chaosops"]["steps"]) for s in log.samples or ())
    return wall, turns


def _runtime_side(url: str) -> tuple[float, int]:
    policy = LLMPolicy(MODEL, base_url=url, max_in_flight=IN_FLIGHT)
    started = time.perf_counter()
    results = run_batch(scenarios_of(), dict.fromkeys(AgentRole, policy), concurrency=IN_FLIGHT)
    wall = time.perf_counter() - started
    return wall, sum(len(r.steps) for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    per_turn: dict[str, list[float]] = {"inspect": [], "runtime": []}
    with mock_server(0.0) as (url, _), tempfile.TemporaryDirectory() as logs:
        _inspect_side(url, logs), _runtime_side(url)  # warm-up: imports, connections
        for _ in range(rounds):
            for side, play in (("inspect", lambda: _inspect_side(url, logs)),
                               ("runtime", lambda: _runtime_side(url))):  # fmt: skip
                wall, turns = play()
                per_turn[side].append(wall / turns * 1e3)
    ratios = [a / b for a, b in zip(per_turn["inspect"], per_turn["runtime"], strict=True)]
    for side, values in per_turn.items():
        print(f"{side:8} {statistics.median(values):7.3f} ms per turn (median of {rounds})")
    print(f"inspect / runtime: {statistics.median(ratios):.2f}x (median of the rounds' ratios)")


if __name__ == "__main__":
    main()

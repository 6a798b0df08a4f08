"""The cost of a turn through verifiers' ``vf-eval`` against ``chaosops run``.

Both sides play the 55 canonical scenarios 20 times each (``-r 20``,
``--samples 20``) with every seat a model, against the same ``chaosops
mock-llm`` (no latency), 64 episodes in flight at most. Each side is its
installed command, started afresh every round, so both figures include a
process's start. The sides alternate, after a warm-up
round each; the figure is the median of the rounds' ms per turn, and of
their ratios. Runs in the verifiers environment (README: ``.venv-vf``)::

    .venv-vf/bin/python benchmarks/harness_turns_vf.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
IN_FLIGHT = "64"
REPEATS = "20"
MODEL = "chaosops-mock"


def _timed(command: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "MOCK_KEY": "unused"})  # fmt: skip
    return time.perf_counter() - started


def _verifiers_side(url: str, cwd: str) -> tuple[float, int]:
    out = Path(tempfile.mkdtemp(dir=cwd)) / "vf"
    wall = _timed([str(BIN / "vf-eval"), "chaosops-vf", "-m", MODEL, "--client.base-url", url,
                   "--client.api-key-var", "MOCK_KEY", "--env.models", "sre", "oversight",
                   "dev", "manager", "-c", IN_FLIGHT, "-r", REPEATS, "--no-push", "-o", str(out)],
                  cwd)  # fmt: skip
    (path,) = out.glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in path.read_text().splitlines()]
    return wall, sum(len(e["traces"][0]["info"]["chaosops"]["steps"]) for e in episodes)


def _runtime_side(url: str, cwd: str) -> tuple[float, int]:
    out = Path(tempfile.mkdtemp(dir=cwd)) / "run"
    wall = _timed([str(BIN / "chaosops"), "run", "--policy", "llm", "--llm-base-url", url,
                   "--llm-model", MODEL, "--samples", REPEATS, "--concurrency", IN_FLIGHT,
                   "--llm-max-in-flight", IN_FLIGHT, "--no-progress", "--out", str(out)],
                  cwd)  # fmt: skip
    lines = (out / "results.jsonl").read_text().splitlines()
    return wall, sum(len(json.loads(line)["steps"]) for line in lines)


def _mock(cwd: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([str(BIN / "chaosops"), "mock-llm", "--port", "0", "--model", MODEL],
                            cwd=cwd, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split(" at ", 1)[1].split()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    per_turn: dict[str, list[float]] = {"verifiers": [], "runtime": []}
    with tempfile.TemporaryDirectory() as cwd:
        mock, url = _mock(cwd)
        try:
            _verifiers_side(url, cwd), _runtime_side(url, cwd)  # warm-up: caches, bytecode
            for _ in range(rounds):
                for side, play in (("verifiers", _verifiers_side), ("runtime", _runtime_side)):
                    wall, turns = play(url, cwd)
                    per_turn[side].append(wall / turns * 1e3)
                    print(f"{side:9} {turns} turns in {wall:.2f} s", flush=True)
        finally:
            mock.terminate()
            mock.wait()
    ratios = [a / b for a, b in zip(per_turn["verifiers"], per_turn["runtime"], strict=True)]
    for side, values in per_turn.items():
        print(f"{side:9} median {statistics.median(values):.2f} ms a turn")
    print(f"ratio     median {statistics.median(ratios):.1f}x (verifiers / runtime)")


if __name__ == "__main__":
    main()

"""LLMPolicy in the synchronous runner API: what it opened in a run's event
loop is closed with that loop, so the interpreter exits without aiohttp's
"Unclosed client session" warnings (checked in a process of its own)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
from chaosops.agents.llm import LLMPolicy
from chaosops.agents.runner import run_batch, run_episode
from chaosops.curriculum.generator import scenarios_for_tier
from chaosops.env.environment import DEFAULT_TURN_ORDER, ChaosOpsEnvironment
from chaosops.mock_llm import run_mock_llm_in_thread

with run_mock_llm_in_thread() as mock:
    policy = LLMPolicy("chaosops-mock", base_url=mock.base_url, history=1)
    scenarios = scenarios_for_tier("easy")[:2]
    shared = run_batch(scenarios, dict.fromkeys(DEFAULT_TURN_ORDER, policy))
    fresh = run_batch(scenarios, lambda sc: dict.fromkeys(DEFAULT_TURN_ORDER, policy.for_episode()))
    roles = dict.fromkeys(DEFAULT_TURN_ORDER, policy)
    one = run_episode(ChaosOpsEnvironment(), scenarios[0], roles)
    print(sum(r.resolved for r in [*shared, *fresh, one]))
"""


def test_sync_runs_close_what_the_llm_policy_opened() -> None:
    done = subprocess.run([sys.executable, "-X", "dev", "-c", SCRIPT], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5"
    assert "Unclosed" not in done.stderr, done.stderr

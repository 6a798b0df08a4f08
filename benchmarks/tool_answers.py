"""How long a tool's answer is, in tokens of the example's tokenizer: the
answers ChaosOpsToolEnv gives (the change since the role's last move) against
the whole view it gave before, over every canonical row and role, each move
the oracle's. Needs the train extra (the example's tokenizer). Usage::

    python benchmarks/tool_answers.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "examples"))
import train_grpo

from chaosops.agents.llm.answers import describe
from chaosops.agents.policies import oracle_policy
from chaosops.env.models import AgentRole, FailureType
from chaosops.train import call_tool, rows, tool_call
from chaosops.train.trl import ChaosOpsToolEnv


def answers() -> tuple[list[str], list[str], list[str]]:
    """Every reset text, tool answer, and the whole view the answer replaces."""
    resets, changes, wholes = [], [], []
    for role in AgentRole:
        for row in rows(role=role.value):
            oracle = oracle_policy(FailureType(row["failure_type"]))
            with ChaosOpsToolEnv() as env:
                resets.append(env.reset(**row))
                while not env.done:
                    move = oracle(env._world.play.observation, role)
                    changes.append(call_tool(env, tool_call(move)))
                    wholes.append(describe(env._world.play.observation, role))
    return resets, changes, wholes


def main() -> None:
    resets, changes, wholes = answers()
    sft_rows = train_grpo.oracle_demonstrations(Path(train_grpo.tempfile.mkdtemp()), 10_000)
    tokenizer = train_grpo.build_tokenizer(train_grpo.corpus_of(sft_rows))
    for name, texts in (("reset", resets), ("tool answer", changes), ("whole view", wholes)):
        counts = sorted(len(tokenizer(text)["input_ids"]) for text in texts)
        print(f"{name:12} {len(counts):4} texts: mean {statistics.mean(counts):6.1f} tokens, "
              f"p95 {counts[int(0.95 * len(counts))]:4}, max {counts[-1]:4}")  # fmt: skip


if __name__ == "__main__":
    main()

"""Which view-blind strategies earn a seat more credit than the oracle's moves:
every move of ``chaosops.train.pettingzoo.MOVES`` played every turn by one
seat, the heuristic in the others, on the 55 canonical rows. The credit is
the trainers' (the return less the seat's all-fallback return, a repeated
right declaration paid once). Usage::

    python benchmarks/constant_moves.py
"""

from __future__ import annotations

import statistics
from collections import Counter

from chaosops.agents.policies import oracle_policy, policies_for
from chaosops.agents.runner import run_batch
from chaosops.env.models import AgentRole, ChaosOpsAction
from chaosops.train import held_out_scenarios
from chaosops.train.pettingzoo import MOVES
from chaosops.train.trl import fallback_return, repaid

ROWS = held_out_scenarios()


def credits(role: AgentRole, make) -> list[float]:
    """The seat's credit on each row, ``make(scenario)`` its policy."""

    def players(scenario):
        return policies_for("heuristic", scenario) | {role: make(scenario)}

    results = run_batch(ROWS, players)
    return [r.cumulative_reward - repaid(r) - fallback_return("heuristic", sc, role)
            for r, sc in zip(results, ROWS, strict=True)]  # fmt: skip


def constant(move: dict):
    return lambda scenario: lambda obs, role: ChaosOpsAction(role=role, **move)


def label(move: dict) -> str:
    return " ".join(str(v) for v in (move["action_type"], move.get("target"),
                                     *(move.get("args") or {}).values()) if v)  # fmt: skip


def main() -> None:
    print("seat       oracle credit (mean) | constant moves above it on some row")
    for role in AgentRole:
        oracle = credits(role, lambda sc: oracle_policy(sc.failure_type))
        above = []
        for move in MOVES:
            mine = credits(role, constant(move))
            won = [sc for sc, a, b in zip(ROWS, mine, oracle, strict=True) if a > b + 1e-9]
            if won:
                kinds = Counter(str(sc.failure_type) for sc in won)
                mean = statistics.mean(mine)
                above.append(f"{label(move)}: mean {mean:+.1f}, above on {len(won)} rows "
                             f"({', '.join(sorted(kinds))})")  # fmt: skip
        print(f"{role.value:10} {statistics.mean(oracle):+20.1f} | {len(above)} moves")
        for line in above:
            print(f"{'':27}{line}")


if __name__ == "__main__":
    main()

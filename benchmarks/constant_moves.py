"""Which view-blind strategies earn a seat more credit than the seat's oracle:
every move of ``chaosops.train.pettingzoo.MOVES`` played every turn by one
seat, the heuristic in the others, on the 55 canonical rows. The oracle and
the credit are ``chaosops.train.oracle``'s: the best of the seat's knowing
plans, and the return less the seat's all-fallback return, a move the world
pays again counted once. Usage::

    python benchmarks/constant_moves.py
"""

from __future__ import annotations

import statistics
from collections import Counter

from chaosops.env.models import AgentRole, ChaosOpsAction
from chaosops.train import held_out_scenarios
from chaosops.train.oracle import seat_credits, seat_oracle_credits
from chaosops.train.pettingzoo import MOVES

ROWS = held_out_scenarios()


def constant(move: dict):
    return lambda scenario: lambda obs, role: ChaosOpsAction(role=role, **move)


def label(move: dict) -> str:
    return " ".join(str(v) for v in (move["action_type"], move.get("target"),
                                     *(move.get("args") or {}).values()) if v)  # fmt: skip


def main() -> None:
    print("seat       oracle credit (mean) | constant moves above it on some row")
    for role in AgentRole:
        oracle = seat_oracle_credits(ROWS, role)
        above = []
        for move in MOVES:
            mine = seat_credits(ROWS, role, constant(move))
            won = [sc for sc, a, b in zip(ROWS, mine, oracle, strict=True) if a > b + 1e-9]
            if won:
                kinds = Counter(str(sc.failure_type) for sc in won)
                above.append(f"{label(move)}: mean {statistics.mean(mine):+.1f}, above on "
                             f"{len(won)} rows ({', '.join(sorted(kinds))})")  # fmt: skip
        print(f"{role.value:10} {statistics.mean(oracle):+20.1f} | {len(above)} moves")
        for line in above:
            print(f"{'':27}{line}")


if __name__ == "__main__":
    main()

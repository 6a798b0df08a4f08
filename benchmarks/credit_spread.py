"""The signal each reward gives a trained role, on the canonical rows: the
team return and the role's credit when the role plays the oracle's moves,
against a legal noop every turn (and against stopping at once, which now
scores as the noop). The other roles are heuristic, as in
``ChaosOpsToolEnv``'s default. Usage::

    python benchmarks/credit_spread.py
"""

from __future__ import annotations

import statistics

from chaosops.agents.policies import oracle_policy
from chaosops.env.models import AgentRole, FailureType
from chaosops.train import call_tool, rows, tool_call
from chaosops.train.trl import ChaosOpsToolEnv, Outcome


def oracle_outcome(row: dict) -> Outcome:
    role = AgentRole(row["role"])
    oracle = oracle_policy(FailureType(row["failure_type"]))
    with ChaosOpsToolEnv() as env:
        env.reset(**row)
        while not env.done:
            call_tool(env, tool_call(oracle(env._world.play.observation, role)))
        return env.outcome


def stopped_outcome(row: dict) -> Outcome:
    with ChaosOpsToolEnv() as env:
        env.reset(**row)
        return env.outcome


def main() -> None:
    print(
        "role       rows  team return: oracle  noop/stop  spread | credit: oracle mean "
        "(min..max), rows > 0"
    )
    for role in AgentRole:
        table = rows(role=role.value)
        oracle = [oracle_outcome(row) for row in table]
        stopped = [stopped_outcome(row) for row in table]
        credits = [o.credit for o in oracle]
        team_o = statistics.mean(o.team_return for o in oracle)
        team_s = statistics.mean(o.team_return for o in stopped)
        print(
            f"{role.value:10} {len(table):4}  {team_o:+19.1f}  {team_s:+9.1f}  "
            f"{team_o - team_s:+6.1f} | {statistics.mean(credits):+6.1f} "
            f"({min(credits):+.0f}..{max(credits):+.0f}), {sum(c > 0 for c in credits)}"
        )


if __name__ == "__main__":
    main()

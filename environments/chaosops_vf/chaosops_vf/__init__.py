"""ChaosOps incidents in verifiers 0.4: the taskset ``chaosops-vf``.

    vf-eval chaosops-vf -m chaosops-mock --client.base-url http://127.0.0.1:8000/v1 \\
        --env.models sre dev --env.others heuristic --no-push

A task is one scenario of the canonical suites; an episode is played on
chaosops' runtime, which takes the turns. Each model seat is a verifiers
agent (``--env.sre``, ``--env.dev``...), whose turns go through the bundled
``ChaosOpsSeat`` harness; scripted teammates are chaosops policies; every
move goes through chaosops' judge. See README.md beside this package.
"""

from .env import ChaosOpsEnv, ChaosOpsEnvConfig
from .seat import ChaosOpsSeat, ChaosOpsSeatConfig
from .taskset import IncidentData, IncidentTask, IncidentTaskset, IncidentTasksetConfig

__all__ = [
    "ChaosOpsEnv",
    "ChaosOpsEnvConfig",
    "ChaosOpsSeat",
    "ChaosOpsSeatConfig",
    "IncidentData",
    "IncidentTask",
    "IncidentTaskset",
    "IncidentTasksetConfig",
]

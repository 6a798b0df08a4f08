"""ChaosOps in inspect_ai (the ``inspect`` extra): the task ``chaosops/incident``.

Registered through the ``inspect_ai`` entry point, so ``inspect eval
chaosops/incident`` finds it once chaosops is installed. The runtime takes the
turns: each model seat calls inspect's model under its deadline, and every
move goes through chaosops' judge (docs/harnesses.md).
"""

from __future__ import annotations

from chaosops._extras import require

require("inspect_ai", "inspect", "chaosops.inspect")

from .policy import InspectPolicy  # noqa: E402
from .scorer import figures_of, incident_figures, mean_where_counted, resolved  # noqa: E402
from .solver import RECORD, play_incident  # noqa: E402
from .task import incident, scenarios_of  # noqa: E402

__all__ = [
    "RECORD",
    "InspectPolicy",
    "figures_of",
    "incident",
    "incident_figures",
    "mean_where_counted",
    "play_incident",
    "resolved",
    "scenarios_of",
]

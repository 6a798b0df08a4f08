"""What the run engine asks of a model policy, whatever plays the model (an
endpoint, a checkpoint in this process): the protocols each kind's policy
and settings declare (``chaosops.runs.kinds``), checked for every kind by the
suite. Nothing else of a model policy is read by name.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from chaosops.env.models import AgentRole, ChaosOpsAction, ChaosOpsObservation

__all__ = ["ModelPolicy", "ModelSettings"]


@runtime_checkable
class ModelSettings(Protocol):
    """A kind's settings: a frozen dataclass whose fields are the run file's
    ``[KIND.NAME]`` keys; ``model`` names the model in records and messages."""

    @property
    def model(self) -> str: ...


@runtime_checkable
class ModelPolicy(Protocol):
    """A model policy, shared by every episode of a run.

    ``failures_in_a_row`` counts the calls that failed for good since the last
    answer and ``last_failure`` says why the latest did, in a line naming the
    model: the run's ``--model-max-failures`` stops on them. ``calls`` says in
    that line what one call is ("LLM calls"). ``notes()`` are the closing
    lines a run prints of the model (how its turns were batched, what its
    server left out). ``for_episode()`` is the policy one episode plays (the
    policy itself, or a copy with the episode's memory); ``aclose()`` closes
    what the current event loop holds.
    """

    failures_in_a_row: int
    last_failure: str | None
    calls: str

    @property
    def model(self) -> str: ...

    @property
    def settings(self) -> ModelSettings: ...

    def notes(self) -> list[str]: ...

    def for_episode(self) -> Any: ...

    async def aclose(self) -> None: ...

    async def __call__(self, obs: ChaosOpsObservation, role: AgentRole | str) -> ChaosOpsAction: ...

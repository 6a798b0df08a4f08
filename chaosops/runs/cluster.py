"""``ray`` and ``workers``: the command connected to a Ray cluster
(see :mod:`actors.cluster`), or refused in one line."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from actors.cluster import ClusterError, RayMissing, connect, import_ray

from .config import RunConfig
from .errors import RESUME, Named, RunError, first_of
from .policies import PolicyRecipe

_RAY = Named("ray")


@contextmanager
def on_cluster(config: RunConfig) -> Iterator[RunConfig]:
    """``config`` for the block, connected to its cluster when it names one, with
    ``workers`` settled (one per CPU of the cluster unless given)."""
    if config.ray is None:
        if config.workers is not None:
            raise RunError(Named("workers"), " needs ", _RAY, " (local, auto or HOST:PORT)")
        yield config
        return
    try:
        import_ray()
    except RayMissing as exc:
        raise RunError(_RAY, f": {exc}; or run without ", _RAY) from None
    try:
        with connect(config.ray) as ray:
            workers = config.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
            yield dataclasses.replace(config, workers=workers)
    except ClusterError as exc:
        other = (
            ()
            if config.ray == "local"
            else ("; or ", Named("ray", "local"), " for a Ray instance of its own")
        )
        raise RunError(str(exc), *other, code=1) from None
    except BaseExceptionGroup as group:  # every worker died, inside the run's task group
        lost = group.subgroup(ClusterError)
        if lost is None:
            raise
        raise RunError(
            f"{first_of(lost)}; what finished is kept: run again with ",
            RESUME,
            code=1,
        ) from None


def recipe(config: RunConfig) -> Any:
    """What the Ray workers build the role maps from; None without ``ray``."""
    if config.ray is None:
        return None

    spec = config.spec
    return PolicyRecipe.of(spec.policy_by_role, spec.models_in_play, config.workers or 1)

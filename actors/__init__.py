"""actors: an async actor runtime for turn-based, multi-agent episodes.

Each role of an episode is an actor task that receives its observations on a
channel and answers with an action; a coordinator task per episode owns the
environment, enforces the turn order and a deadline on every turn, and records
and logs each step. Batches run many episodes with bounded concurrency.

Public API:

- :func:`run_episode`: play one episode -> :class:`EpisodeTrace` of :class:`TurnRecord`.
- :func:`run_jobs`, :func:`open_jobs`: bounded-concurrency batches (in order, or
  streamed as they finish, with live counters: :class:`JobResults`).
- :func:`gc_frozen`: keep what a batch accumulates out of the garbage
  collector's sight, for short pauses (on by default in batches).
- :func:`new_episode_id`: the ids episodes get unless given one.
- :func:`timeouts_by_role`: check a ``turn_timeout`` argument (seconds per role).
- :func:`run`: run a coroutine function from synchronous code (``anyio.run``
  on asyncio, on uvloop when installed; ``ACTORS_LOOP`` picks).
- :data:`Status`: every status an episode can end with.
- :mod:`actors.testing`: ``check_env(env)``, the conformance check any
  turn-based environment can be run through.
- :func:`in_thread`: run a blocking policy in a worker thread so its deadline holds.
- :func:`current_turn`: inside a policy, the :class:`TurnContext` of the turn
  (``annotate(**fields)`` attaches data to the step and its log event).
- :func:`configure_logging`, :func:`get_logger`: structured JSON logs
  (:func:`logging_to`: for a block, the configuration before it restored after).
- :func:`configure_tracing`: OpenTelemetry spans, one per episode and per turn,
  the policy's own spans nested in its turn's.
- :func:`configure_metrics`, :func:`current_meter`: Prometheus metrics (episodes,
  turns by outcome, turn latency, late replies, tokens), served on ``/metrics``.

This package imports nothing from the environments it drives: see
:class:`TurnEnv` for what it expects.
"""

from __future__ import annotations

from ._annotations import LOGGED_ANNOTATIONS
from ._batch import JobResults, open_jobs, run_jobs
from ._context import TurnContext, current_turn
from ._coordinator import run_episode
from ._deadline import timeouts_by_role
from ._gc import gc_frozen
from ._ids import new_episode_id
from ._json import json_safe
from ._logging import configure_logging, disable_logging, get_logger, logging_to
from ._metrics import Meter, configure_metrics, current_meter
from ._run import LOOPS, new_event_loop, resolve_loop, run
from ._threads import in_thread
from ._tracing import configure_tracing, disable_tracing
from ._types import (
    EpisodeTrace,
    Policy,
    Role,
    Status,
    TurnEnv,
    TurnObservation,
    TurnRecord,
    TurnTimeout,
)

__all__ = [
    "LOGGED_ANNOTATIONS",
    "LOOPS",
    "EpisodeTrace",
    "JobResults",
    "Meter",
    "Policy",
    "Role",
    "Status",
    "TurnContext",
    "TurnEnv",
    "TurnObservation",
    "TurnRecord",
    "TurnTimeout",
    "configure_logging",
    "configure_metrics",
    "configure_tracing",
    "current_meter",
    "current_turn",
    "disable_logging",
    "disable_tracing",
    "gc_frozen",
    "get_logger",
    "in_thread",
    "json_safe",
    "logging_to",
    "new_episode_id",
    "new_event_loop",
    "open_jobs",
    "resolve_loop",
    "run",
    "run_episode",
    "run_jobs",
    "timeouts_by_role",
]

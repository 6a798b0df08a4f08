"""A local OpenAI-compatible chat-completions server that plays ChaosOps sensibly.

For demos and tests of the LLM path without a GPU or an account::

    chaosops mock-llm --port 8000 --latency uniform:20-80ms
    chaosops run --policy llm --base-url http://127.0.0.1:8000/v1 --model chaosops-mock

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, and for tests
``GET /stats`` (requests, peak of requests in flight, dropped connections, ...)
and ``POST /stats/reset``.

The answer is chosen by reading the rendered observation in the last user
message (the format of :mod:`chaosops.agents.llm.render`) and applying a
heuristic close to docs/world.md's ("Scripted policies"), with knowledge of the log signatures of
each failure, so that episodes driven through it resolve incidents. When the
request offers tools (and ``tool_choice`` is not ``"none"``) it answers with a
``take_action`` tool call, else with text (see ``answer_style``).

Latency specs (``MockLLMConfig.latency``): ``"50ms"``, ``"0.05s"``, ``"50"``
(milliseconds), ``"uniform:20-80ms"``, ``"normal:50,10ms"`` (mean, standard
deviation; clipped at 0), ``"exp:50ms"`` (exponential with that mean).

Faults: each request draws, from one ``random.Random(seed)`` shared by all
requests (so the sequence follows the arrival order), a 429 (answered at once,
with ``Retry-After`` and ``retry-after-ms``), a 500 (after the latency) or an
unparseable answer, with the configured rates.

The server binds 127.0.0.1 unless told otherwise and never logs request bodies
or headers (an API key sent to it is compared, never stored or echoed).
"""

from __future__ import annotations

from .cli import build_parser, config_from_args, main
from .config import MockLLMConfig, MockStats
from .latency import parse_latency
from .player import decide_action
from .server import (
    MockLLMHandle,
    create_app,
    listen_error,
    run_mock_llm_in_thread,
    serve,
    serve_until_stopped,
)

__all__ = [
    "MockLLMConfig",
    "MockLLMHandle",
    "MockStats",
    "build_parser",
    "config_from_args",
    "create_app",
    "decide_action",
    "listen_error",
    "main",
    "parse_latency",
    "run_mock_llm_in_thread",
    "serve",
    "serve_until_stopped",
]

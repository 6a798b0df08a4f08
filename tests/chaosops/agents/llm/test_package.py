"""``chaosops.agents.llm``: rendering, moves and parsing without the HTTP
client, which loads with the first name of its side asked for."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
import chaosops.agents.llm as llm
print("before", "aiohttp" in sys.modules, "LLMPolicy" in dir(llm))
llm.render_observation, llm.moves_for, llm.parse_action, llm.LLMEndpointError
print("light", "aiohttp" in sys.modules)
from chaosops.agents.llm import LLMPolicy, Negotiation, check_endpoint
print("http", "aiohttp" in sys.modules, LLMPolicy.__module__, check_endpoint.__module__)
try:
    llm.no_such_name
except AttributeError as exc:
    print("missing", exc)
"""


def test_the_http_side_loads_with_its_first_name() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.splitlines() == [
        "before False True",
        "light False",
        "http True chaosops.agents.llm.policy chaosops.agents.llm.http",
        "missing module 'chaosops.agents.llm' has no attribute 'no_such_name'",
    ]

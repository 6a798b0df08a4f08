"""Shared fixtures: async tests run on anyio's asyncio backend, on the standard
event loop and on uvloop (what the synchronous entry points use when installed)."""

from __future__ import annotations

import importlib.util

import pytest

_LOOPS = [pytest.param(("asyncio", {}), id="asyncio")]
if importlib.util.find_spec("uvloop") is not None:
    _LOOPS.append(pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"))


@pytest.fixture(scope="session", params=_LOOPS)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    return request.param

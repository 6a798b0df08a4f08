"""Shared fixtures: async tests run on anyio's asyncio backend only."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"

"""ChaosOps: the incident-response world, its policies, runner, CLI and outputs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("chaosops")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

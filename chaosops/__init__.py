"""ChaosOps: the incident-response world, its policies, runner, CLI and outputs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any


def __getattr__(name: str) -> Any:
    # read when asked for: the console script imports this package first, and
    # reading the installed metadata there would take a Ctrl-C before the
    # command's own handler is set (a traceback instead of one line)
    if name == "__version__":
        try:
            return version("chaosops")
        except PackageNotFoundError:  # run from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

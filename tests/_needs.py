"""What a test needs from the machine: a skip where a developer may lack it, a
failure in CI (``CI`` set), where ``.ci/run`` provides everything the suite
uses, so that a broken install never turns tests into silent skips. pytest's
``-rs`` lists every skip and its reason at the end of the run."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def missing(what: str, install: str) -> NoReturn:
    """Stop the calling test (or module): ``what`` is missing, ``install`` gets it."""
    message = f"{what} is missing; {install}"
    if in_ci():
        pytest.fail(f"{message} (in CI every component of the suite must be there)")
    pytest.skip(message, allow_module_level=True)


def needs(available: object, what: str, install: str) -> None:
    """:func:`missing` unless ``available`` is true."""
    if not available:
        missing(what, install)

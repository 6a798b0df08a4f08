"""Optional dependencies, imported with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str, user: str) -> ModuleType:
    """``module``, imported; when it is missing, an ImportError saying that
    ``user`` needs chaosops' ``extra`` and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(missing_extra(user, extra, module)) from exc


def missing_extra(user: str, extra: str, module: str | None) -> str:
    """What to tell a user of ``user`` whose Python lacks ``module`` of ``extra``."""
    return (
        f"{user} needs the '{extra}' extra ({module} is missing): pip install 'chaosops[{extra}]'"
    )

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
        raise ImportError(
            f"{user} needs the '{extra}' extra ({module} is missing): "
            f"pip install 'chaosops[{extra}]'"
        ) from exc

"""Latency specs of the mock server: ``"50ms"``, ``"uniform:20-80ms"``, ``"exp:50ms"``..."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from types import MappingProxyType

_UNITS = MappingProxyType({"ms": 0.001, "s": 1.0, "": 0.001})
_NUM = r"(\d+(?:\.\d*)?|\.\d+)"
_FIXED = re.compile(rf"^{_NUM}\s*(ms|s)?$")
_UNIFORM = re.compile(rf"^uniform:\s*{_NUM}\s*(ms|s)?\s*-\s*{_NUM}\s*(ms|s)?$")
_NORMAL = re.compile(rf"^normal:\s*{_NUM}\s*(ms|s)?\s*,\s*{_NUM}\s*(ms|s)?$")
_EXP = re.compile(rf"^exp:\s*{_NUM}\s*(ms|s)?$")


def parse_latency(spec: str) -> Callable[[random.Random], float]:
    """Turn a latency spec into a sampler ``rng -> seconds`` (see the module doc)."""
    text = spec.strip().lower()
    if m := _FIXED.match(text):
        value = float(m.group(1)) * _UNITS[m.group(2) or ""]
        return lambda rng: value
    if m := _UNIFORM.match(text):
        unit_hi = m.group(4) or m.group(2) or ""
        lo = float(m.group(1)) * _UNITS[m.group(2) or unit_hi]
        hi = float(m.group(3)) * _UNITS[unit_hi]
        if hi < lo:
            raise ValueError(f"latency {spec!r}: the upper bound is below the lower one")
        return lambda rng: rng.uniform(lo, hi)
    if m := _NORMAL.match(text):
        unit = m.group(4) or m.group(2) or ""
        mean = float(m.group(1)) * _UNITS[m.group(2) or unit]
        std = float(m.group(3)) * _UNITS[unit]
        return lambda rng: max(0.0, rng.gauss(mean, std))
    if m := _EXP.match(text):
        mean = float(m.group(1)) * _UNITS[m.group(2) or ""]
        return lambda rng: rng.expovariate(1.0 / mean) if mean > 0 else 0.0
    raise ValueError(
        f"latency {spec!r} not understood; accepted: '50ms', '0.05s', 'uniform:20-80ms', "
        "'normal:50,10ms', 'exp:50ms'"
    )

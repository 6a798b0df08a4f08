"""Keep a batch's accumulated results out of the garbage collector's sight.

A batch holds every finished result and every in-flight trace (observations
and records: a few dozen GC-tracked objects per turn), none of which is
garbage. CPython's full (generation 2) collections walk all of them, and each
one stalls every episode in flight at once: on 1,000 concurrent episodes they
cost more than a third of the wall time. :func:`gc_frozen` moves what survived
each collection of the older generations into the permanent generation
(``gc.freeze()``) while batches run, so full collections only walk what was
allocated since, and puts everything back (``gc.unfreeze()``) when the last
batch ends.

It also raises the youngest generation's threshold (700 container allocations
by default) to :data:`BATCH_GEN0_THRESHOLD` while batches run. Every young
collection walks all the young objects still alive, and with many episodes in
flight that is every in-flight episode's recent state, scattered over memory:
at concurrency 64 the default threshold cost about 15% of a turn, mostly in
cache misses. Garbage freed by reference counting (nearly all of it) is freed
at once as before; only cyclic garbage waits longer for its collection.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_batches = 0  # batches running with freezing on, in any thread of the process
_engaged = False  # our callback is installed and the frozen objects are ours
_saved_threshold: tuple[int, ...] = ()

BATCH_GEN0_THRESHOLD = 100_000
"""Generation-0 threshold while batches run (the process's own, if higher, is kept)."""


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    # A collection of generation 1 or 2 has just moved its survivors into the
    # oldest generation: freeze them (O(1): the generation lists are spliced).
    if phase == "stop" and info["generation"] >= 1:
        gc.freeze()


@contextmanager
def gc_frozen(enabled: bool = True) -> Iterator[None]:
    """Freeze the survivors of older-generation collections while the block runs,
    and collect the youngest generation less often (see the module's notes).

    Process-wide and reference-counted: nested or concurrent batches (even in
    other threads) share one mechanism, and only the last one out unfreezes,
    also on error or cancellation. If the process already has frozen objects
    when the first batch starts (the application uses ``gc.freeze()`` itself,
    e.g. before forking), the collector is left alone. ``enabled=False`` does
    nothing.

    The trade-off: an object frozen while alive that later becomes part of
    unreachable cyclic garbage is only collected after the last batch ends
    (objects freed by reference counting, most of them, go at once as usual).
    The runtime's own objects form no such cycles, also on the deadline and
    error paths (tested); a policy's own may.
    """
    global _batches, _engaged, _saved_threshold
    if not enabled:
        yield
        return
    with _lock:
        _batches += 1
        if _batches == 1 and gc.get_freeze_count() == 0:
            gc.callbacks.append(_freeze_survivors)
            _saved_threshold = gc.get_threshold()
            gc.set_threshold(max(_saved_threshold[0], BATCH_GEN0_THRESHOLD), *_saved_threshold[1:])
            _engaged = True
    try:
        yield
    finally:
        with _lock:
            _batches -= 1
            if _batches == 0 and _engaged:
                _engaged = False
                gc.callbacks.remove(_freeze_survivors)
                gc.set_threshold(*_saved_threshold)
                gc.unfreeze()

"""Keep a batch's accumulated results out of the garbage collector's sight.

A batch holds every finished result and every in-flight trace (observations
and records: a few dozen GC-tracked objects per turn), none of which is
garbage. CPython's collector walks every object it tracks once per
collection of its generation, and each collection stalls every episode in
flight at once: with 1,000 concurrent episodes its full collections cost more
than a third of the wall time, and a young collection of 100,000 objects
50-65 ms, all inside one bunch of deadlines. :func:`gc_frozen` moves what
survives a collection into the permanent generation (``gc.freeze()``) while
batches run, so that no collection walks it again, and puts everything back
(``gc.unfreeze()``) when the last batch ends. Two modes:

- **eager** (a batch starts in it): what the process holds when the first
  batch starts is frozen at once, young collections run every
  :data:`EAGER_GEN0_THRESHOLD` container allocations, and the survivors of
  every collection are frozen. Each object is walked once, while it is still
  in the CPU's caches; a pause lasts a few milliseconds at most.
- **survivors** (the fallback): young collections every
  :data:`BATCH_GEN0_THRESHOLD` allocations, and only what survives a
  collection of an older generation is frozen, so an object is frozen only
  if it lived through a million or so allocations.

Eager freezing has a price where the workload makes cyclic garbage (reference
counting frees nearly everything else at once, frozen or not): a cycle whose
objects were alive at a freeze is only collected after the batch. That is
what a cancelled HTTP request leaves behind (an LLM policy's call closed at
its deadline: the closed connection's transport, the cancelled connection
attempt's task and frames, some 10-50 objects), and a young collection in
such a workload soon finds garbage of the same kind that was not frozen yet.
So the first collection that finds any cyclic garbage switches the batches
to the survivors mode until the last one ends. The runtime's own objects
form no cycles, on the deadline and error paths too (tested), nor do the
scripted policies.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_batches = 0  # batches running with freezing on, in any thread of the process
_engaged = False  # our callback is installed and the frozen objects are ours
_eager = False  # eager mode (see the module's notes); False once garbage was found
_saved_threshold: tuple[int, ...] = ()

EAGER_GEN0_THRESHOLD = 2_000
"""Generation-0 threshold in the eager mode (the process's own, if higher, is kept)."""

BATCH_GEN0_THRESHOLD = 100_000
"""Generation-0 threshold in the survivors mode (the process's own, if higher, is kept)."""

# CPython 3.12 starts with objects of its own in the permanent generation
# (3.12.1: 375 tuples, before any code runs); they are not an application's
# freeze. Counted when this module is imported, on 3.12 only: elsewhere the
# interpreter starts with none, and any frozen object is the application's.
_INTERPRETER_FROZEN = gc.get_freeze_count() if sys.version_info[:2] == (3, 12) else 0


def _set_young_threshold(threshold: int) -> None:
    # The generation-0 threshold while batches run (the process's own, if higher, is kept).
    gc.set_threshold(max(_saved_threshold[0], threshold), *_saved_threshold[1:])


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    # After a collection: its survivors are in the next generation; freezing
    # them is O(1) (the generation lists are spliced).
    global _eager
    if phase != "stop":
        return
    if _eager:
        if info["collected"]:
            # The workload makes cyclic garbage: stop freezing young survivors.
            _eager = False
            _set_young_threshold(BATCH_GEN0_THRESHOLD)
        else:
            gc.freeze()
    elif info["generation"] >= 1:
        gc.freeze()


def gc_eager() -> bool:
    """True while batches run with the collector in the eager mode (see the module's notes)."""
    return _eager  # False whenever no batch engaged the collector


@contextmanager
def gc_frozen(enabled: bool = True) -> Iterator[None]:
    """Freeze what survives the garbage collector while the block runs (see the
    module's notes: the eager mode, and the survivors mode it falls back to
    once a collection finds cyclic garbage).

    Process-wide and reference-counted: nested or concurrent batches (even in
    other threads) share one mechanism, and only the last one out unfreezes
    and restores the process's thresholds, also on error or cancellation. If
    the process already has frozen objects when the first batch starts (the
    application uses ``gc.freeze()`` itself, e.g. before forking; the few
    CPython 3.12 freezes at start-up do not count), the collector is left
    alone. ``enabled=False`` does nothing.

    The trade-off: an object frozen while alive that later becomes part of
    unreachable cyclic garbage is only collected after the last batch ends;
    so is cyclic garbage the process held when the first batch started.
    """
    global _batches, _engaged, _eager, _saved_threshold
    if not enabled:
        yield
        return
    with _lock:
        _batches += 1
        if _batches == 1 and gc.get_freeze_count() <= _INTERPRETER_FROZEN:
            _saved_threshold = gc.get_threshold()
            _eager = True
            gc.freeze()  # what the process holds already: not the batch's to walk, nor to judge
            _set_young_threshold(EAGER_GEN0_THRESHOLD)
            gc.callbacks.append(_on_collection)
            _engaged = True
    try:
        yield
    finally:
        with _lock:
            _batches -= 1
            if _batches == 0 and _engaged:
                _engaged = False
                _eager = False
                gc.callbacks.remove(_on_collection)
                gc.set_threshold(*_saved_threshold)
                gc.unfreeze()

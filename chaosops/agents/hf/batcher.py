"""Requests from many event-loop tasks gathered into batches for one worker thread.

A local model answers a batch of prompts in about the time it answers one,
so the turns pending across concurrent episodes are handed to one
``generate`` call. Callers ``await submit(item)``; the thread takes the first
waiting item, then whatever else arrives within ``wait_s`` (up to
``max_batch``), runs the batch, and wakes each caller in its own event loop.

A caller cancelled while it waits (its turn's deadline) leaves its item
behind: an item not yet taken is dropped, and an answer that comes later is
thrown away, so a late answer is never applied. The batch itself is not
interrupted: a thread cannot be.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

__all__ = ["Batcher"]

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(eq=False)
class _Pending(Generic[In, Out]):
    item: In
    token: Any  # the caller's event loop
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Out | None = None
    error: BaseException | None = None
    abandoned: bool = False


class Batcher(Generic[In, Out]):
    """Batches of ``run(items) -> outputs`` (one output per item, in order) on
    one daemon thread; ``sizes`` counts the batches run by their size."""

    def __init__(self, run: Callable[[list[In]], Sequence[Out]], *, max_batch: int,
                 wait_s: float, name: str = "chaosops-batcher") -> None:  # fmt: skip
        if max_batch < 1 or wait_s < 0:
            raise ValueError(f"max_batch >= 1 and wait_s >= 0 (got {max_batch}, {wait_s})")
        self._run, self.max_batch, self.wait_s, self._name = run, max_batch, wait_s, name
        self._queue: queue.SimpleQueue[_Pending[In, Out] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.sizes: Counter[int] = Counter()

    async def submit(self, item: In) -> Out:
        """``run``'s output for ``item``, from a batch with others' items; an
        exception ``run`` raised is raised in each caller of its batch."""
        pending: _Pending[In, Out] = _Pending(item, anyio.lowlevel.current_token())
        self._ensure_started()
        self._queue.put(pending)
        try:
            await pending.done.wait()
        except BaseException:  # cancelled (the turn's deadline): the answer is not wanted
            pending.abandoned = True
            raise
        if pending.error is not None:
            raise pending.error
        return pending.result  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the thread once the batches already taken are done."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _ensure_started(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        while (batch := self._gather()) is not None:
            if batch:
                self._answer(batch)

    def _gather(self) -> list[_Pending[In, Out]] | None:
        """The next batch (None: closed): the first item waiting, then what
        arrives within ``wait_s``, callers that gave up left out."""
        first = self._queue.get()
        if first is None:
            return None
        batch = [first]
        until = time.monotonic() + self.wait_s
        while len(batch) < self.max_batch:
            try:
                pending = self._queue.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            if pending is None:  # closing: this batch still runs
                self._queue.put(None)
                break
            batch.append(pending)
        return [p for p in batch if not p.abandoned]

    def _answer(self, batch: list[_Pending[In, Out]]) -> None:
        self.sizes[len(batch)] += 1
        try:
            outputs = list(self._run([p.item for p in batch]))
            if len(outputs) != len(batch):
                raise RuntimeError(f"{len(outputs)} outputs for a batch of {len(batch)}")
        except Exception as exc:  # each caller gets the batch's error (out of memory, say)
            for pending in batch:
                pending.error = exc
        else:
            for pending, output in zip(batch, outputs, strict=True):
                pending.result = output
        for token in {id(p.token): p.token for p in batch}.values():
            woken = [p for p in batch if p.token is token]
            try:
                anyio.from_thread.run_sync(_wake, woken, token=token)
            except RuntimeError:  # that event loop has ended: nobody waits any more
                pass


def _wake(batch: list[_Pending[Any, Any]]) -> None:
    for pending in batch:
        pending.done.set()

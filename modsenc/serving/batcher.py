"""Dynamic batching: texts of concurrent requests queue per key and are encoded together.

One asyncio task drains the queue. It takes the key (language, mode) whose oldest text has
waited longest, gives that key up to ``max_wait`` seconds (from that text's arrival) to fill a
batch of ``max_batch_size`` texts, then runs the batch function in a worker thread, so the event
loop keeps answering health checks and accepting requests while a batch is encoded. While a batch
runs, new texts pile up, so under load batches fill without any waiting. Every text has its own
future; a request awaits its texts' futures and gets its results back in its own order.

The queue is bounded (``max_queue`` texts): a request that does not fit is refused at once with
:class:`Overloaded` (HTTP 503) instead of growing memory without limit. :meth:`close` stops new
work and returns once everything already queued has been encoded (graceful drain). A request
cancelled while it waits (its client went away, or the server's time limit passed) takes its
texts out of the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from modsenc.utils.errors import ModsencError


class Overloaded(ModsencError):
    """The queue is full or the server is shutting down; the client should retry later."""


@dataclass(eq=False)  # compared by identity: a cancelled request's items are removed one by one
class Item:
    key: Hashable
    payload: Any
    request: int  # which submit() call the item belongs to, for the requests-per-batch metric
    future: asyncio.Future
    enqueued: float = field(default_factory=time.perf_counter)


# run_batch(key, payloads) -> one result per payload (an Exception instance fails only that item).
BatchFunction = Callable[[Hashable, list[Any]], list[Any]]
# on_batch(items, started, seconds) is told about every batch that ran (perf_counter times), for metrics.
BatchObserver = Callable[[list[Item], float, float], None]


class Batcher:
    def __init__(
        self,
        run_batch: BatchFunction,
        max_batch_size: int,
        max_wait: float,
        max_queue: int,
        on_batch: BatchObserver | None = None,
    ) -> None:
        if max_batch_size < 1 or max_queue < 1 or max_wait < 0:
            raise ValueError("max_batch_size and max_queue must be >= 1 and max_wait >= 0")
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait
        self.max_queue = max_queue
        self.on_batch = on_batch
        self.queued = 0
        self._groups: dict[Hashable, deque[Item]] = {}
        self._requests = 0
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._closing = False

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the worker task on the running event loop."""
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._work(), name="modsenc-batcher")

    async def close(self) -> None:
        """Refuse new texts, encode every queued one, then stop the worker."""
        self._closing = True
        if self._task is None:
            return
        self._wakeup.set()
        await self._task

    @property
    def closing(self) -> bool:
        return self._closing

    # ----------------------------------------------------------------- submitting
    async def submit(self, items: Sequence[tuple[Hashable, Any]]) -> list[Any]:
        """Queue ``(key, payload)`` pairs; returns their results in the same order.

        Raises :class:`Overloaded` at once if they do not fit in the queue, and the first item's
        exception if any item failed.
        """
        if self._closing or self._task is None:
            raise Overloaded("the server is shutting down" if self._closing else "the server is not ready")
        if self.queued + len(items) > self.max_queue:
            raise Overloaded(
                f"the queue is full ({self.queued} of {self.max_queue} texts waiting); retry shortly"
            )
        loop = asyncio.get_running_loop()
        self._requests += 1
        queued = [Item(key, payload, self._requests, loop.create_future()) for key, payload in items]
        for item in queued:
            self._groups.setdefault(item.key, deque()).append(item)
        self.queued += len(queued)
        self._wakeup.set()
        # If the caller goes away (or its time limit passes), gather cancels the futures and the
        # texts still waiting leave the queue at once, freeing their room in ``max_queue``; those
        # already in a running batch are skipped. return_exceptions: every failed future is
        # retrieved (no "never retrieved" noise).
        try:
            results = await asyncio.gather(*(item.future for item in queued), return_exceptions=True)
        except asyncio.CancelledError:
            self._drop(queued)
            raise
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return list(results)

    def _drop(self, items: list[Item]) -> None:
        """Take ``items`` still waiting out of the queue (those already taken are left alone)."""
        for item in items:
            group = self._groups.get(item.key)
            if group is None or item not in group:
                continue
            group.remove(item)
            self.queued -= 1
            if not group:
                del self._groups[item.key]

    # ----------------------------------------------------------------- the worker
    def _take(self) -> tuple[Hashable, list[Item]] | float:
        """The next batch, or how long to wait for the oldest key's batch to fill."""
        key = min(self._groups, key=lambda k: self._groups[k][0].enqueued)
        group = self._groups[key]
        if len(group) < self.max_batch_size and not self._closing:
            remaining = group[0].enqueued + self.max_wait - time.perf_counter()
            if remaining > 0:
                return remaining
        batch = [group.popleft() for _ in range(min(self.max_batch_size, len(group)))]
        if not group:
            del self._groups[key]
        self.queued -= len(batch)
        return key, batch

    async def _work(self) -> None:
        while True:
            if not self.queued:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            taken = self._take()
            if isinstance(taken, float):
                self._wakeup.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), taken)
                continue
            key, batch = taken
            live = [item for item in batch if not item.future.done()]  # skip cancelled callers
            if not live:
                continue
            start = time.perf_counter()
            try:
                results = await asyncio.to_thread(self.run_batch, key, [item.payload for item in live])
            except Exception as err:  # noqa: BLE001 - handed to every caller of the batch
                results = [err] * len(live)
            seconds = time.perf_counter() - start
            for item, result in zip(live, results):
                if item.future.done():
                    continue
                if isinstance(result, BaseException):
                    item.future.set_exception(result)
                else:
                    item.future.set_result(result)
            if self.on_batch is not None:
                self.on_batch(live, start, seconds)

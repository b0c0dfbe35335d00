"""Batcher on its own, with a recording batch function: grouping, order, limits, overflow, drain."""

from __future__ import annotations

import asyncio
import threading

import pytest

from modsenc.serving.batcher import Batcher, Overloaded


class Recorder:
    """A batch function that upper-cases texts and remembers every batch it was given."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[tuple[object, list[str]]] = []
        self.threads: set[int] = set()
        self.fail_on = fail_on

    def __call__(self, key, payloads):
        self.batches.append((key, list(payloads)))
        self.threads.add(threading.get_ident())
        return [ValueError(f"bad {p}") if p == self.fail_on else f"{key}:{p.upper()}" for p in payloads]


def run(coro):
    return asyncio.run(coro)


def test_concurrent_requests_share_batches_by_key_and_get_their_own_results_in_order() -> None:
    recorder = Recorder()

    async def main():
        batcher = Batcher(recorder, max_batch_size=8, max_wait=0.05, max_queue=100)
        batcher.start()
        results = await asyncio.gather(
            batcher.submit([("en", "a"), ("uz", "b"), ("en", "c")]),
            batcher.submit([("uz", "d"), ("en", "e")]),
            batcher.submit([("en", "f")]),
        )
        await batcher.close()
        return results

    results = run(main())
    assert results == [["en:A", "uz:B", "en:C"], ["uz:D", "en:E"], ["en:F"]]
    # All three requests arrived within max_wait: one batch per key, oldest key first,
    # and the texts of different requests are in one batch in arrival order.
    assert recorder.batches == [("en", ["a", "c", "e", "f"]), ("uz", ["b", "d"])]
    assert threading.get_ident() not in recorder.threads  # encoded off the event loop


def test_batches_are_cut_at_max_batch_size() -> None:
    recorder = Recorder()

    async def main():
        batcher = Batcher(recorder, max_batch_size=2, max_wait=0.05, max_queue=100)
        batcher.start()
        out = await batcher.submit([("en", t) for t in "abcde"])
        await batcher.close()
        return out

    assert run(main()) == ["en:A", "en:B", "en:C", "en:D", "en:E"]
    assert [texts for _, texts in recorder.batches] == [["a", "b"], ["c", "d"], ["e"]]


def test_full_queue_is_refused_at_once_and_an_item_error_reaches_its_caller_only() -> None:
    recorder = Recorder(fail_on="bad")

    async def main():
        batcher = Batcher(recorder, max_batch_size=8, max_wait=0.2, max_queue=3)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit([("en", "a"), ("en", "b")]))
        await asyncio.sleep(0)  # queued, waiting for its batch to fill
        assert batcher.queued == 2
        with pytest.raises(Overloaded, match="queue is full"):
            await batcher.submit([("en", "c"), ("en", "d")])
        failing = asyncio.ensure_future(batcher.submit([("en", "bad")]))  # fits: 3 of 3
        out = await first
        with pytest.raises(ValueError, match="bad bad"):
            await failing
        await batcher.close()
        return out

    assert run(main()) == ["en:A", "en:B"]
    assert recorder.batches == [("en", ["a", "b", "bad"])]


def test_close_encodes_everything_queued_then_refuses_new_work() -> None:
    recorder = Recorder()

    async def main():
        # A long max_wait: without the drain the texts would sit for 10 s.
        batcher = Batcher(recorder, max_batch_size=8, max_wait=10.0, max_queue=100)
        batcher.start()
        pending = asyncio.ensure_future(batcher.submit([("en", "a"), ("kk", "b")]))
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(batcher.close())
        out = await asyncio.wait_for(pending, timeout=2)
        await asyncio.wait_for(closing, timeout=2)
        with pytest.raises(Overloaded, match="shutting down"):
            await batcher.submit([("en", "x")])
        return out

    assert run(main()) == ["en:A", "kk:B"]


def test_a_cancelled_caller_is_skipped() -> None:
    recorder = Recorder()

    async def main():
        batcher = Batcher(recorder, max_batch_size=8, max_wait=0.05, max_queue=100)
        batcher.start()
        gone = asyncio.ensure_future(batcher.submit([("en", "gone")]))
        await asyncio.sleep(0)
        gone.cancel()
        out = await batcher.submit([("en", "kept")])
        await batcher.close()
        return out

    assert run(main()) == ["en:KEPT"]
    assert recorder.batches == [("en", ["kept"])]


def test_a_request_past_its_time_limit_leaves_the_queue_at_once() -> None:
    recorder = Recorder()

    async def main():
        # a batch waits up to 10 s to fill: without the drop the texts would hold their room that long
        batcher = Batcher(recorder, max_batch_size=8, max_wait=10, max_queue=3)
        batcher.start()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(batcher.submit([("en", "a"), ("en", "b"), ("kk", "c")]), 0.05)
        assert batcher.queued == 0 and not batcher._groups
        later = asyncio.ensure_future(batcher.submit([("en", "d"), ("en", "e"), ("en", "f")]))
        await asyncio.sleep(0)  # all three fit: the first request's room was given back
        await batcher.close()
        return await later

    assert run(main()) == ["en:D", "en:E", "en:F"]
    assert recorder.batches == [("en", ["d", "e", "f"])]

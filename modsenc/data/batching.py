"""Length-bucketed, seeded, resumable batch order.

Padded batches cost compute on every pad slot, so sentences of similar length are batched
together; bucketing inside random mega-buckets (rather than sorting the whole corpus) keeps each
batch's contents random across epochs. The order of epoch ``e`` is a pure function of
``(lengths, batch_size, seed, e)``, so a run resumed from ``{"epoch", "batch"}`` sees exactly the
batches it would have seen without the interruption, and every DDP rank computes the same
global batch before taking its :func:`shard`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = ["BatchStream", "LengthBucketBatchSampler", "StreamItem", "padding_waste", "shard"]


class LengthBucketBatchSampler:
    """Batches of indices into ``lengths`` for one epoch at a time.

    Epoch ``e``: shuffle all indices with ``numpy.random.default_rng([seed, e])``, cut the
    permutation into mega-buckets of ``batch_size * bucket_multiplier``, sort each by length
    (stable), split into batches, then shuffle the batch order with the same generator so long
    and short batches alternate (a run of long batches at the start would spike memory).

    With ``drop_last`` the ``len(lengths) % batch_size`` indices dropped are the last ones of the
    random permutation, not the longest of a bucket, so no length range is systematically
    under-trained.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        seed: int = 0,
        bucket_multiplier: int = 50,
        drop_last: bool = False,
    ) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1:
            raise ValueError(f"lengths must be a flat sequence of ints, got shape {self.lengths.shape}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if bucket_multiplier < 1:
            raise ValueError(f"bucket_multiplier must be >= 1, got {bucket_multiplier}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0 (numpy seeds are non-negative), got {seed}")
        if len(self.lengths) and self.lengths.min() < 0:
            raise ValueError("lengths must be >= 0")
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.bucket_multiplier = int(bucket_multiplier)
        self.drop_last = bool(drop_last)
        if len(self) == 0:
            raise ValueError(
                f"no batches: {len(self.lengths)} examples with batch_size={batch_size}"
                + (" and drop_last=True" if drop_last else "")
            )

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def batches(self, epoch: int) -> list[list[int]]:
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.lengths))
        if self.drop_last:
            order = order[: len(self) * self.batch_size]
        mega = self.batch_size * self.bucket_multiplier
        batches: list[list[int]] = []
        for start in range(0, len(order), mega):
            bucket = order[start : start + mega]
            bucket = bucket[np.argsort(self.lengths[bucket], kind="stable")]
            batches.extend(
                bucket[i : i + self.batch_size].tolist() for i in range(0, len(bucket), self.batch_size)
            )
        return [batches[i] for i in rng.permutation(len(batches))]

    def padding_waste(self, epoch: int = 0) -> float:
        """Share of slots that would be padding if every batch were padded to its longest member."""
        return padding_waste(self.lengths, self.batches(epoch))


def padding_waste(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Padded slots / all slots, padding each batch to its longest member (0.0 if nothing is long)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    real = padded = 0
    for batch in batches:
        batch_lengths = lengths[np.asarray(batch, dtype=np.int64)]
        real += int(batch_lengths.sum())
        padded += int(batch_lengths.max()) * len(batch)
    return 0.0 if padded == 0 else (padded - real) / padded


class AlternatingBatchSampler:
    """Batches that alternate between two datasets stored one after the other (indices of the
    second are offset by ``offset``): A, B, A, B, ... Each batch holds one dataset only, so a
    batch has one kind of example (e.g. paraphrase pairs vs translation pairs). The shorter
    dataset's batches repeat so that the alternation lasts the whole of the longer one.
    """

    def __init__(
        self, first: LengthBucketBatchSampler, second: LengthBucketBatchSampler, offset: int
    ) -> None:
        self.first, self.second, self.offset = first, second, offset

    def __len__(self) -> int:
        return 2 * max(len(self.first), len(self.second))

    def batches(self, epoch: int) -> list[list[int]]:
        a = self.first.batches(epoch)
        b = [[i + self.offset for i in batch] for batch in self.second.batches(epoch)]
        out: list[list[int]] = []
        for i in range(max(len(a), len(b))):
            out += [a[i % len(a)], b[i % len(b)]]
        return out


class StreamItem(NamedTuple):
    epoch: int
    batch: int  # index of the batch within its epoch
    indices: list[int]


class BatchStream:
    """Endless iterator over ``(epoch, index_in_epoch, batch_indices)``, crossing epoch boundaries.

    Training loops count steps, not epochs, so the stream never ends; ``state_dict()`` names the
    next batch it will yield, which is what a checkpoint must store to resume without repeating
    or skipping data.
    """

    def __init__(self, sampler: LengthBucketBatchSampler, start_epoch: int = 0, start_batch: int = 0) -> None:
        if start_epoch < 0 or not 0 <= start_batch <= len(sampler):
            raise ValueError(
                f"cannot start at epoch {start_epoch}, batch {start_batch}: "
                f"epochs start at 0 and have {len(sampler)} batches"
            )
        self.sampler = sampler
        # A state saved right after an epoch's last batch names batch len(sampler): the next epoch.
        if start_batch == len(sampler):
            start_epoch, start_batch = start_epoch + 1, 0
        self._epoch = start_epoch
        self._batch = start_batch
        self._cache: tuple[int, list[list[int]]] | None = None

    @classmethod
    def from_state(cls, sampler: LengthBucketBatchSampler, state: Mapping[str, Any]) -> BatchStream:
        try:
            return cls(sampler, start_epoch=int(state["epoch"]), start_batch=int(state["batch"]))
        except KeyError as exc:
            raise ValueError(f"batch stream state needs 'epoch' and 'batch', got {dict(state)!r}") from exc

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self._epoch, "batch": self._batch}

    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        if self._cache is None or self._cache[0] != epoch:
            self._cache = (epoch, self.sampler.batches(epoch))
        return self._cache[1]

    def __iter__(self) -> Iterator[StreamItem]:
        return self

    def __next__(self) -> StreamItem:
        batches = self._epoch_batches(self._epoch)
        item = StreamItem(self._epoch, self._batch, list(batches[self._batch]))
        self._batch += 1
        if self._batch == len(batches):
            self._epoch, self._batch = self._epoch + 1, 0
        return item


def shard(batch_indices: Sequence[int], rank: int, world_size: int) -> list[int]:
    """This rank's contiguous slice of a global batch; slice sizes differ by at most one.

    Contiguous slices of a length-sorted batch give every rank similar lengths, so no rank
    waits long for the slowest at the gradient all-reduce.
    """
    n = len(batch_indices)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if world_size > n:
        raise ValueError(
            f"cannot shard a batch of {n} over {world_size} ranks (some would get nothing); "
            "use a global batch size >= world size"
        )
    base, extra = divmod(n, world_size)
    start = rank * base + min(rank, extra)
    stop = start + base + (1 if rank < extra else 0)
    return list(batch_indices[start:stop])

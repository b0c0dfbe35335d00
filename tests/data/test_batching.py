"""Batch order: reproducible, complete, low on padding, resumable, and evenly sharded."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from modsenc.data import BatchStream, LengthBucketBatchSampler, padding_waste, shard

LENGTHS = np.random.default_rng(123).integers(5, 129, size=10_000).tolist()


def test_same_seed_same_batches_different_seed_or_epoch_different() -> None:
    a = LengthBucketBatchSampler(LENGTHS, batch_size=32, seed=7)
    b = LengthBucketBatchSampler(LENGTHS, batch_size=32, seed=7)
    c = LengthBucketBatchSampler(LENGTHS, batch_size=32, seed=8)
    assert a.batches(0) == b.batches(0)
    assert a.batches(3) == b.batches(3)
    assert a.batches(0) != c.batches(0)
    assert a.batches(0) != a.batches(1)


def test_small_example_is_exact() -> None:
    sampler = LengthBucketBatchSampler([5, 1, 4, 2, 3], batch_size=2, seed=0, bucket_multiplier=1)
    assert len(sampler) == 3
    batches = sampler.batches(0)
    # Same generator calls as the sampler: permutation, then the batch order.
    rng = np.random.default_rng([0, 0])
    perm = rng.permutation(5)
    lengths = np.array([5, 1, 4, 2, 3])
    expected = []
    for start in range(0, 5, 2):
        bucket = perm[start : start + 2]
        expected.append(bucket[np.argsort(lengths[bucket], kind="stable")].tolist())
    expected = [expected[i] for i in rng.permutation(3)]
    assert batches == expected
    assert sorted(i for batch in batches for i in batch) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_index_once_per_epoch(drop_last: bool) -> None:
    sampler = LengthBucketBatchSampler(LENGTHS[:1003], batch_size=10, seed=1, drop_last=drop_last)
    for epoch in range(3):
        batches = sampler.batches(epoch)
        flat = [i for batch in batches for i in batch]
        assert len(batches) == len(sampler) == (100 if drop_last else 101)
        assert len(flat) == len(set(flat)) == (1000 if drop_last else 1003)
        assert all(len(batch) == 10 for batch in batches) == drop_last
        if not drop_last:
            assert sorted(flat) == list(range(1003))


def test_drop_last_drops_random_indices_not_the_longest() -> None:
    lengths = list(range(105))  # length == index, so the longest are the highest indices
    sampler = LengthBucketBatchSampler(lengths, batch_size=10, seed=0, drop_last=True)
    dropped = [sorted(set(range(105)) - {i for b in sampler.batches(e) for i in b}) for e in range(4)]
    assert all(len(d) == 5 for d in dropped)
    assert dropped[0] != list(range(100, 105))
    assert len({tuple(d) for d in dropped}) == 4


def test_bucketing_cuts_padding_waste_at_least_threefold() -> None:
    sampler = LengthBucketBatchSampler(LENGTHS, batch_size=32, seed=0)
    bucketed = sampler.padding_waste(0)
    order = np.random.default_rng(0).permutation(len(LENGTHS))
    unsorted = padding_waste(LENGTHS, [order[i : i + 32] for i in range(0, len(order), 32)])
    # Uniform lengths 5..128: a random batch of 32 pads to ~125 for a mean of ~66 (~47% waste);
    # sorted mega-buckets of 1600 leave ~1% waste.
    assert 0.45 < unsorted < 0.49
    assert bucketed < 0.02
    assert unsorted >= 3 * bucketed


def test_padding_waste_concrete() -> None:
    assert padding_waste([1, 3, 2, 2], [[0, 1], [2, 3]]) == pytest.approx(2 / 10)
    assert padding_waste([0, 0], [[0, 1]]) == 0.0


def test_resume_gives_the_same_sequence_as_running_straight() -> None:
    sampler = LengthBucketBatchSampler(LENGTHS[:50], batch_size=8, seed=3, bucket_multiplier=2)
    assert len(sampler) == 7  # so 14 batches cross an epoch boundary exactly
    straight = list(itertools.islice(BatchStream(sampler), 14))

    stream = BatchStream(sampler)
    first = list(itertools.islice(stream, 7))
    state = stream.state_dict()
    assert state == {"epoch": 1, "batch": 0}
    resumed = BatchStream.from_state(sampler, state)
    assert first + list(itertools.islice(resumed, 7)) == straight

    stream = BatchStream(sampler)
    first = list(itertools.islice(stream, 10))
    assert stream.state_dict() == {"epoch": 1, "batch": 3}
    rest = list(itertools.islice(BatchStream.from_state(sampler, {"epoch": 1, "batch": 3}), 4))
    assert first + rest == straight

    assert [(item.epoch, item.batch) for item in straight[5:9]] == [(0, 5), (0, 6), (1, 0), (1, 1)]
    assert straight[7].indices == sampler.batches(1)[0]


def test_stream_start_positions() -> None:
    sampler = LengthBucketBatchSampler([3, 1, 2], batch_size=1)
    end_of_epoch = BatchStream(sampler, start_epoch=2, start_batch=3)
    assert end_of_epoch.state_dict() == {"epoch": 3, "batch": 0}
    with pytest.raises(ValueError, match="cannot start at epoch 0, batch 4"):
        BatchStream(sampler, start_batch=4)
    with pytest.raises(ValueError, match="needs 'epoch' and 'batch'"):
        BatchStream.from_state(sampler, {"step": 3})


def test_sampler_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="no batches"):
        LengthBucketBatchSampler([], batch_size=4)
    with pytest.raises(ValueError, match="no batches"):
        LengthBucketBatchSampler([1, 2, 3], batch_size=4, drop_last=True)
    with pytest.raises(ValueError, match="batch_size"):
        LengthBucketBatchSampler([1, 2], batch_size=0)


def test_shard_is_contiguous_and_balanced() -> None:
    batch = list(range(100, 110))
    shards = [shard(batch, rank, 4) for rank in range(4)]
    assert shards == [[100, 101, 102], [103, 104, 105], [106, 107], [108, 109]]
    assert sum(shards, []) == batch
    for n, world in [(32, 8), (33, 8), (7, 7), (1000, 3)]:
        sizes = [len(shard(list(range(n)), rank, world)) for rank in range(world)]
        assert sum(sizes) == n and max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError, match="cannot shard a batch of 3 over 4 ranks"):
        shard([1, 2, 3], 0, 4)
    with pytest.raises(ValueError, match="rank must be in"):
        shard([1, 2, 3], 3, 3)

"""The one length-sorted batching every runtime encodes with.

Sequences of similar length go through a forward pass together (longest first, ties in input
order), so a packed batch's attention runs on rows of nearly equal length and a padded one wastes
little; the vectors come back in input order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from modsenc.utils.logs import progress


def length_sorted(lengths: Sequence[int], batch_size: int) -> Iterator[np.ndarray]:
    """Indices of ``lengths``, longest first (stable), ``batch_size`` at a time."""
    order = np.argsort([-n for n in lengths], kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def encode_length_sorted(
    token_ids: Sequence[Sequence[int]],
    batch_size: int,
    dim: int,
    encode_batch: Callable[[list[Sequence[int]]], torch.Tensor],
    show_progress_bar: bool = False,
) -> torch.Tensor:
    """(len(token_ids), dim) float32 CPU vectors: ``encode_batch`` (one batch's ids -> its
    vectors) on the ``length_sorted`` batches, put back in input order."""
    out = torch.empty(len(token_ids), dim)
    batches = length_sorted([len(ids) for ids in token_ids], batch_size)
    total = -(-len(token_ids) // batch_size)
    for index in progress(batches, desc="encode", total=total, enabled=show_progress_bar):
        out[torch.as_tensor(index)] = encode_batch([token_ids[i] for i in index]).float().cpu()
    return out

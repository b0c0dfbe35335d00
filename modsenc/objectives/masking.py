"""BERT-style masking with MEXMA's settings: ratio per sentence, 80/10/10, at least one token."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modsenc.objectives.losses.cross_unmasking import IGNORE_INDEX


def mask_sequence(
    ids: Sequence[int],
    rng: np.random.Generator,
    mask_token_id: int,
    special_ids: frozenset[int],
    random_pool: np.ndarray,
    ratio: float = 0.4,
) -> tuple[list[int], list[int]]:
    """Mask one token sequence. Returns (masked ids, labels).

    Each non-special token is selected with probability ``ratio``; the draw is repeated until at
    least one token is selected (as the authors' code does), so every sentence contributes to the
    unmasking loss. Selected tokens become ``<mask>`` (80%), a random non-special token (10%) or
    stay unchanged (10%). Labels hold the original id at selected positions, ``IGNORE_INDEX`` elsewhere.
    """
    ids_arr = np.asarray(ids, dtype=np.int64)
    candidates = ~np.isin(ids_arr, np.fromiter(special_ids, dtype=np.int64))
    if not candidates.any():
        return list(ids), [IGNORE_INDEX] * len(ids)
    while True:
        selected = (rng.random(len(ids_arr)) < ratio) & candidates
        if selected.any():
            break
    labels = np.where(selected, ids_arr, IGNORE_INDEX)
    action = rng.random(len(ids_arr))
    masked = ids_arr.copy()
    masked[selected & (action < 0.8)] = mask_token_id
    to_random = selected & (action >= 0.8) & (action < 0.9)
    masked[to_random] = rng.choice(random_pool, size=int(to_random.sum()))
    return masked.tolist(), labels.tolist()

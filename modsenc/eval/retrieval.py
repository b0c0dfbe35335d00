"""Paraphrase / translation retrieval: precision@1 of finding each query's own partner."""

from __future__ import annotations

import numpy as np


def precision_at_1(queries: np.ndarray, targets: np.ndarray) -> float:
    """Share (x100) of rows i whose most cosine-similar target is target i."""
    if queries.shape != targets.shape:
        raise ValueError(f"queries and targets must align, got {queries.shape} and {targets.shape}")
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True).clip(1e-12)
    t = targets / np.linalg.norm(targets, axis=1, keepdims=True).clip(1e-12)
    best = (q @ t.T).argmax(axis=1)
    return float((best == np.arange(len(q))).mean() * 100)

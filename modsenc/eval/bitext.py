"""Bitext mining metrics: LASER's xsim error rate (ratio margin) and P@1 with plain cosine.

xsim, as in LASER: both sides L2-normalised; for every sentence the mean cosine of its k=4 nearest
neighbours on the other side (faiss inner-product search); a candidate pair scores
``cos(x, y) / ((knn_mean(x) + knn_mean(y)) / 2)``; a source sentence is an error when its best
target's *text* differs from its gold translation's text (so a duplicated target sentence is not
an error), in percent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import permutations

import numpy as np

EncodeFn = Callable[[Sequence[str]], np.ndarray]


def l2_normalise(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.clip(norms, 1e-12, None)


def knn(queries: np.ndarray, database: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(similarities, indices) of the ``k`` most inner-product-similar database rows, exact (faiss)."""
    import faiss  # noqa: PLC0415 - imported on first search, so commands that never search start faster

    index = faiss.IndexFlatIP(database.shape[1])
    index.add(database)
    return index.search(queries, min(k, database.shape[0]))


def margin_best(src: np.ndarray, tgt: np.ndarray, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """For each (normalised) source row: the index and ratio-margin score of its best target."""
    sims, candidates = knn(src, tgt, k)
    tgt_knn, _ = knn(tgt, src, k)
    src_mean, tgt_mean = sims.mean(axis=1), tgt_knn.mean(axis=1)
    # As in LASER, the margin rescores each source's k nearest targets by cosine.
    scores = sims / ((src_mean[:, None] + tgt_mean[candidates]) / 2)
    best = scores.argmax(axis=1)
    rows = np.arange(len(src))
    return candidates[rows, best], scores[rows, best]


def xsim_correct(
    src: np.ndarray, tgt: np.ndarray, tgt_texts: Sequence[str], gold: Sequence[int] | None = None, k: int = 4
) -> np.ndarray:
    """For every source row, whether margin-based retrieval finds ``gold[i]`` (default ``i``); a
    target with the same text as the gold one counts as found (duplicates are indistinguishable)."""
    src, tgt = l2_normalise(src), l2_normalise(tgt)
    gold = np.arange(len(src)) if gold is None else np.asarray(gold)
    found, _ = margin_best(src, tgt, k)
    return np.array([tgt_texts[f] == tgt_texts[g] for f, g in zip(found, gold)], dtype=bool)


def xsim_error(
    src: np.ndarray, tgt: np.ndarray, tgt_texts: Sequence[str], gold: Sequence[int] | None = None, k: int = 4
) -> float:
    """Error rate (%) of margin-based retrieval of ``gold[i]`` (default ``i``) for every source row."""
    correct = xsim_correct(src, tgt, tgt_texts, gold, k)
    return 100.0 * float((~correct).sum()) / len(correct)


def precision_at_1(src: np.ndarray, tgt: np.ndarray, tgt_texts: Sequence[str] | None = None) -> float:
    """P@1 (%) of plain cosine nearest-neighbour retrieval of row i (by text when given)."""
    _, found = knn(l2_normalise(src), l2_normalise(tgt), 1)
    found = found[:, 0]
    if tgt_texts is None:
        return 100.0 * float((found == np.arange(len(src))).mean())
    return 100.0 * sum(tgt_texts[f] == tgt_texts[i] for i, f in enumerate(found)) / len(src)


def bitext_mining(
    columns: dict[str, list[str]],
    encoders: dict[str, EncodeFn],
    pairs: Sequence[tuple[str, str]] | None = None,
    pivot: str | None = "en",
    k: int = 4,
) -> dict[str, dict[str, float]]:
    """xsim error and P@1 for each direction of each language pair of a multi-parallel corpus.

    ``pairs=None``: pivot-centric pairs in both directions (``pivot=None``: all ordered pairs).
    Rows with an empty cell in either language are left out of that pair.
    """
    langs = [lang for lang in columns if lang in encoders]
    if pairs is None:
        pairs = [(a, b) for a, b in permutations(langs, 2) if pivot is None or pivot in (a, b)]
    cache: dict[str, np.ndarray] = {
        lang: encoders[lang](columns[lang]) for lang in {x for p in pairs for x in p}
    }
    results: dict[str, dict[str, float]] = {}
    for a, b in pairs:
        rows = [i for i, (x, y) in enumerate(zip(columns[a], columns[b])) if x and y]
        src, tgt = cache[a][rows], cache[b][rows]
        tgt_texts = [columns[b][i] for i in rows]
        results[f"{a}-{b}"] = {
            "xsim_error": xsim_error(src, tgt, tgt_texts, k=k),
            "p@1": precision_at_1(src, tgt, tgt_texts),
            "n": len(rows),
        }
    return results

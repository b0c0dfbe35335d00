"""Mining translation pairs from two monolingual collections with LASER's ratio margin.

Both directions are searched with faiss in chunks of queries, so memory holds the two embedding
matrices, one index and one chunk of results. Above ``exact_limit`` database rows the index is
approximate (an inverted file over k-means cells, ``IndexIVFFlat``, searching ``nprobe`` cells);
below it the search is exact. Each sentence's best partner is found in both directions (LASER's
"max" retrieval); pairs are then taken greedily by score so that no sentence is used twice.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from modsenc.data.readers import iter_lines
from modsenc.eval.bitext import l2_normalise
from modsenc.utils.io import atomic_write_text
from modsenc.utils.logs import progress
from modsenc.utils.outputs import check_output_file

if TYPE_CHECKING:
    import faiss


@dataclass
class MinedPair:
    score: float
    src: int
    tgt: int


def build_index(
    database: np.ndarray, exact_limit: int = 200_000, nprobe: int = 16, seed: int = 0
) -> faiss.Index:
    import faiss  # noqa: PLC0415 - imported on first search, so commands that never mine start faster

    dim = database.shape[1]
    if len(database) <= exact_limit:
        index = faiss.IndexFlatIP(dim)
    else:
        nlist = int(4 * math.sqrt(len(database)))  # faiss's rule of thumb: 4-16 x sqrt(n) cells
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(seed)
        sample = database[rng.choice(len(database), size=min(len(database), 64 * nlist), replace=False)]
        index.train(sample)
        index.nprobe = nprobe
    index.add(database)
    return index


def chunked_knn(
    queries: np.ndarray, index: faiss.Index, k: int, chunk_size: int, desc: str
) -> tuple[np.ndarray, np.ndarray]:
    sims = np.empty((len(queries), k), dtype=np.float32)
    ids = np.empty((len(queries), k), dtype=np.int64)
    for start in progress(range(0, len(queries), chunk_size), desc=desc, enabled=len(queries) > chunk_size):
        sims[start : start + chunk_size], ids[start : start + chunk_size] = index.search(
            queries[start : start + chunk_size], k
        )
    return sims, ids


def mine(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int = 4,
    chunk_size: int = 16384,
    exact_limit: int = 200_000,
    nprobe: int = 16,
    threshold: float | None = None,
) -> list[MinedPair]:
    """Margin-scored pairs (best first) between the rows of ``src`` and ``tgt``."""
    if len(src) == 0 or len(tgt) == 0:
        raise ValueError(f"nothing to mine: {len(src)} source and {len(tgt)} target sentences")
    src, tgt = l2_normalise(src), l2_normalise(tgt)
    k = min(k, len(src), len(tgt))
    fwd_sims, fwd_ids = chunked_knn(
        src, build_index(tgt, exact_limit, nprobe), k, chunk_size, "search src->tgt"
    )
    bwd_sims, bwd_ids = chunked_knn(
        tgt, build_index(src, exact_limit, nprobe), k, chunk_size, "search tgt->src"
    )
    src_mean, tgt_mean = neighbour_means(fwd_sims, fwd_ids), neighbour_means(bwd_sims, bwd_ids)
    fwd_best, fwd_score = best_by_margin(fwd_sims, fwd_ids, src_mean, tgt_mean)
    bwd_best, bwd_score = best_by_margin(bwd_sims, bwd_ids, tgt_mean, src_mean)
    candidates = np.concatenate(
        [
            np.stack([fwd_score, np.arange(len(src)), fwd_best], axis=1),
            np.stack([bwd_score, bwd_best, np.arange(len(tgt))], axis=1),
        ]
    )
    return select_pairs(candidates, len(src), len(tgt), threshold)


def neighbour_means(sims: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each row's mean similarity to its k nearest neighbours (the margin's denominator).

    Approximate search may return -1 for empty cells: those neighbours are ignored.
    """
    return np.nanmean(np.where(ids >= 0, sims, np.nan), axis=1)


def best_by_margin(
    sims: np.ndarray, ids: np.ndarray, own: np.ndarray, other: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's best neighbour by LASER's ratio margin, ``cos(x, y) / ((mean_x + mean_y) / 2)``.

    ``own`` are the queries' neighbour means, ``other`` the database's (indexed by neighbour id);
    a row with no neighbour gets the score -inf.
    """
    safe = np.where(ids >= 0, ids, 0)
    scores = np.where(ids >= 0, sims / ((own[:, None] + other[safe]) / 2), -np.inf)
    column = scores.argmax(axis=1)
    rows = np.arange(len(ids))
    return safe[rows, column], scores[rows, column]


def select_pairs(
    candidates: np.ndarray, n_src: int, n_tgt: int, threshold: float | None = None
) -> list[MinedPair]:
    """Pairs from ``(score, src, tgt)`` candidate rows, best first, no sentence used twice."""
    candidates = candidates[np.isfinite(candidates[:, 0])]
    candidates = candidates[np.argsort(-candidates[:, 0], kind="stable")]
    used_src, used_tgt = np.zeros(n_src, bool), np.zeros(n_tgt, bool)
    pairs: list[MinedPair] = []
    for score, i, j in candidates:
        i, j = int(i), int(j)
        if threshold is not None and score < threshold:
            break
        if used_src[i] or used_tgt[j]:
            continue
        used_src[i] = used_tgt[j] = True
        pairs.append(MinedPair(float(score), i, j))
    return pairs


def write_pairs(
    path: str | os.PathLike,
    pairs: list[MinedPair],
    src_texts: Sequence[str] | Mapping[int, str],
    tgt_texts: Sequence[str] | Mapping[int, str],
) -> None:
    """``score<TAB>src<TAB>tgt`` lines, best first, written atomically (texts indexed by row)."""
    lines = [f"{p.score:.6f}\t{src_texts[p.src]}\t{tgt_texts[p.tgt]}\n" for p in pairs]
    atomic_write_text(Path(path), "".join(lines))


def mine_files(
    zoo_dir: str | os.PathLike,
    src: str | os.PathLike,
    tgt: str | os.PathLike,
    output_path: str | os.PathLike,
    src_lang: str = "auto",
    tgt_lang: str = "auto",
    threshold: float | None = None,
    overwrite: bool = False,
    k: int = 4,
    exact_limit: int = 200_000,
    batch_size: int = 64,
    dtype: str = "auto",
) -> int:
    """``modsenc mine``: encode the non-blank lines of two text files with a zoo (each line through
    its language's modules; ``auto`` detects per line), mine margin-scored pairs (``mine``), write
    them as ``score<TAB>src<TAB>tgt`` to ``output_path`` (``write_pairs``); returns how many.

    The output is checked before anything is read: never inside the zoo, never one of the inputs,
    an existing file only with ``overwrite`` (``modsenc.utils.outputs``)."""
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415 - torch, transformers, the modules
    from modsenc.modules.bundle import Zoo, check_outside_zoo  # noqa: PLC0415

    check_outside_zoo(output_path, Zoo(zoo_dir), "--output")
    check_output_file(output_path, "--output", inputs=[src, tgt], overwrite=overwrite)
    texts = [[line for _, line in iter_lines(p) if line.strip()] for p in (src, tgt)]
    for path, lines in zip((src, tgt), texts):
        if not lines:
            raise ValueError(f"{path}: no non-blank lines; mine needs one sentence per line on each side")
    encoder = ModularEncoder.from_pretrained(zoo_dir, dtype=dtype)
    vectors = [
        encoder.encode(t, lang=lang, batch_size=batch_size, show_progress_bar=True)
        for t, lang in zip(texts, (src_lang, tgt_lang))
    ]
    pairs = mine(vectors[0], vectors[1], k=k, exact_limit=exact_limit, threshold=threshold)
    write_pairs(output_path, pairs, texts[0], texts[1])
    return len(pairs)

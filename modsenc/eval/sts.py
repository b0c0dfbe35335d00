"""Semantic textual similarity: Spearman x100 between cosine similarity and gold scores.

The file format is that of ``../shared/data/eval-dev/sts``: a TSV with the header
``lang1 lang2 sentence1 sentence2 score``; each ``(lang1, lang2)`` group is one test set.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from modsenc.data.errors import DataFormatError
from modsenc.data.readers import check_file, is_language_code, no_rows_error, read_table
from modsenc.data.specs import spec_dict
from modsenc.data.splits import rows_in
from modsenc.eval.bitext import l2_normalise

STS_COLUMNS = ["lang1", "lang2", "sentence1", "sentence2", "score"]

# An encoder for one language: texts -> (n, dim) array.
EncodeFn = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class STSPair:
    lang1: str
    lang2: str
    sentence1: str
    sentence2: str
    score: float


def load_sts(spec: str | os.PathLike | Mapping[str, Any]) -> list[STSPair]:
    """A recipe's or eval's STS entry: a path, or ``{"path": p, "split": "selection" | "report"}``
    (a dev file's part, by sentence group: ``modsenc.data.splits``)."""
    if isinstance(spec, Mapping):
        spec = spec_dict(spec, {"path", "split"}, "STS data")
        pairs = read_sts_tsv(spec["path"])
        if spec.get("split") is None:
            return pairs
        keep = rows_in([(p.sentence1, p.sentence2) for p in pairs], spec["split"])
        return [pairs[i] for i in keep]
    return read_sts_tsv(spec)


def read_sts_tsv(path: str | os.PathLike) -> list[STSPair]:
    check_file(path)
    header_line, header, rows = read_table(path)
    if header != STS_COLUMNS:
        raise DataFormatError(
            path, header_line, f"expected the header {' '.join(STS_COLUMNS)}, got {' '.join(header)}"
        )
    pairs = []
    for lineno, (lang1, lang2, s1, s2, score) in rows:
        for code in (lang1, lang2):
            if not is_language_code(code):
                raise DataFormatError(path, lineno, f"{code!r} is not a language code")
        try:
            value = float(score)
        except ValueError:
            raise DataFormatError(path, lineno, f"score {score!r} is not a number") from None
        pairs.append(STSPair(lang1, lang2, s1, s2, value))
    if not pairs:
        raise no_rows_error(path)
    # A Spearman correlation of one pair, or of constant gold scores, is NaN: say so here
    # instead of reporting "nan" later.
    groups: dict[tuple[str, str], list[float]] = {}
    for pair in pairs:
        groups.setdefault((pair.lang1, pair.lang2), []).append(pair.score)
    for (lang1, lang2), scores in groups.items():
        if len(scores) < 2:
            raise DataFormatError(
                path,
                None,
                f"{lang1}-{lang2} has {len(scores)} scored pair; a Spearman correlation needs at least 2 "
                "pairs per language pair (add pairs, or remove that row)",
            )
        if len(set(scores)) == 1:
            raise DataFormatError(
                path,
                None,
                f"every {lang1}-{lang2} pair has the score {scores[0]}; a Spearman correlation needs "
                "scores that differ",
            )
    return pairs


def row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cosine(a[i], b[i]) for every row i."""
    return (l2_normalise(a) * l2_normalise(b)).sum(axis=1)


def spearman_x100(a: np.ndarray, b: np.ndarray, gold: Sequence[float]) -> float:
    """Spearman x100 of row-wise cosine(a, b) against ``gold``."""
    return float(spearmanr(row_cosines(a, b), np.asarray(gold)).statistic * 100)


def evaluate_sts(
    pairs: Sequence[STSPair], encoders: dict[str, EncodeFn], lang_pairs: Sequence[tuple[str, str]]
) -> dict[str, float]:
    """Spearman x100 per language pair (``"en-uz"``); ``encoders[lang]`` embeds that language."""
    results = {}
    for lang1, lang2 in lang_pairs:
        subset = [p for p in pairs if (p.lang1, p.lang2) == (lang1, lang2)]
        if not subset:
            raise ValueError(f"no {lang1}-{lang2} pairs in the STS data")
        a = encoders[lang1]([p.sentence1 for p in subset])
        b = encoders[lang2]([p.sentence2 for p in subset])
        results[f"{lang1}-{lang2}"] = spearman_x100(a, b, [p.score for p in subset])
    return results

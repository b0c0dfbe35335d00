"""Cross-lingual similarity diagnostics from the modular-encoders paper (section 4.3).

* RSIM: Pearson correlation between the monolingual cosine similarities of all sentence pairs of
  a parallel corpus in language A and the same pairs in language B (1 = identical geometry).
* Language bias: average Spearman over the bilingual STS sets minus Spearman on their concatenation.
  A model that scores same-language pairs higher than cross-language ones, whatever the meaning,
  does well on each set alone but worse on the pooled set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr

from modsenc.eval.bitext import l2_normalise


def rsim(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson r between the upper-triangle cosine similarities of two aligned embedding sets."""
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"RSIM needs aligned rows, got {a.shape[0]} and {b.shape[0]}")
    rows, cols = np.triu_indices(a.shape[0], k=1)
    sims_a = (l2_normalise(a) @ l2_normalise(a).T)[rows, cols]
    sims_b = (l2_normalise(b) @ l2_normalise(b).T)[rows, cols]
    return float(pearsonr(sims_a, sims_b).statistic)


def language_bias(sets: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> dict[str, float]:
    """``sets``: name -> (predicted similarities, gold scores) of each bilingual STS set (x100)."""
    per_set = {name: float(spearmanr(pred, gold).statistic * 100) for name, (pred, gold) in sets.items()}
    pooled_pred = np.concatenate([np.asarray(p, dtype=float) for p, _ in sets.values()])
    pooled_gold = np.concatenate([np.asarray(g, dtype=float) for _, g in sets.values()])
    pooled = float(spearmanr(pooled_pred, pooled_gold).statistic * 100)
    average = float(np.mean(list(per_set.values())))
    return {
        "average": average,
        "pooled": pooled,
        "bias": average - pooled,
        **{f"spearman_{k}": v for k, v in per_set.items()},
    }

"""experiments/significance.py: the paired tests behind "how sure is this gap", checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from experiments import significance
from modsenc.eval.sts import STSPair


def test_mcnemar_counts_the_discordant_sentences_and_gives_the_exact_p_value() -> None:
    model = np.array([True, True, True, False, True, False])
    baseline = np.array([True, False, False, True, False, False])
    # only the model: rows 1, 2, 4; only the baseline: row 3. Two-sided exact test of 3 of 4
    # under p = 1/2: P(X <= 1) + P(X >= 3) = (1 + 4 + 4 + 1) / 16.
    assert significance.mcnemar(model, baseline) == (3, 1, pytest.approx(10 / 16))
    assert significance.mcnemar(model, model) == (0, 0, 1.0)  # no discordant sentence: no evidence


def test_spearman_gap_and_its_bootstrap_interval() -> None:
    gold = np.arange(20, dtype=float)
    model = gold / 20  # ranks exactly as gold: Spearman 1
    baseline = model.copy()
    baseline[[0, 1]] = baseline[[1, 0]]  # one swap: 1 - 6 * (1 + 1) / (20 * (400 - 1)) = 1 - 12 / 7980
    diff, low, high = significance.spearman_gap(model, baseline, gold, resamples=500)
    assert diff == pytest.approx(100 * 12 / 7980)
    # the baseline can never rank better than gold itself, so no resample favours it
    assert 0.0 <= low <= diff <= high
    assert significance.spearman_gap(model, baseline, gold, resamples=500) == (diff, low, high)  # seeded


def test_scored_encodes_each_side_once_and_scores_item_by_item() -> None:
    vectors = {"a": [1.0, 0.0], "b": [0.0, 1.0], "x": [1.0, 0.1], "y": [0.1, 1.0]}
    calls = []

    def encoder(lang: str):
        def encode(texts: list[str]) -> np.ndarray:
            calls.append((lang, tuple(texts)))
            return np.array([vectors[t] for t in texts])

        return encode

    scored = significance.Scored(encoder, encoder)
    columns = {"en": ["a", "b"], "uz": ["x", "y"]}
    assert scored.mining(columns, "en", "uz").tolist() == [True, True]
    assert scored.mining(columns, "uz", "en").tolist() == [True, True]
    assert calls == [("en", ("a", "b")), ("uz", ("x", "y"))]  # the second direction reuses them
    pairs = [STSPair("en", "uz", "a", "x", 5.0), STSPair("en", "uz", "a", "y", 0.0)]
    # cos(a, x) = 1 / sqrt(1.01), cos(a, y) = 0.1 / sqrt(1.01)
    np.testing.assert_allclose(
        scored.sts_cosines(pairs, "en", "uz"), [1 / 1.01**0.5, 0.1 / 1.01**0.5], rtol=1e-6
    )

"""Metrics on hand-made cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from modsenc.eval.bitext import bitext_mining, precision_at_1, xsim_error
from modsenc.eval.mining import mine
from modsenc.eval.similarity import language_bias, rsim
from modsenc.eval.sts import spearman_x100


def _basis(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, dim)).astype(np.float32)


def test_xsim_of_identical_spaces_is_zero_and_of_a_shuffle_is_known() -> None:
    x = _basis(50)
    texts = [f"t{i}" for i in range(50)]
    assert xsim_error(x, x, texts) == 0.0
    assert precision_at_1(x, x) == 100.0
    # Target vectors of rows 0..9 rotated by one: each of sources 0..9 finds its own vector in a
    # row whose (gold-aligned) text belongs to another sentence, so exactly 10 of 50 are errors.
    order = list(range(1, 10)) + [0] + list(range(10, 50))
    tgt = x[order]
    assert xsim_error(x, tgt, texts) == pytest.approx(20.0)
    assert precision_at_1(x, tgt) == pytest.approx(80.0)
    assert precision_at_1(x, tgt, texts) == pytest.approx(80.0)


def test_duplicate_target_texts_are_not_errors() -> None:
    x = _basis(10)
    x[3] = x[4]  # sentence 3 occurs twice (rows 3 and 4), on both sides
    texts = [f"t{i}" for i in range(10)]
    texts[3] = texts[4]
    assert precision_at_1(x, x) < 100.0  # by position, one of the twins finds the other's row
    assert xsim_error(x, x, texts) == 0.0 and precision_at_1(x, x, texts) == 100.0


def test_margin_beats_cosine_against_a_hub() -> None:
    """A 'hub' target close to every source wins by cosine but not by margin."""
    rng = np.random.default_rng(0)
    src = rng.standard_normal((20, 8)).astype(np.float32)
    tgt = src + 0.9 * rng.standard_normal((20, 8)).astype(np.float32)
    hub = src.mean(axis=0, keepdims=True) * 6
    tgt = np.concatenate([tgt, hub])
    texts = [f"t{i}" for i in range(21)]
    assert xsim_error(src, tgt, texts) <= 100 - precision_at_1(src, tgt, texts)


def test_bitext_mining_on_a_multiparallel_corpus() -> None:
    x = _basis(30)
    columns = {
        "en": [f"e{i}" for i in range(30)],
        "de": [f"d{i}" for i in range(30)],
        "uz": [f"u{i}" for i in range(29)] + [""],
    }
    vectors = {"en": x, "de": x + 0.01, "uz": x[::-1]}
    encoders = {lang: (lambda texts, lang=lang: vectors[lang][: len(texts)]) for lang in columns}
    result = bitext_mining(columns, encoders)
    assert set(result) == {"en-de", "de-en", "en-uz", "uz-en"}
    assert result["en-de"]["xsim_error"] == 0.0 and result["en-de"]["n"] == 30
    assert result["en-uz"]["n"] == 29  # the empty cell is left out
    assert result["en-uz"]["xsim_error"] > 90


def test_spearman_equals_scipy() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((40, 8)), rng.standard_normal((40, 8))
    gold = rng.random(40)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert spearman_x100(a, b, gold) == pytest.approx(spearmanr(cos, gold).statistic * 100)


def test_rsim() -> None:
    x = _basis(25)
    assert rsim(x, x) == pytest.approx(1.0)
    rotation = np.linalg.qr(np.random.default_rng(2).standard_normal((16, 16)))[0].astype(np.float32)
    assert rsim(x, x @ rotation) == pytest.approx(1.0, abs=1e-5)  # a rotation keeps all cosines
    assert abs(rsim(x, _basis(25, seed=9))) < 0.2


def test_language_bias() -> None:
    gold = np.linspace(0, 5, 20)
    fair = {"en-uz": (gold, gold), "en-kk": (gold, gold)}
    assert language_bias(fair)["bias"] == pytest.approx(0.0)
    # Same ranking within each set, but kk pairs all scored 10 higher: pooled ranking suffers.
    biased = {"en-uz": (gold, gold), "en-kk": (gold + 10, gold)}
    result = language_bias(biased)
    assert result["average"] == pytest.approx(100.0) and result["pooled"] < 90 and result["bias"] > 10


def test_mine_finds_planted_pairs_exact_and_approximate() -> None:
    rng = np.random.default_rng(3)
    n, dim = 3000, 32
    src = rng.standard_normal((n, dim)).astype(np.float32)
    planted = rng.choice(n, size=300, replace=False)
    tgt = rng.standard_normal((n, dim)).astype(np.float32)
    tgt[planted] = src[planted] + 0.05 * rng.standard_normal((300, dim)).astype(np.float32)
    for exact_limit in (10**9, 100):  # exact search, then the IVF index
        pairs = mine(src, tgt, exact_limit=exact_limit, chunk_size=512, nprobe=8)
        top = {(p.src, p.tgt) for p in pairs[:300]}
        assert len(top & {(int(i), int(i)) for i in planted}) >= 297, exact_limit
        assert pairs == sorted(pairs, key=lambda p: -p.score)
        assert len({p.src for p in pairs}) == len(pairs) == len({p.tgt for p in pairs})
    exact = mine(src, tgt)
    assert len(mine(src, tgt, threshold=exact[299].score)) == 300

"""Metrics on hand-made cases with known answers."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
from scipy.stats import spearmanr

from modsenc.eval import mining
from modsenc.eval.bitext import (
    bitext_mining,
    l2_normalise,
    margin_best,
    precision_at_1,
    xsim_correct,
    xsim_error,
)
from modsenc.eval.mining import MinedPair, build_index, mine, write_pairs
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


def test_l2_normalise_leaves_a_zero_vector_at_zero() -> None:
    out = l2_normalise(np.array([[0.0, 0.0], [3.0, 4.0]]))
    assert out.dtype == np.float32 and out.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(out, np.array([[0.0, 0.0], [0.6, 0.8]], dtype=np.float32))


# A hand-worked hub case (unit vectors, so every cosine is a dot product), k = 2.
#   sources  a = (1, 0)        b = (0.6, 0.8)    c = (-0.8, 0.6)
#   targets ta = (0.6, -0.8)  tb = (0, 1)       tc = (-0.6, 0.8)   h = (0.8, 0.6)  (h: a hub)
# cos(row, col):     ta     tb     tc     h       kNN mean (k=2)
#              a    0.6    0     -0.6    0.8      (0.8 + 0.6) / 2  = 0.70
#              b   -0.28   0.8    0.28   0.96     (0.96 + 0.8) / 2 = 0.88
#              c   -0.96   0.6    0.96  -0.28     (0.96 + 0.6) / 2 = 0.78
# kNN mean of each target over the sources: ta (0.6 - 0.28) / 2 = 0.16, tb (0.8 + 0.6) / 2 = 0.70,
#   tc (0.96 + 0.28) / 2 = 0.62, h (0.96 + 0.8) / 2 = 0.88.
# Ratio margin cos / ((knn(x) + knn(y)) / 2) of each source's k = 2 nearest targets:
#   a: ta 0.6 / 0.43 = 1.395349   h  0.8 / 0.79 = 1.012658   -> ta (right; plain cosine takes h)
#   b: tb 0.8 / 0.79 = 1.012658   h 0.96 / 0.88 = 1.090909   -> h  (wrong, as by cosine)
#   c: tc 0.96 / 0.70 = 1.371429  tb 0.6 / 0.74 = 0.810811   -> tc (right, as by cosine)
# so the margin's error rate is 1/3 and plain cosine's 2/3 (a and b both take the hub).
HUB_SRC = np.array([[1.0, 0.0], [0.6, 0.8], [-0.8, 0.6]], dtype=np.float32)
HUB_TGT = np.array([[0.6, -0.8], [0.0, 1.0], [-0.6, 0.8], [0.8, 0.6]], dtype=np.float32)
HUB_TEXTS = ["ta", "tb", "tc", "hub"]


def test_margin_best_by_hand() -> None:
    found, scores = margin_best(HUB_SRC, HUB_TGT, k=2)
    assert found.tolist() == [0, 3, 2]
    np.testing.assert_allclose(scores, [0.6 / 0.43, 0.96 / 0.88, 0.96 / 0.70], rtol=1e-5)


def test_xsim_uses_the_margin_not_plain_cosine() -> None:
    assert xsim_error(HUB_SRC, HUB_TGT, HUB_TEXTS, k=2) == pytest.approx(100 / 3)
    assert precision_at_1(HUB_SRC, HUB_TGT, HUB_TEXTS) == pytest.approx(100 / 3)  # a -> h, b -> h
    assert precision_at_1(HUB_SRC, HUB_TGT) == pytest.approx(100 / 3)  # by position, the same here
    # Scale does not matter (both sides are normalised) ...
    assert xsim_error(3 * HUB_SRC, 0.5 * HUB_TGT, HUB_TEXTS, k=2) == pytest.approx(100 / 3)
    # ... the gold rows do: if h were b's translation, nothing would be wrong.
    assert xsim_error(HUB_SRC, HUB_TGT, HUB_TEXTS, gold=[0, 3, 2], k=2) == 0.0
    # ... and so does k. k = 4: the kNN means are over all targets (a 0.2, b 0.44, c 0.08) and all 3
    # sources (ta -0.213, tb 0.467, tc 0.213, h 0.493): a -> h (0.8 / 0.347 = 2.31 beats ta, whose
    # denominator is negative), b -> h (0.96 / 0.467 = 2.06 > tb 0.8 / 0.453 = 1.76) and c -> ta
    # (-0.96 / -0.067 = 14.4): every source is wrong.
    assert xsim_error(HUB_SRC, HUB_TGT, HUB_TEXTS) == 100.0


def test_xsim_correct_says_which_sources_are_found() -> None:
    # by hand above: a -> row 0 (right), b -> h at row 3 (wrong), c -> row 2 (right)
    assert xsim_correct(HUB_SRC, HUB_TGT, HUB_TEXTS, k=2).tolist() == [True, False, True]
    assert xsim_correct(HUB_SRC, HUB_TGT, HUB_TEXTS, gold=[0, 3, 2], k=2).tolist() == [True, True, True]


def test_mine_by_hand() -> None:
    # Forward (each source's best target) as in test_margin_best_by_hand; backward, each target's
    # best source among its k = 2 nearest: ta -> a 1.395349 (b: -0.28 / 0.52 < 0), tb -> b 1.012658
    # (c: 0.6 / 0.74 = 0.810811), tc -> c 1.371429 (b: 0.28 / 0.75 = 0.373), h -> b 1.090909
    # (a: 0.8 / 0.79 = 1.012658). Greedy by score: a-ta, c-tc, b-h; b-tb comes last and b is taken.
    pairs = mine(HUB_SRC, HUB_TGT, k=2)
    assert [(p.src, p.tgt) for p in pairs] == [(0, 0), (2, 2), (1, 3)]
    np.testing.assert_allclose([p.score for p in pairs], [0.6 / 0.43, 0.96 / 0.70, 0.96 / 0.88], rtol=1e-5)
    # The threshold keeps scores >= it, and stops there.
    assert [(p.src, p.tgt) for p in mine(HUB_SRC, HUB_TGT, k=2, threshold=pairs[1].score)] == [(0, 0), (2, 2)]
    assert mine(HUB_SRC, HUB_TGT, k=2, threshold=1.4) == []
    # One query per chunk: the same pairs.
    assert mine(HUB_SRC, HUB_TGT, k=2, chunk_size=1) == pairs
    with pytest.raises(ValueError, match="nothing to mine: 0 source and 4 target"):
        mine(HUB_SRC[:0], HUB_TGT)


def test_mine_caps_k_at_both_sides_and_refuses_empty_input() -> None:
    # k = 4 > 3 sources: the search is k = 3 both ways, whichever side is the shorter.
    assert mine(HUB_SRC, HUB_TGT) == mine(HUB_SRC, HUB_TGT, k=3)
    assert mine(HUB_TGT, HUB_SRC) == mine(HUB_TGT, HUB_SRC, k=3)
    # One source: k = 1; a's nearest is h (0.8), and h's nearest source is a: margin 0.8 / 0.8 = 1.
    assert mine(HUB_SRC[:1], HUB_TGT, k=2) == [MinedPair(pytest.approx(1.0), 0, 3)]
    assert len(mine(HUB_SRC, HUB_TGT[:1], k=2)) == 1
    with pytest.raises(ValueError, match="nothing to mine: 0 source and 4 target sentences"):
        mine(HUB_SRC[:0], HUB_TGT)
    with pytest.raises(ValueError, match="nothing to mine: 3 source and 0 target sentences"):
        mine(HUB_SRC, HUB_TGT[:0])


class _Cells:
    """An approximate index in miniature: query i sees only the database rows in ``visible[i]`` (the
    cells it probes), so its k results are padded with id -1, faiss's "not found", when those are
    fewer than k."""

    def __init__(self, database: np.ndarray, visible: list[list[int]]) -> None:
        self.database, self.visible = database, visible

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sims = np.full((len(queries), k), -3.4e38, dtype=np.float32)
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        for i, row in enumerate(queries @ self.database.T):
            found = sorted(self.visible[i], key=lambda j: -row[j])[:k]
            sims[i, : len(found)], ids[i, : len(found)] = row[found], found
        return sims, ids


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # faiss's -FLT_MAX fill; the mean of no neighbour
def test_mine_ignores_neighbours_an_approximate_search_did_not_find(monkeypatch) -> None:
    # The hub case with two neighbours missing: source a finds only ta (a's kNN mean is 0.6) and
    # target ta finds only b (ta's kNN mean is -0.28). Forward, a -> ta scores 0.6 / ((0.6 - 0.28) / 2)
    # = 3.75 (its missing neighbour counts for nothing); b and c are as before (b -> h 1.090909,
    # c -> tc 0.96 / ((0.78 + 0.62) / 2) = 1.371429). Backward, ta -> b scores -0.28 / 0.3 < 0;
    # h -> b 1.090909 beats h -> a 0.8 / ((0.88 + 0.6) / 2) = 1.081081. Greedy: a-ta, c-tc, b-h.
    cells = {4: [[0], [0, 1, 2, 3], [0, 1, 2, 3]], 3: [[1], [0, 1, 2], [0, 1, 2], [0, 1, 2]]}
    monkeypatch.setattr(mining, "build_index", lambda database, *_: _Cells(database, cells[len(database)]))
    pairs = mine(HUB_SRC, HUB_TGT, k=2)
    assert [(p.src, p.tgt) for p in pairs] == [(0, 0), (2, 2), (1, 3)]
    np.testing.assert_allclose([p.score for p in pairs], [3.75, 0.96 / 0.70, 0.96 / 0.88], rtol=1e-5)
    # A source and a target that nothing finds (and that find nothing) are left unpaired.
    src, tgt = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [0.6, 0.8]])
    monkeypatch.setattr(mining, "build_index", lambda database, *_: _Cells(database, [[], [1]]))
    assert mine(src, tgt, k=1) == [MinedPair(pytest.approx(1.0), 1, 1)]


def test_mine_hands_its_index_settings_to_both_searches(monkeypatch) -> None:
    calls = []
    real = mining.build_index

    def spy(database, exact_limit, nprobe):
        calls.append((len(database), exact_limit, nprobe))
        return real(database, exact_limit, nprobe)

    monkeypatch.setattr(mining, "build_index", spy)
    mine(HUB_SRC, HUB_TGT, k=2, exact_limit=7, nprobe=3)
    assert calls == [(4, 7, 3), (3, 7, 3)]


def test_build_index_is_exact_up_to_the_limit_and_reproducible_above() -> None:
    x = l2_normalise(np.random.default_rng(5).standard_normal((300, 8)))
    assert isinstance(build_index(x, exact_limit=300), faiss.IndexFlatIP)
    ivf = build_index(x, exact_limit=299, nprobe=5)
    assert isinstance(ivf, faiss.IndexIVFFlat) and ivf.ntotal == 300
    assert ivf.nlist == int(4 * np.sqrt(300)) == 69 and ivf.nprobe == 5
    # The k-means sample is drawn with a fixed seed: the same cells every time.
    again = build_index(x, exact_limit=299, nprobe=5)
    np.testing.assert_array_equal(ivf.quantizer.reconstruct_n(0, 69), again.quantizer.reconstruct_n(0, 69))


def test_write_pairs(tmp_path) -> None:
    pairs = [MinedPair(1.25, 0, 3), MinedPair(0.1234567, 2, 0)]
    out = tmp_path / "pairs.tsv"
    write_pairs(out, pairs, ["a", "b", "c"], HUB_TEXTS)
    assert out.read_text(encoding="utf-8") == "1.250000\ta\thub\n0.123457\tc\tta\n"


def test_the_default_k_is_lasers_4() -> None:
    """Six random 2-D pairs on which k = 3, 4 and 5 give three different xsim errors and k = 4 and 5
    different mined pairs: every function's default must be LASER's k = 4."""
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((6, 2)).astype(np.float32), rng.standard_normal((6, 2)).astype(np.float32)
    texts = [f"t{i}" for i in range(6)]
    assert [xsim_error(src, tgt, texts, k=k) for k in (3, 4, 5)] == pytest.approx([200 / 3, 250 / 3, 100])
    assert xsim_error(src, tgt, texts) == pytest.approx(250 / 3)
    unit_src, unit_tgt = l2_normalise(src), l2_normalise(tgt)
    scores = {k: margin_best(unit_src, unit_tgt, k=k)[1] for k in (4, 5)}
    np.testing.assert_array_equal(margin_best(unit_src, unit_tgt)[1], scores[4])
    assert not np.allclose(scores[4], scores[5])
    assert mine(src, tgt) == mine(src, tgt, k=4) != mine(src, tgt, k=5)
    columns = {"en": texts, "de": [f"d{i}" for i in range(6)]}
    vectors = {"en": src, "de": tgt}
    encoders = {lang: (lambda t, lang=lang: vectors[lang]) for lang in columns}
    assert bitext_mining(columns, encoders)["en-de"]["xsim_error"] == pytest.approx(250 / 3)
    assert bitext_mining(columns, encoders, k=5)["en-de"]["xsim_error"] == pytest.approx(100)


def test_bitext_mining_counts_by_text() -> None:
    # de rows 0 and 1 are the same sentence: en0 finding de1 (and en1 de0) is right.
    columns = {"en": ["Yes.", "Yes!", "No."], "de": ["Ja.", "Ja.", "Nein."]}
    vectors = {
        "en": np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]),
        "de": np.array([[0.0, 1.0], [1.0, 0.0], [-1.0, 0.0]]),
    }
    encoders = {lang: (lambda t, lang=lang: vectors[lang]) for lang in columns}
    result = bitext_mining(columns, encoders, pairs=[("en", "de")], k=2)
    assert result == {"en-de": {"xsim_error": 0.0, "p@1": 100.0, "n": 3}}
    assert precision_at_1(vectors["en"], vectors["de"]) == pytest.approx(100 / 3)  # by position


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

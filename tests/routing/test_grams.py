"""A batch's n-grams cut and looked up in arrays (modsenc.routing.grams) are langid.ngrams' own."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from modsenc.routing import grams as grams_module
from modsenc.routing.grams import GramBatch, GramIndex
from modsenc.routing.langid import ORDERS, ngrams, normalise

TEXTS = [
    "Salom, dunyo!",
    "  Bugun   havo 2024-yil juda yaxshi.  ",
    "Сәлем, әлем!",
    "ئۇيغۇرچە تېكىست",
    "日本語のテキスト",
    "emoji 😀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 past the BMP",
    "e\u0301 combining, and a lone surrogate \ud800 too",
    "",
    "   ",
    "a",
    "ab",
]


def _strings(batch: GramBatch) -> list[Counter[str]]:
    """Each text's n-grams, read back from the batch's code points."""
    out: list[Counter[str]] = [Counter() for _ in range(batch.texts)]
    for owner, order, start in zip(batch.owner.tolist(), batch.order.tolist(), batch.start.tolist()):
        out[owner]["".join(map(chr, batch.points[start : start + order].tolist()))] += 1
    return out


@pytest.mark.parametrize("orders", [ORDERS, (1, 2, 3), (3,), (2, 5)])
def test_a_batch_cuts_each_text_as_ngrams_does(orders) -> None:
    batch = GramBatch.cut([normalise(t) for t in TEXTS], orders)
    assert _strings(batch) == [Counter(ngrams(t, orders)) for t in TEXTS]
    assert batch.counts().tolist() == [len(ngrams(t, orders)) for t in TEXTS]


def test_the_index_finds_each_kept_ngram_and_nothing_else() -> None:
    kept = ["a", " s", "sa", "sal", "salo", "salom", "😀", "ə", "әле"]
    index = GramIndex(kept)
    texts = ["Salom", "Сәлем әлеуметтік", "😀 ha"]
    batch = GramBatch.cut([normalise(t) for t in texts], ORDERS)
    found = index.find(batch)
    grams = [
        "".join(map(chr, batch.points[s : s + n].tolist()))
        for n, s in zip(batch.order.tolist(), batch.start.tolist())
    ]
    expected = [kept.index(g) if g in kept else -1 for g in grams]
    assert found.tolist() == expected
    assert sorted({g for g, f in zip(grams, found.tolist()) if f >= 0}) == sorted(
        [" s", "a", "sa", "sal", "salo", "salom", "әле", "😀"]
    )


def test_an_ngram_sharing_a_kept_ngrams_hash_is_not_taken_for_it(monkeypatch) -> None:
    """With multiplier 1 the hash is the order's seed plus the sum of the code points, so "ba"
    hashes as "ab" does: the code-point check tells them apart."""
    monkeypatch.setattr(grams_module, "_MULTIPLIER", np.uint64(1))
    index = GramIndex(["ab", "x"])
    batch = GramBatch.cut([normalise("ba ab")], (2,))
    grams = ["".join(map(chr, batch.points[s : s + 2].tolist())) for s in batch.start.tolist()]
    assert grams == [" b", "ba", "a ", " a", "ab", "b "]
    assert index.find(batch).tolist() == [-1, -1, -1, -1, 0, -1]


def test_kept_ngrams_that_collide_under_one_seed_are_hashed_under_another(monkeypatch) -> None:
    """With multiplier 1, seed 0 hashes "ab" and "ba" alike (their sums); seed 1 multiplies by 3:
    97 x 3 + 98 = 389 against 98 x 3 + 97 = 391."""
    monkeypatch.setattr(grams_module, "_MULTIPLIER", np.uint64(1))
    index = GramIndex(["ab", "ba", "x"])
    assert index.seed == 1
    batch = GramBatch.cut([normalise("ba ab")], (2,))
    assert index.find(batch).tolist() == [-1, 1, -1, -1, 0, -1]


def test_a_table_whose_ngrams_collide_under_every_seed_is_refused(monkeypatch) -> None:
    def constant(points, n, seed):
        return np.zeros(len(points), np.uint64)

    monkeypatch.setattr(grams_module, "_window_hashes", constant)
    with pytest.raises(ValueError, match="collide under every hash seed"):
        GramIndex(["ab", "ba"])


def test_orders_past_the_tables_are_refused() -> None:
    with pytest.raises(ValueError, match="orders run from 1 to 5"):
        GramBatch.cut([normalise("abcdef")], (6,))


def test_a_texts_scores_do_not_depend_on_the_empty_texts_beside_it() -> None:
    """NumPy sums a one-column product in another order than a wider one: the empty texts of a
    batch must not widen it (a sentence scored alone and beside "" differed in the last bits)."""
    from modsenc.routing.background import load_background
    from modsenc.routing.scoring import ScoringTable

    table = ScoringTable(load_background(), shared_unseen=True)
    text = "can said on had been"
    alone, _ = table.score_texts([text], ORDERS)
    beside, counts = table.score_texts(["", text, "   "], ORDERS)
    assert beside[1] == alone[0]
    assert beside[0] == beside[2] == {}
    assert counts.tolist() == [0, len(ngrams(text)), 0]


def test_world_profiles_take_the_shared_price_without_setting_it() -> None:
    """A is a large profile (-14 nats for an unseen trigram), B a small world one (-9). " ab " has
    the trigrams " ab" (A keeps it, -2) and "ab " (B keeps it, -1)."""
    from modsenc.routing.langid import CharNgramProfile
    from modsenc.routing.scoring import ScoringTable

    profiles = {
        "aa": CharNgramProfile("aa", {"any": ({" ab": -2.0}, {3: -14.0})}, orders=(3,)),
        "bb": CharNgramProfile("bb", {"any": ({"ab ": -1.0}, {3: -9.0})}, orders=(3,)),
    }
    unpriced = ScoringTable(profiles, shared_unseen=True, unpriced={"bb"})
    assert unpriced.unseen[:, 3].tolist() == [-14.0, -14.0]
    scores, _ = unpriced.score_texts(["ab"], (3,))
    assert scores[0] == {"aa": (-16.0, 0.5), "bb": (-15.0, 0.5)}
    median = ScoringTable(profiles, shared_unseen=True)  # both set it: the median of -14 and -9
    scores, _ = median.score_texts(["ab"], (3,))
    assert scores[0] == {"aa": (-13.5, 0.5), "bb": (-12.5, 0.5)}


def test_a_restricted_table_prices_unseen_ngrams_as_the_full_one() -> None:
    """The profiles of the test above: under the shared price (-14), bb scores " ab " as -1 (its
    "ab ") + -14 (" ab", unseen) = -15 in the full table and in its restriction to bb, where bb's
    own price would give -1 + -9 = -10; under the median price (-11.5), -12.5 both ways."""
    from modsenc.routing.langid import CharNgramProfile
    from modsenc.routing.scoring import ScoringTable

    profiles = {
        "aa": CharNgramProfile("aa", {"any": ({" ab": -2.0}, {3: -14.0})}, orders=(3,)),
        "bb": CharNgramProfile("bb", {"any": ({"ab ": -1.0}, {3: -9.0})}, orders=(3,)),
    }
    for table, expected in (
        (ScoringTable(profiles, shared_unseen=True, unpriced={"bb"}), -15.0),
        (ScoringTable(profiles, shared_unseen=True), -12.5),
    ):
        restricted = table.restricted("bb")
        assert restricted.langs == ["bb"] and len(restricted.index) == 1
        scores, counts = restricted.score_texts(["ab"], (3,))
        assert scores[0]["bb"][0] == expected and counts.tolist() == [2]
    alone, _ = ScoringTable({"bb": profiles["bb"]}).score_texts(["ab"], (3,))
    assert alone[0]["bb"][0] == -10.0
    with pytest.raises(KeyError, match="cc"):
        table.restricted("cc")

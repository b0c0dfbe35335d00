"""STS on hand-worked cases: the TSV reader's checks, and Spearman x100 of cosines per language pair."""

from __future__ import annotations

import numpy as np
import pytest

from modsenc.data.errors import DataFormatError
from modsenc.eval.sts import STSPair, evaluate_sts, read_sts_tsv, row_cosines, spearman_x100

HEADER = "lang1\tlang2\tsentence1\tsentence2\tscore\n"


def _write(tmp_path, body: str, header: str = HEADER):
    path = tmp_path / "sts.tsv"
    path.write_text(header + body, encoding="utf-8")
    return path


def test_read_sts_tsv_groups_and_scores(tmp_path) -> None:
    path = _write(tmp_path, "en\tuz\tA\tB\t4.5\nen\tuz\tC\tD\t1\nen\ten\tE\tF\t0\nen\ten\tG\tH\t2.25\n")
    assert read_sts_tsv(path) == [
        STSPair("en", "uz", "A", "B", 4.5),
        STSPair("en", "uz", "C", "D", 1.0),
        STSPair("en", "en", "E", "F", 0.0),
        STSPair("en", "en", "G", "H", 2.25),
    ]


@pytest.mark.parametrize(
    ("header", "body", "message"),
    [
        (
            "lang1\tlang2\tsentence1\tsentence2\tgold\n",
            "en\tuz\tA\tB\t1\n",
            r"sts.tsv, line 1: expected the header lang1 lang2 sentence1 sentence2 score, "
            r"got lang1 lang2 sentence1 sentence2 gold$",
        ),
        (HEADER, "en\tuz\tA\tB\t1\nEN\tuz\tC\tD\t2\n", r"sts.tsv, line 3: 'EN' is not a language code$"),
        (HEADER, "en\tuz\tA\tB\t1\nen\tuzbe\tC\tD\t2\n", r"sts.tsv, line 3: 'uzbe' is not a language code$"),
        (HEADER, "en\tuz\tA\tB\thigh\n", r"sts.tsv, line 2: score 'high' is not a number$"),
        (HEADER, "", r"sts.tsv: has a header but no data rows$"),
        (
            HEADER,
            "en\tuz\tA\tB\t1\nen\tuz\tC\tD\t2\nen\tkk\tE\tF\t3\n",
            r"sts.tsv: en-kk has 1 scored pair; a Spearman correlation needs at least 2 pairs per "
            r"language pair \(add pairs, or remove that row\)$",
        ),
        (
            HEADER,
            "en\tuz\tA\tB\t3\nen\tuz\tC\tD\t3.0\n",
            r"sts.tsv: every en-uz pair has the score 3.0; a Spearman correlation needs scores that differ$",
        ),
    ],
)
def test_read_sts_tsv_errors_name_file_line_and_fix(tmp_path, header, body, message) -> None:
    with pytest.raises(DataFormatError, match=message):
        read_sts_tsv(_write(tmp_path, body, header))


def test_row_cosines_and_spearman_by_hand() -> None:
    a = np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 5.0]])
    b = np.array([[3.0, 0.0], [0.6, 0.8], [1.0, 0.0]])
    # Row-wise cosines: 1, 0.6, 0 (not the cosines of a[i] with other rows of b).
    np.testing.assert_allclose(row_cosines(a, b), [1.0, 0.6, 0.0], atol=1e-7)
    # Cosine ranks (3, 2, 1) against gold ranks (3, 1, 2): d = (0, 1, -1), Spearman
    # 1 - 6 * 2 / (3 * (9 - 1)) = 0.5, so 50; the reversed gold, ranks (1, 3, 2): d = (2, -1, -1),
    # 1 - 6 * 6 / 24 = -0.5.
    assert spearman_x100(a, b, [5.0, 3.0, 4.0]) == pytest.approx(50.0)
    assert spearman_x100(a, b, [1.0, 5.0, 4.0]) == pytest.approx(-50.0)
    assert spearman_x100(a, b, [3.0, 2.0, 1.0]) == pytest.approx(100.0)


def test_evaluate_sts_encodes_each_side_in_its_own_language() -> None:
    vectors = {
        "en": {"A": [1.0, 0.0], "C": [1.0, 0.0], "E": [0.0, 1.0], "G": [1.0, 0.0], "I": [1.0, 1.0]},
        "uz": {"B": [1.0, 0.0], "D": [0.6, 0.8], "F": [1.0, 0.0]},
    }
    calls = []

    def encoder(lang):
        def encode(texts):
            calls.append((lang, list(texts)))
            return np.array([vectors[lang][t] for t in texts])  # KeyError for another language's text

        return encode

    pairs = [
        STSPair("en", "uz", "A", "B", 5.0),
        STSPair("en", "en", "G", "I", 1.0),
        STSPair("en", "uz", "C", "D", 3.0),
        STSPair("en", "uz", "E", "F", 4.0),
        STSPair("en", "en", "C", "E", 2.0),
    ]
    encoders = {"en": encoder("en"), "uz": encoder("uz")}
    # en-uz cosines 1, 0.6, 0 against gold 5, 3, 4: 50 (see the test above); en-en cosines
    # 0.707, 0 against gold 1, 2: -100.
    result = evaluate_sts(pairs, encoders, [("en", "uz"), ("en", "en")])
    assert result == pytest.approx({"en-uz": 50.0, "en-en": -100.0})
    assert list(result) == ["en-uz", "en-en"]
    assert calls == [("en", ["A", "C", "E"]), ("uz", ["B", "D", "F"]), ("en", ["G", "C"]), ("en", ["I", "E"])]
    with pytest.raises(ValueError, match="no uz-en pairs in the STS data"):
        evaluate_sts(pairs, encoders, [("uz", "en")])

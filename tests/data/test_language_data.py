"""add-language's data: cross-lingual paraphrase pairs from multi-parallel rows, held-out parallel pairs."""

from __future__ import annotations

from pathlib import Path

from modsenc.data.language_data import crosslingual_pairs, load_language_data
from modsenc.data.specs import load_paraphrases

# Two pair ids in en, uz and kk; p2 has no kk row; p3 exists in uz only.
PARAPHRASES = """pair_id\tlang\tanchor\tpositive\tnegative
p1\ten\tThe cat sleeps.\tA cat is sleeping.\tThe cat runs.
p1\tuz\tMushuk uxlaydi.\tMushuk uxlayapti.\tMushuk yuguradi.
p1\tkk\tМысық ұйықтайды.\tМысық ұйықтап жатыр.\t
p2\ten\tIt rains.\tRain is falling.\t
p2\tuz\tYomg'ir yog'adi.\tYomg'ir yog'yapti.\t
p3\tuz\tBu uy.\tBu bir uy.\t
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_crosslingual_pairs_both_directions_by_pair_id(tmp_path: Path) -> None:
    rows = load_paraphrases(str(write(tmp_path, "para.tsv", PARAPHRASES)))
    pivot = {r.pair_id: r for r in rows if r.lang == "en"}
    uz = [r for r in rows if r.lang == "uz"]
    assert crosslingual_pairs(uz, pivot) == [
        ("The cat sleeps.", "Mushuk uxlayapti.", "Mushuk yuguradi."),  # en anchor -> uz positive
        ("A cat is sleeping.", "Mushuk uxlaydi.", None),  # en positive -> uz anchor
        ("It rains.", "Yomg'ir yog'yapti.", None),
        ("Rain is falling.", "Yomg'ir yog'adi.", None),
    ]  # p3 has no English row: no pair
    kk = [r for r in rows if r.lang == "kk"]
    assert crosslingual_pairs(kk, pivot) == [
        ("The cat sleeps.", "Мысық ұйықтап жатыр.", None),
        ("A cat is sleeping.", "Мысық ұйықтайды.", None),
    ]


def test_held_out_parallel_pairs_leave_every_training_set(tmp_path: Path) -> None:
    para = write(tmp_path, "para.tsv", PARAPHRASES)
    parallel = write(
        tmp_path,
        "par.tsv",
        "en\tuz\nThe cat sleeps.\tMushuk uxlaydi.\nIt rains.\tYomg'ir yog'adi.\n"
        "Good morning.\tXayrli tong.\nThank you.\tRahmat.\nThe cat sleeps.\tMushuk uxlaydi.\n",
    )
    cfg = {"paraphrase": [str(para)], "parallel": [str(parallel)], "dev_parallel": 2}
    data = load_language_data("uz", "en", cfg, None)
    again = load_language_data("uz", "en", cfg, None)
    assert data.dev_parallel == again.dev_parallel and len(data.dev_parallel) == 2  # stable, distinct
    held = {t for pair in data.dev_parallel for t in pair}
    assert all(a not in held and b not in held for a, b in data.parallel)
    assert all(a not in held and b not in held for a, b, _ in data.crosslingual)
    assert all(p.anchor not in held and p.positive not in held for p in data.paraphrases)
    # every distinct pair is either trained on or held out (the repeated row is one pair)
    assert set(data.parallel) | set(data.dev_parallel) == {
        ("The cat sleeps.", "Mushuk uxlaydi."),
        ("It rains.", "Yomg'ir yog'adi."),
        ("Good morning.", "Xayrli tong."),
        ("Thank you.", "Rahmat."),
    }
    assert data.counts()["dev_parallel_pairs"] == 2


def test_other_languages_pairs_exclude_dev_ids_and_held_out_sentences(tmp_path: Path) -> None:
    para = write(tmp_path, "para.tsv", PARAPHRASES)
    # dev_pairs 1 holds out uz's last pair id (p3, uz only); the parallel pair is held out
    # (dev_parallel 1 of 1), so p1, whose English row holds its English sentence, leaves kk's and
    # en's pairs too: only p2's English pair is left.
    parallel = write(tmp_path, "par.tsv", "en\tuz\nThe cat sleeps.\tMushuk uxlaydi.\n")
    data = load_language_data(
        "uz",
        "en",
        {"paraphrase": [str(para)], "parallel": [str(parallel)], "dev_pairs": 1, "dev_parallel": 1},
        None,
    )
    assert [p.pair_id for p in data.dev_paraphrases] == ["p3"]
    assert [(p.pair_id, p.lang) for p in data.other_paraphrases] == [("p2", "en")]
    assert [(p.pair_id, p.lang) for p in data.paraphrases] == [("p2", "uz")]
    # without held-out data, every other language's row is there, and none of LANG's own
    data = load_language_data("uz", "en", {"paraphrase": [str(para)]}, None)
    assert [(p.pair_id, p.lang) for p in data.other_paraphrases] == [("p1", "en"), ("p1", "kk"), ("p2", "en")]
    assert "Mushuk uxlaydi." in data.texts() and "Мысық ұйықтайды." not in data.texts()  # router: uz only


def test_shared_files_serve_every_language_and_per_language_files_must_fit(tmp_path: Path) -> None:
    """data.paraphrase/parallel/mono serve every language: a file without LANG counts 0 and gives
    it no transfer pairs; a file listed under per_language.LANG must have LANG's column."""
    import pytest  # noqa: PLC0415

    para = write(tmp_path, "para.tsv", PARAPHRASES)
    other = write(tmp_path, "de-para.tsv", "pair_id\tlang\tanchor\tpositive\tnegative\nd1\tde\tA.\tB.\t\n")
    en_uz = write(tmp_path, "en-uz.tsv", "en\tuz\nHello.\tSalom.\nThanks.\tRahmat.\n")
    en_de = write(tmp_path, "en-de.tsv", "en\tde\nHello.\tHallo.\n")
    shared = {
        "paraphrase": [str(para), str(other)],
        "parallel": [str(en_uz), str(en_de)],
        "mono": [str(en_de)],
    }
    uz = load_language_data("uz", "en", shared, None)
    assert [r["count"] for r in uz.files["paraphrase"]] == [3, 0]
    assert [r["count"] for r in uz.files["parallel"]] == [2, 0] and uz.parallel == [
        ("Hello.", "Salom."),
        ("Thanks.", "Rahmat."),
    ]
    assert [r["count"] for r in uz.files["mono"]] == [0] and uz.mono == []
    assert sorted({p.lang for p in uz.other_paraphrases}) == ["en", "kk"]  # not de: its file has no uz
    kk = load_language_data("kk", "en", shared, None)
    assert [r["count"] for r in kk.files["parallel"]] == [0, 0] and kk.parallel == []
    mine = {**shared, "per_language": {"kk": {"parallel": [str(en_de)]}}}
    with pytest.raises(
        ValueError, match=r"en-de.tsv: parallel data needs columns 'en' and 'kk', has \['en', 'de'\]"
    ):
        load_language_data("kk", "en", mine, None)

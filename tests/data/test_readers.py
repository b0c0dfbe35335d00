"""Readers: concrete parses of small files, and one error (with file and line) per kind of bad input."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from modsenc.data import (
    DEMO_PARALLEL,
    DEMO_PARAPHRASE,
    DataFormatError,
    ParallelCorpus,
    ParaphrasePair,
    TranslationPair,
    demo_path,
    english_centric_pairs,
    load_hf_parallel,
    load_monolingual,
    load_parallel,
    load_paraphrases,
    read_monolingual,
    read_parallel_tsv,
    read_paraphrase_tsv,
)

SHARED = Path("/work/shared/data")
PARA_HEADER = "pair_id\tlang\tanchor\tpositive\tnegative\n"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


# ------------------------------------------------------------------------------------------- parallel


def test_parallel_tsv_parses_strips_and_keeps_empty_cells(tmp_path: Path) -> None:
    path = write(tmp_path, "p.tsv", "en\tde\tuz\n Hello \tHallo\tSalom\nYes\t\tHa\n")
    corpus = read_parallel_tsv(path)
    assert corpus.path == str(path)
    assert len(corpus) == 2
    assert corpus.languages == ["en", "de", "uz"]
    assert corpus.columns == {"en": ["Hello", "Yes"], "de": ["Hallo", ""], "uz": ["Salom", "Ha"]}


def test_parallel_tsv_language_selection_keeps_requested_order(tmp_path: Path) -> None:
    path = write(tmp_path, "p.tsv", "en\tde\tuz\nA\tB\tC\n")
    corpus = read_parallel_tsv(path, languages=["uz", "en"])
    assert corpus.columns == {"uz": ["C"], "en": ["A"]}


def test_parallel_tsv_accepts_bom_crlf_and_trailing_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "p.tsv", "\ufeffen\tde\r\nA\tB\r\nC\tD\r\n\r\n\n")
    assert read_parallel_tsv(path).columns == {"en": ["A", "C"], "de": ["B", "D"]}


def test_parallel_tsv_does_not_split_rows_on_unicode_line_separators(tmp_path: Path) -> None:
    # str.splitlines() would cut this row in two at U+2028 and misalign every later row.
    path = write(tmp_path, "p.tsv", "en\tde\nA\u2028B\tC\n")
    assert read_parallel_tsv(path).columns == {"en": ["A\u2028B"], "de": ["C"]}


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.tsv: no such file"):
        read_parallel_tsv(tmp_path / "nope.tsv")


def test_missing_language_names_file_code_and_available(tmp_path: Path) -> None:
    path = write(tmp_path, "p.tsv", "en\tde\tuz\nA\tB\tC\n")
    with pytest.raises(DataFormatError) as err:
        read_parallel_tsv(path, languages=["en", "kz"])
    assert str(err.value) == f"{path}: no column for language(s) kz; available: en de uz"
    assert err.value.path == str(path) and err.value.line is None


def test_empty_file(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.tsv", "")
    with pytest.raises(DataFormatError, match=r"empty\.tsv: empty file"):
        read_parallel_tsv(path)


def test_header_only(tmp_path: Path) -> None:
    path = write(tmp_path, "h.tsv", "en\tde\n")
    with pytest.raises(DataFormatError, match=r"h\.tsv: has a header but no data rows"):
        read_parallel_tsv(path)


def test_invalid_utf8_names_line_3(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.tsv", b"en\tde\nA\tB\nC\t\xff\xfeD\n")
    with pytest.raises(DataFormatError) as err:
        read_parallel_tsv(path)
    assert err.value.line == 3
    assert str(err.value).startswith(f"{path}, line 3: not valid UTF-8 (byte 0xff at byte 3 of the line)")


def test_ragged_row_names_line_4(tmp_path: Path) -> None:
    path = write(tmp_path, "r.tsv", "en\tde\tuz\nA\tB\tC\nD\tE\tF\nG\tH\n")
    with pytest.raises(DataFormatError) as err:
        read_parallel_tsv(path)
    assert err.value.line == 4
    assert str(err.value).startswith(
        f"{path}, line 4: expected 3 tab-separated fields (header: en de uz), found 2"
    )


def test_row_with_tab_in_sentence_is_reported_with_a_hint(tmp_path: Path) -> None:
    path = write(tmp_path, "r.tsv", "en\tde\nA\tB\tC\n")
    with pytest.raises(DataFormatError, match=r"line 2: .*found 3; a sentence probably contains a tab"):
        read_parallel_tsv(path)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("en\tEN\n", "line 1: header column 2 is 'EN', which is not a language code"),
        ("en\tengl\n", "line 1: header column 2 is 'engl', which is not a language code"),
        ("en\t\n", "line 1: header column 2 is '', which is not a language code"),
        ("en\tde\ten\n", "line 1: language 'en' appears twice in the header (columns 1 and 3)"),
    ],
)
def test_bad_header(tmp_path: Path, header: str, message: str) -> None:
    path = write(tmp_path, "bad.tsv", header + "\t".join("xyz"[: header.count("\t") + 1]) + "\n")
    with pytest.raises(DataFormatError) as err:
        read_parallel_tsv(path)
    assert str(err.value).startswith(f"{path}, {message}")


def test_header_after_leading_blank_lines_reports_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.tsv", "\n\nen\tEn\nA\tB\n")
    with pytest.raises(
        DataFormatError, match=r"bad\.tsv, line 3: header column 2 is 'En'.*lowercase \('en'\)"
    ):
        read_parallel_tsv(path)


def test_all_empty_row_and_inner_blank_line(tmp_path: Path) -> None:
    path = write(tmp_path, "e.tsv", "en\tde\nA\tB\n \t \n")
    with pytest.raises(DataFormatError, match=r"e\.tsv, line 3: every cell of the row is empty"):
        read_parallel_tsv(path)
    path = write(tmp_path, "b.tsv", "en\tde\nA\tB\n\nC\tD\n")
    with pytest.raises(DataFormatError, match=r"b\.tsv, line 3: blank line between data rows"):
        read_parallel_tsv(path)


def test_languages_as_a_bare_string_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "p.tsv", "en\tde\nA\tB\n")
    with pytest.raises(TypeError, match=r"\['en'\]"):
        read_parallel_tsv(path, languages="en")


def test_data_format_error_survives_pickling() -> None:
    err = pickle.loads(pickle.dumps(DataFormatError("x.tsv", 17, "bad")))
    assert (err.path, err.line, str(err)) == ("x.tsv", 17, "x.tsv, line 17: bad")
    assert isinstance(err, ValueError)


def test_parallel_corpus_rejects_unequal_columns() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        ParallelCorpus(path="x", columns={"en": ["a", "b"], "de": ["c"]})


# ----------------------------------------------------------------------------------------- paraphrase


def test_paraphrase_tsv_parses_ignores_extra_columns_and_filters(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "para.tsv",
        "lang\tpair_id\tanchor\tpositive\tnegative\tscore\n"
        "en\tp1\tA cat sits.\tA cat is sitting.\tA dog runs.\t4.5\n"
        "uz\tp1\tMushuk o'tiradi.\tMushuk o'tiribdi.\t\t4.5\n",
    )
    assert read_paraphrase_tsv(path) == [
        ParaphrasePair("p1", "en", "A cat sits.", "A cat is sitting.", "A dog runs."),
        ParaphrasePair("p1", "uz", "Mushuk o'tiradi.", "Mushuk o'tiribdi.", None),
    ]
    assert [p.lang for p in read_paraphrase_tsv(path, languages=["uz"])] == ["uz"]
    assert load_paraphrases({"path": str(path), "languages": ["en"]})[0].negative == "A dog runs."
    with pytest.raises(DataFormatError, match=r"para\.tsv: no rows for language\(s\) kk; available: en uz"):
        read_paraphrase_tsv(path, languages=["en", "kk"])


def test_paraphrase_missing_column(tmp_path: Path) -> None:
    path = write(tmp_path, "para.tsv", "pair_id\tlang\tanchor\tpositive\np1\ten\tA\tB\n")
    with pytest.raises(DataFormatError) as err:
        read_paraphrase_tsv(path)
    assert str(err.value) == (
        f"{path}: header has no column 'negative' (required: pair_id lang anchor positive negative; "
        "found: pair_id lang anchor positive)"
    )


def test_paraphrase_empty_anchor_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "para.tsv", PARA_HEADER + "p1\ten\tA\tB\t\np2\ten\t \tD\t\n")
    with pytest.raises(DataFormatError, match=r"para\.tsv, line 3: empty anchor"):
        read_paraphrase_tsv(path)


def test_paraphrase_bad_language_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "para.tsv", PARA_HEADER + "p1\ten\tA\tB\t\np2\tEnglish\tC\tD\t\n")
    with pytest.raises(DataFormatError, match=r"para\.tsv, line 3: lang is 'English', which is not"):
        read_paraphrase_tsv(path)


def test_paraphrase_header_only(tmp_path: Path) -> None:
    path = write(tmp_path, "para.tsv", PARA_HEADER)
    with pytest.raises(DataFormatError, match="no data rows"):
        read_paraphrase_tsv(path)


# ---------------------------------------------------------------------------------------- monolingual


def test_monolingual_strips_and_skips_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "uz.txt", "  Salom dunyo. \n\n \nYaxshi.\n")
    assert read_monolingual(path) == ["Salom dunyo.", "Yaxshi."]
    assert load_monolingual(str(path)) == ["Salom dunyo.", "Yaxshi."]


def test_monolingual_errors(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"blank\.txt: empty file"):
        read_monolingual(write(tmp_path, "blank.txt", "\n  \n"))
    with pytest.raises(DataFormatError, match=r"bad\.txt, line 2: not valid UTF-8"):
        read_monolingual(write(tmp_path, "bad.txt", b"ok\nbad \xc3\x28\n"))


def test_load_monolingual_from_tsv_needs_a_column(tmp_path: Path) -> None:
    path = write(tmp_path, "p.tsv", "en\tuz\nA\tB\nC\t\nE\tF\n")
    with pytest.raises(DataFormatError) as err:
        load_monolingual(path)
    assert "p.tsv: is a TSV file (its columns: en uz)" in str(err.value)
    assert "'column': '<lang>'" in str(err.value)
    assert load_monolingual({"path": path, "column": "uz"}) == ["B", "F"]
    with pytest.raises(DataFormatError, match="no column for language"):
        load_monolingual({"path": path, "column": "kk"})


# ------------------------------------------------------------------------------------ translation pairs


def test_english_centric_pairs_skip_empty_cells_and_deduplicate(tmp_path: Path) -> None:
    first = read_parallel_tsv(
        write(
            tmp_path,
            "a.tsv",
            "de\ten\tuz\n"
            "Hallo\tHello\tSalom\n"
            "\tYes\tHa\n"  # no German
            "Nein\t\tYo'q\n"  # no English: nothing to pair
            "Hallo\tHello\tAssalomu alaykum\n",  # de repeats row 1 (dropped), uz differs (kept)
        )
    )
    second = read_parallel_tsv(write(tmp_path, "b.tsv", "en\tuz\nYes\tHa\nThanks\tRahmat\n"))
    assert english_centric_pairs([first, second]) == [
        TranslationPair("en", "Hello", "de", "Hallo"),
        TranslationPair("en", "Hello", "uz", "Salom"),
        TranslationPair("en", "Yes", "uz", "Ha"),
        TranslationPair("en", "Hello", "uz", "Assalomu alaykum"),
        TranslationPair("en", "Thanks", "uz", "Rahmat"),
    ]
    assert english_centric_pairs(first, languages=["de"]) == [TranslationPair("en", "Hello", "de", "Hallo")]
    assert english_centric_pairs(second, pivot="uz") == [
        TranslationPair("uz", "Ha", "en", "Yes"),
        TranslationPair("uz", "Rahmat", "en", "Thanks"),
    ]


def test_english_centric_pairs_without_pivot_names_the_file(tmp_path: Path) -> None:
    corpus = read_parallel_tsv(write(tmp_path, "deuz.tsv", "de\tuz\nA\tB\n"))
    with pytest.raises(DataFormatError, match=r"deuz\.tsv: no 'en' \(pivot\) column; available: de uz"):
        english_centric_pairs(corpus)


# -------------------------------------------------------------------------------------- Hugging Face


def _jsonl(tmp_path: Path, name: str, rows: list[dict]) -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_load_hf_parallel_both_layouts(tmp_path: Path) -> None:
    cache = str(tmp_path / "hf-cache")
    flat = _jsonl(
        tmp_path,
        "flat.jsonl",
        [{"id": 1, "en": " Hello ", "uz": "Salom"}, {"id": 2, "en": "Yes", "uz": None}],
    )
    corpus = load_hf_parallel("json", data_files=flat, cache_dir=cache)
    assert corpus.columns == {"en": ["Hello", "Yes"], "uz": ["Salom", ""]}
    assert corpus.path == f"hf:json[train] ({flat})"

    nested = _jsonl(
        tmp_path,
        "wmt.jsonl",
        [{"translation": {"de": "Hallo", "en": "Hello"}}, {"translation": {"de": "Danke", "en": "Thanks"}}],
    )
    spec = {"hf": "json", "data_files": nested, "languages": ["en", "de"], "cache_dir": cache}
    assert load_parallel(spec).columns == {"en": ["Hello", "Thanks"], "de": ["Hallo", "Danke"]}

    with pytest.raises(DataFormatError) as err:
        load_hf_parallel("json", data_files=nested, languages=["en", "kk"], cache_dir=cache)
    assert str(err.value) == f"hf:json[train] ({nested}): no language(s) kk; available: de en"


# --------------------------------------------------------------------------------------------- specs


def test_load_parallel_specs(tmp_path: Path) -> None:
    path = write(tmp_path, "p.tsv", "en\tde\nA\tB\n")
    assert load_parallel(str(path)).columns == {"en": ["A"], "de": ["B"]}
    assert load_parallel(path).columns == {"en": ["A"], "de": ["B"]}
    assert load_parallel({"path": path, "languages": ["de"]}).columns == {"de": ["B"]}
    with pytest.raises(ValueError, match="unknown key"):
        load_parallel({"path": path, "langs": ["de"]})
    with pytest.raises(TypeError, match="must be a path or a dict"):
        load_parallel(["p.tsv"])


# ---------------------------------------------------------------------------------------------- demo


def test_demo_path_unknown_file_lists_available() -> None:
    with pytest.raises(FileNotFoundError, match="no demo file 'nope.tsv' in the modsenc package; available:"):
        demo_path("nope.tsv")
    with pytest.raises(ValueError, match="plain file name"):
        demo_path("../readers.py")


def test_demo_files_parse_when_present() -> None:
    try:
        parallel, paraphrase = demo_path(DEMO_PARALLEL), demo_path(DEMO_PARAPHRASE)
    except FileNotFoundError:
        pytest.skip("demo corpus not written yet")
    assert "en" in read_parallel_tsv(parallel).languages
    assert len(english_centric_pairs(read_parallel_tsv(parallel))) > 0
    assert len(read_paraphrase_tsv(paraphrase)) > 0


# ----------------------------------------------------------------------------------------- real data


def test_real_kardes_xnli() -> None:
    path = SHARED / "parallel" / "kardes-xnli.tsv"
    if not path.exists():
        pytest.skip(f"{path} is absent (shared data not mounted)")
    corpus = read_parallel_tsv(path)
    assert len(corpus) == 4950
    assert corpus.languages == ["en", "uz", "kk", "az", "ky", "ug"]
    assert corpus.columns["en"][0] == "And I was like OK, and that was it!"


def test_parallel_spec_rows_select_a_slice(tmp_path: Path) -> None:
    path = tmp_path / "p.tsv"
    path.write_text("en\tuz\n" + "".join(f"s{i}\tt{i}\n" for i in range(6)), encoding="utf-8")
    corpus = load_parallel({"path": path, "rows": [1, 4]})
    assert corpus.columns == {"en": ["s1", "s2", "s3"], "uz": ["t1", "t2", "t3"]}
    assert corpus.path.endswith("p.tsv[1:4]")
    assert load_parallel({"path": path, "rows": [4, None]}).columns["uz"] == ["t4", "t5"]
    with pytest.raises(ValueError, match=r"rows must be \[start, stop\]"):
        load_parallel({"path": path, "rows": [1]})
    with pytest.raises(ValueError, match=r"rows \[6, 9\] select none of its 6 rows"):
        load_parallel({"path": path, "rows": [6, 9]})


def test_rows_are_row_numbers_of_the_file_not_python_slices(tmp_path: Path) -> None:
    """rows: [-5, 1000] would count -5 from the end and cut 1000 to the end without a word."""
    from modsenc.data.specs import load_parallel  # noqa: PLC0415

    tsv = tmp_path / "p.tsv"
    tsv.write_text("en\tuz\n" + "".join(f"e{i}\tu{i}\n" for i in range(10)), encoding="utf-8")
    assert load_parallel({"path": str(tsv), "rows": [8, 10]}).columns["en"] == ["e8", "e9"]
    assert load_parallel({"path": str(tsv), "rows": [None, 2]}).columns["uz"] == ["u0", "u1"]
    for rows in ([-5, 10], [3, -1]):
        with pytest.raises(ValueError, match=r"must be row numbers from 0 .* not counted from the end"):
            load_parallel({"path": str(tsv), "rows": rows})
    with pytest.raises(ValueError, match=r"rows \[0, 1000\] go past its 10 rows"):
        load_parallel({"path": str(tsv), "rows": [0, 1000]})

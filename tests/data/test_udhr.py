"""modsenc.data.udhr: a UDHR translation's sentences, each with its article, and the split by
article the world profiles and the wide benchmark share (a hand-written file in UDHR's format)."""

from __future__ import annotations

import pytest

from modsenc.data.udhr import PROFILE_PART, REPORT_PART, article_part, read_translation, read_udhr

UDHR_XML = """<?xml version="1.0" encoding="UTF-8"?>
<udhr iso639-3='tuk' xml:lang='{lang}' key='tuk_latn' n='Turkmen (Latin)' iso15924='Latn'
      xmlns="http://www.unhchr.ch/udhr">
  <title>Adam hukuklarynyň ählumumy jarnamasy</title>
  <preamble>
    <title>Giriş</title>
    <para>Birinji sözlem. Ikinji sözlem!</para>
  </preamble>
  <article number="1"><title>1-nji madda</title><para>Üçünji sözlem.</para></article>
  <article number="2"><title>2-nji madda</title><orderedlist><listitem><para>Dördünji sözlem.</para>
  </listitem></orderedlist></article>
</udhr>
"""


def _write(folder, lang: str = "tk-Latn", key: str = "tuk_latn"):
    path = folder / f"udhr_{key}.xml"
    path.write_text(UDHR_XML.format(lang=lang), encoding="utf-8")
    return path


def test_sentences_keep_their_article_and_the_split_goes_by_article(tmp_path) -> None:
    translation = read_translation(_write(tmp_path))
    assert translation.key == "tuk_latn"
    assert translation.language == "tk"  # xml:lang without its script subtag
    assert translation.sentences == (
        (0, "Adam hukuklarynyň ählumumy jarnamasy"),
        (0, "Giriş"),
        (0, "Birinji sözlem."),
        (0, "Ikinji sözlem!"),
        (1, "1-nji madda"),
        (1, "Üçünji sözlem."),
        (2, "2-nji madda"),
        (2, "Dördünji sözlem."),
    )
    assert [article_part(n) for n in (0, 1, 2, 3, 30)] == [
        REPORT_PART,
        PROFILE_PART,
        REPORT_PART,
        PROFILE_PART,
        REPORT_PART,
    ]
    assert translation.part(PROFILE_PART) == ["1-nji madda", "Üçünji sözlem."]
    assert translation.part(REPORT_PART)[-2:] == ["2-nji madda", "Dördünji sözlem."]


def test_an_undetermined_tag_falls_back_to_the_iso_639_3_code(tmp_path) -> None:
    assert read_translation(_write(tmp_path, lang="und")).language == "tuk"


def test_reading_a_folder(tmp_path) -> None:
    _write(tmp_path)
    (tmp_path / "udhr_bad.xml").write_text("<udhr", encoding="utf-8")  # not well-formed: skipped
    assert list(read_udhr(tmp_path, min_sentences=8)) == ["tuk_latn"]
    assert read_udhr(tmp_path, min_sentences=9) == {}
    with pytest.raises(FileNotFoundError, match="not a folder"):
        read_udhr(tmp_path / "missing")

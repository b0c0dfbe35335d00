"""modsenc.data.translatewiki: MediaWiki message translations as sentences per language code,
markup dropped, untranslated copies left out, and the odd/even split."""

from __future__ import annotations

import json

import pytest

from modsenc.data.translatewiki import (
    PROFILE_PART,
    REPORT_PART,
    message_sentences,
    part,
    read_translatewiki,
)


def test_markup_is_dropped_and_short_lines_are_left_out() -> None:
    message = (
        "{{PLURAL:$1|One page was|$1 pages were}} changed by [[User:Ann|the first user]] <b>today</b>\n"
        "* See [https://example.org the help page] for more.\n"
        "Too short here\n"
        "12 34 56 78 90"
    )
    assert message_sentences(message) == [
        "One page was changed by the first user today",
        "See the help page for more.",
    ]
    assert message_sentences("'''Warning:''' {{SITENAME}} is read only now.") == [
        "Warning: is read only now."
    ]


def _write(folder, code: str, messages: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{code}.json").write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")


def test_read_translatewiki_keeps_translations_once_per_code(tmp_path) -> None:
    english = {
        "@metadata": {"authors": []},
        "save": "Save this page right now",
        "undo": "Undo the last edit here",
    }
    _write(tmp_path / "ExtA" / "i18n", "en", english)
    _write(tmp_path / "ExtA" / "i18n", "qqq", {"save": "Documentation for translators of it"})
    _write(
        tmp_path / "ExtA" / "i18n",
        "tt-cyrl",
        {"save": "Бу битне хәзер үк саклагыз", "undo": "Undo the last edit here"},  # the second is a copy
    )
    _write(tmp_path / "ExtB" / "i18n", "en", english)
    _write(
        tmp_path / "ExtB" / "i18n",
        "tt-cyrl",
        {"save": "Бу битне хәзер үк саклагыз", "x": "Соңгы үзгәрешне кире кайтару кирәк"},
    )
    (tmp_path / "ExtB" / "i18n" / "broken.json").write_text("{", encoding="utf-8")
    read = read_translatewiki([tmp_path / "ExtA", tmp_path / "ExtB"])
    assert read == {
        "en": ["Save this page right now", "Undo the last edit here"],
        "tt-cyrl": ["Бу битне хәзер үк саклагыз", "Соңгы үзгәрешне кире кайтару кирәк"],
    }
    with pytest.raises(FileNotFoundError, match="missing: no such folder"):
        read_translatewiki([tmp_path / "missing"])
    (tmp_path / "Empty").mkdir()
    with pytest.raises(ValueError, match="Empty: no i18n/\\*.json in it"):
        read_translatewiki([tmp_path / "Empty"])


def test_profile_and_report_parts_are_the_odd_and_even_lines() -> None:
    lines = ["l0", "l1", "l2", "l3", "l4"]
    assert part(lines, PROFILE_PART) == ["l1", "l3"]
    assert part(lines, REPORT_PART) == ["l0", "l2", "l4"]
    with pytest.raises(ValueError, match="part is"):
        part(lines, "all")

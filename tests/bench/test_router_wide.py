"""bench/router_wide.py's UD treebank reader: the sentences and the language a treebank holds."""

from __future__ import annotations

from bench.router_wide import treebank_sentences

CONLLU = """# sent_id = 1
# text = Менин машинам бар.
1\tМенин\tмен\tPRON\t_\t_\t2\tnmod:poss\t_\t_

# sent_id = 2
# text = Сенин балдарын мектепке кетишти.
1\tСенин\tсен\tPRON\t_\t_\t2\tnmod:poss\t_\t_
"""


def test_treebank_sentences_reads_text_lines_and_the_file_prefix_language(tmp_path):
    folder = tmp_path / "UD_Kyrgyz-KTMU"
    folder.mkdir()
    (folder / "ky_ktmu-ud-test.conllu").write_text(CONLLU, encoding="utf-8")
    (folder / "ky_ktmu-ud-train.conllu").write_text("# text = Бул китеп.\n1\tБул\n", encoding="utf-8")
    (tmp_path / "UD_Empty-X").mkdir()  # a clone without .conllu files (only not-to-release): left out
    (tmp_path / "notes").mkdir()
    assert treebank_sentences(str(tmp_path)) == {
        "Kyrgyz-KTMU": ("ky", ["Менин машинам бар.", "Сенин балдарын мектепке кетишти.", "Бул китеп."])
    }


def test_translatewiki_profile_text_is_the_odd_lines_without_english_residue(tmp_path):
    """make background's world profile text from translatewiki: the odd-numbered lines of each
    language, variants merged, English left-overs out; a training-file language only in a script
    it is not read in (Kazakh in Arabic letters: ``kk-Arab``); Cyrillic Kazakh, which its own
    profile reads, gives none."""
    import json

    from bench.router_wide import write_translatewiki_profile_text

    i18n = tmp_path / "Ext" / "i18n"
    i18n.mkdir(parents=True)
    tatar = [f"Бу {i} нче җөмлә монда язылган иде" for i in range(23)]
    tatar[1] = "Save this page and close the window now"  # odd: profile text, but English
    messages = {
        "tt-cyrl": tatar,
        "kk-arab": [f"بۇل {i} سويلەم مۇندا جازىلعان ەدى" for i in range(20)],
        "kk-cyrl": [f"Бұл {i} сөйлем мұнда жазылған еді" for i in range(20)],
    }
    english = {f"m{i}": f"Message number {i} of this extension" for i in range(23)}
    (i18n / "en.json").write_text(json.dumps(english), encoding="utf-8")
    for code, lines in messages.items():
        body = {f"m{i}": line for i, line in enumerate(lines)}
        (i18n / f"{code}.json").write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "out"
    assert write_translatewiki_profile_text([str(tmp_path / "Ext")], str(out)) == {"kk-Arab": 10, "tt": 10}
    written = (out / "tt.txt").read_text(encoding="utf-8").splitlines()
    assert written == [tatar[i] for i in range(3, 23, 2)]  # line 1 was English
    assert sorted(p.name for p in out.iterdir()) == ["kk-Arab.txt", "tt.txt"]


def test_translatewiki_codes_and_the_report_lines_kept_out_of_profiles(tmp_path):
    """Script and region variants feed their language's profile, other subtags none; a line that is
    any code's report line (be and be-tarask share messages) is never profile text."""
    from bench.router_wide import _translatewiki_language, _translatewiki_profile_lines

    assert [_translatewiki_language(c) for c in ("tt", "tg-cyrl", "sr-el", "map-bms", "be-tarask")] == [
        "tt",
        "tg",
        "sr",
        None,
        None,
    ]
    shared = "Бу җөмлә ике файлда да бар"
    read = {"tt": ["a0 a b c", "a1 a b c", "a2 a b c", shared], "tt-cyrl": [shared, "b1 a b c"]}
    assert _translatewiki_profile_lines(read) == {"tt": ["a1 a b c", "b1 a b c"]}
    import pytest

    from bench.router_wide import write_translatewiki_profile_text

    with pytest.raises(ValueError, match="no translatewiki folder given"):
        write_translatewiki_profile_text([], str(tmp_path / "out"))

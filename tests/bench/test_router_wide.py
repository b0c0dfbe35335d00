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

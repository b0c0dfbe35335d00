"""experiments/paper_tables.py: the uz/kk/az bitext read off Kardeş STS dev, and the table arithmetic."""

from __future__ import annotations

import pytest

from experiments import paper_tables

HEADER = "lang1\tlang2\tsentence1\tsentence2\tscore\n"


def _kardes(rows: list[tuple[str, ...]]) -> str:
    return HEADER + "".join("\t".join(r) + "\n" for r in rows)


ENGLISH = [
    ("en", "en", "A dog runs.", "A cat sleeps.", "1.0"),
    ("en", "en", "A dog runs.", "Kids swim.", "0.5"),
]
TRANSLATIONS = {
    "uz": ("It yuguradi.", "Mushuk uxlaydi.", "Bolalar suzmoqda."),
    "kk": ("Ит жүгіреді.", "Мысық ұйықтайды.", "Балалар жүзеді."),
    "az": ("İt qaçır.", "Pişik yatır.", "Uşaqlar üzür."),
}


def _rows(swap: str | None = None) -> list[tuple[str, ...]]:
    rows = list(ENGLISH)
    for lang, (dog, cat, kids) in TRANSLATIONS.items():
        mono = [(lang, lang, dog, cat, "1.0"), (lang, lang, dog, kids, "0.5")]
        cross = [("en", lang, "A dog runs.", cat, "1.0"), ("en", lang, "A dog runs.", kids, "0.5")]
        if lang == swap:
            cross.reverse()
        rows += mono + cross
    return rows


def test_bitext_from_kardes_sts_rows(tmp_path) -> None:
    sts = tmp_path / "sts.tsv"
    sts.write_text(_kardes(_rows()), encoding="utf-8")
    out = paper_tables.kardes_sts_bitext(sts, tmp_path / "bitext.tsv")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "en\tuz\tkk\taz"
    # Three distinct English sentences ("A dog runs." twice), each with its three translations.
    assert lines[1:] == [
        "A dog runs.\tIt yuguradi.\tИт жүгіреді.\tİt qaçır.",
        "A cat sleeps.\tMushuk uxlaydi.\tМысық ұйықтайды.\tPişik yatır.",
        "Kids swim.\tBolalar suzmoqda.\tБалалар жүзеді.\tUşaqlar üzür.",
    ]


def test_misaligned_rows_are_refused(tmp_path) -> None:
    sts = tmp_path / "sts.tsv"
    sts.write_text(_kardes(_rows(swap="kk")), encoding="utf-8")
    with pytest.raises(ValueError, match="en-en, kk-kk and en-kk rows are not row-aligned"):
        paper_tables.kardes_sts_bitext(sts, tmp_path / "bitext.tsv")


def test_sts_subset_keeps_only_the_named_pairs(tmp_path) -> None:
    sts = tmp_path / "sts.tsv"
    sts.write_text(_kardes(_rows()), encoding="utf-8")
    out = paper_tables.sts_subset(sts, tmp_path / "sub.tsv", ("en", "uz"), first="en")
    kept = [line.split("\t")[:2] for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert kept == [["en", "en"]] * 2 + [["en", "uz"]] * 2


def test_modular_table_averages_and_mono_columns_come_from_mod_m() -> None:
    def result(mono: float, cross: float, xsim: float) -> dict:
        spearman = {f"{x}-{x}": mono for x in paper_tables.LANGS} | {
            f"en-{x}": cross for x in paper_tables.TARGETS
        }
        pairs = {
            f"{a}-{b}": {"xsim_error": xsim, "p@1": 100 - xsim}
            for x in paper_tables.TARGETS
            for a, b in (("en", x), (x, "en"))
        }
        return {
            "sts": {"kardes-sts-dev.en-uz-kk-az.tsv": {"spearman": spearman, "language_bias": {"bias": 1.5}}},
            "bitext": {"kardes-sts-bitext.tsv": pairs},
        }

    results = {"Mod_m": result(60.0, 10.0, 90.0), "Mod_mc-jt": result(0.0, 30.0, 40.0)}
    sts, bitext, numbers = paper_tables.modular_tables(results)
    assert numbers["Mod_mc-jt"] == {"mono": 60.0, "cross": 30.0, "bias": 1.5, "xsim": 40.0, "p1": 60.0}
    assert "| Mod_mc-jt | 60.0 | 60.0 | 60.0 | 60.0 | 60.0 | 30.0 | 30.0 | 30.0 | 30.0 | 1.5 |" in sts
    assert "| Mod_m | 90.0 | 90.0 | 90.0 | 90.0 | 90.0 | 90.0 | 90.0 | 10.0 |" in bitext
    assert paper_tables.modular_direction(numbers) == ("(incomplete)", "(incomplete)")

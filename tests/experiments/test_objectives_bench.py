"""experiments/objectives.py: the arms' recipes, the STS subsets, the scores and the document section."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import objectives as bench


def _base() -> dict:
    return {
        "seed": 0,
        "model": {"init": "scratch", "name_or_path": None, "config": {}},
        "tokenizer": {"train": True, "vocab_size": 100},
        "data": {"parallel": ["x.tsv"]},
        "objective": {"name": "mexma", "alpha": 1.0},
        "training": {"max_steps": 400, "warmup_steps": 40, "log_every": 10, "checkpoint_every": 100},
    }


def test_arm_recipe_shares_the_initial_backbone_and_scales_the_schedule(tmp_path):
    (tmp_path / "mono").mkdir()
    (tmp_path / "mono" / "uz.txt").write_text("a\n", encoding="utf-8")
    base = _base()
    recipe = bench.arm_recipe(base, "emmax", Path("/init"), tmp_path, steps=200, seed=5)
    assert recipe["model"]["init"] == "pretrained" and recipe["model"]["name_or_path"] == "/init"
    assert recipe["tokenizer"] == {"train": False}
    assert recipe["objective"]["name"] == "emmax" and recipe["objective"]["emmax"]["phase1_steps"] == 50
    assert recipe["data"]["monolingual"] == [str(tmp_path / "mono" / "uz.txt")]
    assert recipe["training"]["max_steps"] == 200 and recipe["training"]["warmup_steps"] == 20
    assert recipe["seed"] == 5
    assert base["objective"] == {"name": "mexma", "alpha": 1.0}  # the base recipe is not touched
    ems = bench.arm_recipe(base, "ems", Path("/init"), tmp_path, steps=7, seed=0)
    assert "monolingual" not in ems["data"] and ems["training"]["warmup_steps"] == 1


def test_sts_rows_keeps_the_asked_pairs_up_to_the_limit(tmp_path):
    source = tmp_path / "sts.tsv"
    rows = [("en", "en"), ("en", "de"), ("en", "en"), ("de", "de"), ("en", "en"), ("en", "fr")]
    source.write_text(
        "lang1\tlang2\tsentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\ts\tt\t1.0\n" for a, b in rows),
        encoding="utf-8",
    )
    out = bench.sts_rows(source, tmp_path / "out.tsv", {("en", "en"), ("en", "de")}, limit=2)
    kept = [line.split("\t")[:2] for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert kept == [["en", "en"], ["en", "de"], ["en", "en"]]


def test_scores_average_both_directions_and_the_language_sets():
    bitext_pud = {f"{a}-{b}": {"xsim_error": 10.0 * i} for i, lang in enumerate(bench.PUD_LANGS)
                  for a, b in (("en", lang), (lang, "en"))}  # fmt: skip
    bitext_kardes = {"en-uz": {"xsim_error": 40.0}, "uz-en": {"xsim_error": 60.0},
                     "en-kk": {"xsim_error": 70.0}, "kk-en": {"xsim_error": 30.0}}  # fmt: skip
    stsb = {"en-en": 80.0, "de-de": 70.0, "fr-fr": 70.0, "es-es": 70.0, "ru-ru": 70.0,
            "en-de": 50.0, "en-fr": 50.0, "en-es": 50.0, "en-ru": 50.0}  # fmt: skip
    kardes = {"uz-uz": 60.0, "kk-kk": 60.0, "en-uz": 20.0, "en-kk": 20.0}
    result = {
        "bitext": {"pud.tsv": bitext_pud, "kardes-sts-bitext.tsv": bitext_kardes},
        "sts": {
            "stsb-mt-dev.objectives.tsv": {"spearman": stsb},
            "kardes-sts-dev.objectives.tsv": {"spearman": kardes},
        },
    }
    s = bench.scores(result)
    assert s["pud_xsim"] == pytest.approx((0 + 10 + 20 + 30 + 40) / 5)
    assert s["kardes_xsim"] == pytest.approx(50.0)
    assert s["sts_mono"] == pytest.approx((80 + 4 * 70 + 2 * 60) / 7)
    assert s["sts_cross"] == pytest.approx((4 * 50 + 2 * 20) / 6)


def test_write_section_replaces_its_own_section_only(tmp_path):
    out = tmp_path / "results.md"
    out.write_text("# Results\n\nother tables\n", encoding="utf-8")
    bench.write_section(out, f"{bench.BEGIN}\nfirst\n{bench.END}\n")
    bench.write_section(out, f"{bench.BEGIN}\nsecond\n{bench.END}\n")
    text = out.read_text(encoding="utf-8")
    assert text == f"# Results\n\nother tables\n\n{bench.BEGIN}\nsecond\n{bench.END}\n"


def test_first_rows_copies_the_header_and_the_first_rows(tmp_path):
    source = tmp_path / "bitext.tsv"
    source.write_text("en\tde\na\tA\nb\tB\nc\tC\n", encoding="utf-8")
    assert bench.first_rows(source, tmp_path / "x.tsv", None) == source
    out = bench.first_rows(source, tmp_path / "x.tsv", 2)
    assert out.read_text(encoding="utf-8") == "en\tde\na\tA\nb\tB\n"

"""Dev files split once into a selection part (what training and choices read) and a report part
(what the results tables are measured on): by sentence group, fixed by content, never read by a
recipe, a stage or a release step."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from modsenc.data import splits
from modsenc.data.specs import load_parallel
from modsenc.eval.sts import load_sts
from tests._zoo import fast_recipe, write_sts

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
KARDES_STS = SHARED / "eval-dev" / "sts" / "kardes-sts-dev.tsv"
# The files whose report part is this project's held-out dev data: the eval-dev files and NTREX.
DEV_RESOURCES = ("eval-dev/", "parallel/ntrex.tsv")


def test_rows_that_share_a_text_are_one_group_keyed_by_its_smallest_text() -> None:
    rows = [("b", "a"), ("c", "b"), ("d", ""), ("e", "d"), ("", "")]
    # rows 0 and 1 share "b": smallest text "a"; rows 2 and 3 share "d": smallest "d"; row 4 is empty
    assert splits.sentence_groups(rows) == ["a", "a", "d", "d", ""]
    both = splits.rows_in(rows, "selection") + splits.rows_in(rows, "report")
    assert sorted(both) == [0, 1, 2, 3, 4]
    assert ({0, 1} <= set(splits.rows_in(rows, "selection"))) != (
        {0, 1} <= set(splits.rows_in(rows, "report"))
    )
    with pytest.raises(ValueError, match="split must be one of selection, report, got 'test'"):
        splits.rows_in(rows, "test")


def test_a_groups_part_depends_on_its_content_not_on_the_row_order() -> None:
    rows = [(f"sentence {i}", f"translation {i}") for i in range(200)]
    report = {rows[i] for i in splits.rows_in(rows, "report")}
    assert {rows[::-1][i] for i in splits.rows_in(rows[::-1], "report")} == report
    # half of 200 independent groups, within 4 standard deviations (sd of a binomial(200, 1/2) is 7.1)
    assert 100 - 29 < len(report) < 100 + 29


def test_sts_and_parallel_specs_read_one_part(tmp_path) -> None:
    sts = write_sts(
        tmp_path / "sts.tsv",
        [("en", "en", f"A{i}", f"B{i}", i % 5) for i in range(40)]
        + [("en", "uz", f"A{i}", f"b{i}", i % 5) for i in range(40)]
        + [("uz", "uz", f"a{i}", f"b{i}", i % 5) for i in range(40)],
    )
    whole = load_sts(sts)
    selection = load_sts({"path": sts, "split": "selection"})
    report = load_sts({"path": sts, "split": "report"})
    assert len(selection) + len(report) == len(whole) == 120 and selection and report
    # pair i is one group in all three of its rows (en-en and en-uz share A_i; en-uz and uz-uz b_i)
    index = {pair: int(pair.sentence1[1:]) for pair in whole}
    assert {index[p] for p in selection}.isdisjoint({index[p] for p in report})
    assert len(selection) % 3 == 0 and len(report) % 3 == 0
    tsv = tmp_path / "par.tsv"
    tsv.write_text("en\tuz\tkk\n" + "".join(f"e{i}\tu{i}\tk{i}\n" for i in range(30)), encoding="utf-8")
    parts = {
        part: load_parallel({"path": str(tsv), "languages": ["en", "kk"], "split": part})
        for part in splits.SPLITS
    }
    assert sorted(parts["selection"].columns["en"] + parts["report"].columns["en"]) == sorted(
        f"e{i}" for i in range(30)
    )
    assert list(parts["report"].columns) == ["en", "kk"]
    uz_report = load_parallel({"path": str(tsv), "languages": ["en", "uz"], "split": "report"})
    assert uz_report.columns["en"] == parts["report"].columns["en"]  # grouped over the whole row


@pytest.mark.skipif(not KARDES_STS.is_file(), reason="needs ../shared/data")
def test_kardes_sts_dev_splits_with_no_sentence_in_both_parts() -> None:
    parts = {part: load_sts({"path": KARDES_STS, "split": part}) for part in splits.SPLITS}
    texts = {part: {t for p in pairs for t in (p.sentence1, p.sentence2)} for part, pairs in parts.items()}
    assert texts["selection"].isdisjoint(texts["report"])
    for part, pairs in parts.items():
        by_pair = {(p.lang1, p.lang2) for p in pairs}
        assert len(by_pair) == 11, part  # every language pair keeps rows in both parts
        assert 0.35 < len(pairs) / 2200 < 0.65, part


def _data_specs(node, where: str):
    """Every data spec in a recipe mapping: (where, path, split)."""
    if isinstance(node, dict):
        if isinstance(node.get("path"), str):
            yield where, node["path"], node.get("split")
            return
        for key, value in node.items():
            yield from _data_specs(value, f"{where}.{key}")
    elif isinstance(node, list):
        for value in node:
            yield from _data_specs(value, where)
    elif isinstance(node, str) and node.endswith((".tsv", ".txt", ".tsv.gz")):
        yield where, node, None


@pytest.mark.parametrize(
    "recipe", sorted((ROOT / "modsenc" / "recipes").glob("*.yaml")), ids=lambda p: p.stem
)
def test_no_recipe_reads_a_dev_files_report_part(recipe) -> None:
    specs = list(_data_specs(yaml.safe_load(recipe.read_text(encoding="utf-8")), recipe.stem))
    for where, path, split in specs:
        assert split != "report", f"{where}: {path}"
        if any(resource in path for resource in DEV_RESOURCES):
            assert split == "selection", f"{where}: {path} is a dev file: name its selection part"


def test_the_release_steps_name_no_report_part() -> None:
    for path in (ROOT / "Makefile", *(ROOT / ".ci").iterdir()):
        text = path.read_text(encoding="utf-8")
        assert "split: report" not in text and "eval-dev" not in text, path


def test_an_add_language_run_never_opens_a_report_part(tiny_backbone_dir, tmp_path, monkeypatch) -> None:
    """With the report part refused, a whole add-language run (stages, dev metrics, install) on a
    recipe whose dev STS is a selection part goes through."""
    from modsenc.training.add_language import run

    sts = write_sts(
        tmp_path / "sts.tsv",
        [
            ("en", "en", "The cat sleeps.", "A cat is sleeping.", 4.5),
            ("en", "en", "He runs.", "It rains.", 0.5),
        ]
        * 1
        + [("en", "en", f"Sentence {i}.", f"Another {i}.", i % 5) for i in range(8)],
    )
    monkeypatch.setattr(splits, "SPLITS", (splits.SELECTION,))  # asking for the report part raises
    with pytest.raises(ValueError, match="split must be one of selection"):
        load_sts({"path": sts, "split": "report"})
    dealt = []  # every group the run's readers dealt to a part
    part_of = splits.part_of
    monkeypatch.setattr(splits, "part_of", lambda key: dealt.append(key) or part_of(key))
    recipe = fast_recipe(**{"dev.sts": f"[{{path: {sts}, split: selection}}]"})
    bundle = run("en", recipe, tmp_path / "zoo", backbone_dir=tiny_backbone_dir, work_dir=tmp_path / "w")
    assert bundle.is_dir() and len(dealt) >= 10  # the dev STS file was read, its selection part only

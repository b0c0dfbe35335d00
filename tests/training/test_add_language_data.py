"""Issue 51: add-language from an installed package. The recipes' ../shared/data files come from
--data DIR (or $MODSENC_DATA); a missing file, or a language the files do not cover, is one line
saying what to pass; the data and an ETA are printed before training; sentences cut to the token
limit are one counted line a stage; the CLI's default recipe is the one README.md names."""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from modsenc.cli import main
from modsenc.cli.train import DATA_ENV as CLI_DATA_ENV
from modsenc.cli.train import DEFAULT_ADD_LANGUAGE_RECIPE
from modsenc.data.demo import demo_path
from modsenc.data.language_data import load_language_data
from modsenc.data.specs import DATA_ENV, resolve_data_spec
from modsenc.training.add_language import run
from modsenc.training.recipe import find_recipe
from modsenc.utils.errors import MissingFileError
from tests._zoo import fast_recipe

ROOT = Path(__file__).resolve().parents[2]
PARAPHRASES = "pair_id\tlang\tanchor\tpositive\tnegative\n" + "".join(
    f"{i}\tuz\tJumla {i}.\tGap {i}.\t\n" for i in range(5)
)


# ------------------------------------------------------------------ --data and $MODSENC_DATA
def test_a_shared_data_path_is_taken_from_the_data_folder(tmp_path: Path) -> None:
    (tmp_path / "paraphrase").mkdir()
    (tmp_path / "paraphrase" / "a.tsv").write_text(PARAPHRASES, encoding="utf-8")
    spec = "../shared/data/paraphrase/a.tsv"
    assert resolve_data_spec(spec, data_dir=tmp_path) == tmp_path / "paraphrase" / "a.tsv"
    assert resolve_data_spec({"path": spec, "rows": [0, 2]}, data_dir=str(tmp_path)) == {
        "path": tmp_path / "paraphrase" / "a.tsv",
        "rows": [0, 2],
    }
    # other specs keep today's meaning, with or without a data folder
    assert resolve_data_spec("demo:parallel.tsv", data_dir=tmp_path) == demo_path("parallel.tsv")
    assert resolve_data_spec(str(tmp_path / "x.tsv"), data_dir=tmp_path) == tmp_path / "x.tsv"
    assert resolve_data_spec("mine/x.tsv", data_dir=tmp_path) == Path("mine/x.tsv")
    # and load_language_data reads the language's rows from there
    data = load_language_data("uz", "en", {"paraphrase": [spec]}, None, tmp_path)
    assert len(data.paraphrases) == 5
    assert data.files["paraphrase"][0]["path"] == str(tmp_path / "paraphrase" / "a.tsv")


def test_a_missing_file_is_one_line_naming_it_the_folder_and_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(MissingFileError) as err:
        resolve_data_spec("../shared/data/paraphrase/none.tsv", data_dir=tmp_path)
    message = str(err.value)
    assert "\n" not in message and "paraphrase/none.tsv" in message and str(tmp_path) in message
    assert "--data DIR" in message and "--paraphrase" in message
    # without a data folder: the folders looked in (here neither has ../shared/data/...)
    recipe = tmp_path / "clone" / "recipes" / "r.yaml"
    recipe.parent.mkdir(parents=True)
    with pytest.raises(MissingFileError) as err:
        resolve_data_spec("../shared/data/paraphrase/none.tsv", str(recipe))
    message = str(err.value)
    assert "\n" not in message and "not found (looked in " in message
    assert str(tmp_path / "shared" / "data" / "paraphrase") in message
    assert f"--data DIR (or set ${DATA_ENV})" in message


def test_the_command_line_takes_data_from_the_option_or_the_environment(tmp_path: Path, monkeypatch) -> None:
    assert CLI_DATA_ENV == DATA_ENV  # the CLI spells it out (no import on `--help`)
    runner = CliRunner()
    args = ["add-language", "en", "--zoo", str(tmp_path / "zoo"), "--work-dir", str(tmp_path / "w")]
    empty = tmp_path / "data"
    empty.mkdir()
    # the default recipe's first file, looked for in the data folder, before any model loads
    result = runner.invoke(main, [*args, "--data", str(empty)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"paraphrase/kardes-xnli.tsv is not in the data folder {empty}" in result.output
    monkeypatch.setenv(DATA_ENV, str(empty))
    result = runner.invoke(main, args)
    assert result.exit_code == 1 and f"is not in the data folder {empty}" in result.output
    result = runner.invoke(main, [*args, "--data", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "does not exist" in result.output
    assert not (tmp_path / "zoo").exists() and not (tmp_path / "w").exists()


def test_a_language_the_recipe_does_not_cover_is_told_what_to_pass(tmp_path: Path) -> None:
    recipe = tmp_path / "demo-files.yaml"
    recipe.write_text("data:\n  paraphrase: ['demo:paraphrase.tsv']\n", encoding="utf-8")
    args = ["add-language", "kaa", "--recipe", str(recipe), "--stages", "se"]
    places = ["--zoo", str(tmp_path / "z"), "--work-dir", str(tmp_path / "w")]
    result = CliRunner().invoke(main, [*args, *places])
    assert result.exit_code == 1 and "Traceback" not in result.output
    line = result.output.strip().splitlines()[-1]
    assert "stage se needs kaa paraphrase data and none of paraphrase.tsv has any" in line
    assert "demo-files's data has no kaa rows at all" in line
    for what in ("--paraphrase FILE", "--data DIR", "modsenc synthesize"):
        assert what in line


# ------------------------------------------------------------------ the default recipe
def test_the_default_recipe_is_the_one_the_readme_names() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Adding a language", 1)[1].split("\n## ", 1)[0]
    named = re.search(r"default recipe is `([\w-]+)`", section)
    assert named, "README.md's 'Adding a language' names no default recipe"
    assert named.group(1) == DEFAULT_ADD_LANGUAGE_RECIPE
    assert f"default recipe, `{DEFAULT_ADD_LANGUAGE_RECIPE}`" in readme  # the shipped-zoo section
    option = next(p for p in main.commands["add-language"].params if p.name == "recipe")
    assert option.default == DEFAULT_ADD_LANGUAGE_RECIPE
    assert find_recipe(DEFAULT_ADD_LANGUAGE_RECIPE).is_file()
    # make demo names its own recipe, so the default may change under it
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    calls = [line for line in demo.splitlines() if "add-language " in line]
    assert calls and all("--recipe add-language-demo-e5" in line for line in calls)


# ------------------------------------------------------------------ summary and truncation
def test_the_data_summary_and_one_counted_truncation_line(tiny_backbone_dir, tmp_path, caplog) -> None:
    recipe = fast_recipe(max_length="8")  # most demo sentences are longer than 8 tokens
    caplog.set_level(logging.INFO, logger="modsenc.training")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        zoo, work = tmp_path / "zoo", tmp_path / "w"
        run("en", recipe, zoo, backbone_dir=tiny_backbone_dir, work_dir=work, stages=["se"])
    lines = [r.getMessage() for r in caplog.records if r.name == "modsenc.training.add_language"]
    text = "\n".join(lines)
    assert "[en] data (add-language.yaml):" in text
    assert re.search(r"\[en\]   paraphrase \S*paraphrase\.tsv: [\d,]+ paraphrase pairs for en", text)
    assert re.search(r"\[en\]   se: [\d,]+ paraphrase pairs, 3 steps of 8", text)
    assert re.search(r"\[en\]   time: about \d+ s for 3 steps \(an estimate: ", text)
    # the summary comes before the first stage
    assert text.index("data (add-language.yaml)") < text.index("stage se (1/1)")
    counted = [line for line in lines if "tokens and were truncated" in line]
    line = r"\[en\] se: [\d,]+ of [\d,]+ sentences were longer than 8 tokens and were truncated .*"
    assert any(re.fullmatch(line, c) for c in counted)
    assert len([c for c in counted if "] se:" in c]) == 1  # one line for the stage, not one a batch
    assert not [w for w in caught if "longer than" in str(w.message)]

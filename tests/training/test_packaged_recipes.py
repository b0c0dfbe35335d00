"""Recipes are package data (modsenc/recipes): found and able to find their data from any directory."""

from __future__ import annotations

from pathlib import Path

import pytest

import modsenc
from modsenc.data.specs import resolve_data_spec
from modsenc.training.recipe import PACKAGED_RECIPES, RECIPE_DIRS, find_recipe
from modsenc.utils.errors import MissingFileError

ROOT = Path(__file__).resolve().parents[2]


def test_recipes_ship_inside_the_package_and_the_checkout_links_to_them() -> None:
    assert PACKAGED_RECIPES == Path(modsenc.__file__).resolve().parent / "recipes"
    assert RECIPE_DIRS[-1] == PACKAGED_RECIPES
    assert (ROOT / "recipes").resolve() == PACKAGED_RECIPES
    names = sorted(p.stem for p in PACKAGED_RECIPES.glob("*.yaml"))
    assert {"add-language", "add-language-e5", "demo-e5", "mexma-base"} <= set(names)
    assert find_recipe("add-language-e5").resolve() == PACKAGED_RECIPES / "add-language-e5.yaml"


def test_a_packaged_recipes_relative_data_is_found_from_any_directory(tmp_path, monkeypatch) -> None:
    """``../shared/data/...`` in modsenc/recipes/*.yaml means beside the checkout, not beside the
    package folder, whatever the working directory."""
    monkeypatch.chdir(tmp_path)
    recipe = str(PACKAGED_RECIPES / "add-language-e5.yaml")
    wanted = (ROOT.parent / "shared" / "data" / "parallel" / "kardes-xnli.tsv").resolve()
    if not wanted.is_file():
        pytest.skip("needs ../shared/data")
    assert Path(resolve_data_spec("../shared/data/parallel/kardes-xnli.tsv", recipe)).resolve() == wanted
    assert resolve_data_spec("demo:parallel.tsv", recipe).name == "parallel.tsv"
    # not found anywhere: one line naming where it looked and what to pass (issue 51: a pip user has
    # no ../shared/data; before, the path was left as given for a later "no such file")
    with pytest.raises(
        MissingFileError, match=r"recipe data file \.\./shared/data/none\.tsv not found .*--data DIR"
    ):
        resolve_data_spec("../shared/data/none.tsv", recipe)

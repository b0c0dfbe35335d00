"""Stage cache keys hash the resolved configuration: a default changed in code gives a new key,
so ``--resume`` trains the stage again instead of reusing one trained under the old default."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from modsenc.data.language_data import LanguageData
from modsenc.training.add_language import _stage_key
from modsenc.training.configs import AddLanguageRecipe, FinetuneRecipe, LAConfig, PhaseConfig
from modsenc.training.finetune import _phase_key
from modsenc.training.recipe import load_recipe
from modsenc.utils.config import RecipeError


# The same classes with one default changed, as an edit of training/configs.py would change it
# (module level: the sections read their fields' types by name).
@dataclass
class LAWithNewMaskRatio(LAConfig):
    mask_ratio: float = 0.2


@dataclass
class AddLanguageWithNewDefault(AddLanguageRecipe):
    la: LAWithNewMaskRatio = field(default_factory=LAWithNewMaskRatio)


@dataclass
class PhaseWithNewScale(PhaseConfig):
    scale: float = 30.0


@dataclass
class FinetuneWithNewDefault(FinetuneRecipe):
    mono: PhaseWithNewScale = field(default_factory=PhaseWithNewScale)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_add_language_stage_key_follows_a_changed_default(tmp_path) -> None:
    text = _file(tmp_path, "la: {lr: 1.0e-4}\n")
    data = LanguageData(lang="uz", pivot="en")

    def key(schema: type[AddLanguageRecipe], stage: str) -> str:
        return _stage_key("previous", stage, load_recipe(text, [], schema=schema), data)

    assert key(AddLanguageRecipe, "la") == key(AddLanguageRecipe, "la")  # same config, same key
    patched = load_recipe(text, [], schema=AddLanguageWithNewDefault)
    assert (patched.la.lr, patched.la.mask_ratio) == (1.0e-4, 0.2)  # the recipe's key, the new default
    assert key(AddLanguageWithNewDefault, "la") != key(AddLanguageRecipe, "la")
    # a stage the changed default does not reach keeps its key, and so its finished result
    assert key(AddLanguageWithNewDefault, "se") == key(AddLanguageRecipe, "se")


def test_finetune_phase_key_follows_a_changed_default(tmp_path) -> None:
    text = _file(tmp_path, "mono: {lr: 1.0e-4}\n")
    files: dict[str, list] = {"uz": []}

    def key(schema: type[FinetuneRecipe], kind: str) -> str:
        return _phase_key("previous", kind, load_recipe(text, [], schema=schema), files)

    assert key(FinetuneRecipe, "mono") == key(FinetuneRecipe, "mono")
    assert key(FinetuneWithNewDefault, "mono") != key(FinetuneRecipe, "mono")
    assert key(FinetuneWithNewDefault, "cross") == key(FinetuneRecipe, "cross")


def test_per_language_settings_merge_as_one_section() -> None:
    """``per_language.LANG.la.epochs`` replaces the shared ``max_steps`` default, as ``epochs``
    in the shared section would; both budgets given (one in each) is refused as in one section."""
    recipe = AddLanguageRecipe.from_dict({"per_language": {"tr": {"la": {"epochs": 2}}}})
    tr = recipe.for_language("tr")
    assert (tr.la.epochs, tr.la.max_steps) == (2.0, None) and (recipe.la.epochs, recipe.la.max_steps) == (
        None,
        300,
    )
    assert recipe.for_language("uz") is recipe
    both = AddLanguageRecipe.from_dict(
        {"la": {"max_steps": 5}, "per_language": {"tr": {"la": {"epochs": 2}}}}
    )
    with pytest.raises(
        RecipeError, match=r"recipe keys 'la.epochs' \(2.0\) and 'la.max_steps' \(5\) are both set"
    ):
        both.for_language("tr")

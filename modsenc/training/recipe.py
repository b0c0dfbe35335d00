"""Recipes: YAML files in ``recipes/`` plus ``section.key=value`` overrides from the command line.

A command that declares its recipe's sections (``schema``, a ``modsenc.utils.config.Section``:
add-language's and finetune's, in ``modsenc.training.configs``) gets every key checked, in the file
and in the overrides, against those declarations; train-backbone's recipes (whose sections depend
on the objective) are checked against the keys the file holds.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

import modsenc
from modsenc.utils.config import RecipeError, Section, set_dotted

RECIPE_DIRS = (Path.cwd() / "recipes", Path(modsenc.__file__).resolve().parents[1] / "recipes")


def find_recipe(name_or_path: str | os.PathLike) -> Path:
    """A path to a YAML file, or a recipe name such as ``demo`` looked up in ``recipes/``."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml"):
        if candidate.exists():
            return candidate
        raise FileNotFoundError(f"recipe file {candidate} does not exist")
    searched = []
    for directory in RECIPE_DIRS:
        path = directory / f"{name_or_path}.yaml"
        if path.exists():
            return path
        searched.append(str(directory))
    available = sorted({p.stem for d in RECIPE_DIRS if d.is_dir() for p in d.glob("*.yaml")})
    raise FileNotFoundError(
        f"no recipe named {name_or_path!r} (looked in {', '.join(searched)}); "
        f"available: {', '.join(available)}"
    )


def load_recipe(
    name_or_path: str | os.PathLike,
    overrides: list[str] | None = None,
    schema: type[Section] | None = None,
) -> dict[str, Any]:
    """The recipe as a mapping, overrides applied. With ``schema``, every key of the file and of
    the overrides must be one it declares (a RecipeError lists the valid keys otherwise)."""
    path = find_recipe(name_or_path)
    try:
        recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: invalid YAML: {err}") from err
    if not isinstance(recipe, dict):
        raise ValueError(f"{path}: a recipe must be a mapping of sections, got {type(recipe).__name__}")
    if schema is not None:
        try:
            schema.from_dict(recipe)
        except RecipeError as err:
            raise RecipeError(f"{path}: {err}") from err
    recipe = apply_overrides(recipe, overrides or [], schema)
    recipe["_recipe_path"] = str(path)
    return recipe


def apply_overrides(
    recipe: dict[str, Any], overrides: list[str], schema: type[Section] | None = None
) -> dict[str, Any]:
    """``training.max_steps=20`` sets a key (values parsed as YAML: ``20``, ``null``, ``[en, de]``).

    Unknown keys are errors, so a typo never silently trains with the default. Without ``schema``
    a key must exist in the recipe; with it, a key must be declared (it may be missing from the
    file), and a free-form mapping takes new keys: ``cla.adapter.non_linearity=gelu``.
    """
    recipe = copy.deepcopy(recipe)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        dotted, raw = item.split("=", 1)
        if schema is not None:
            set_dotted(recipe, schema, dotted.strip(), yaml.safe_load(raw))
            continue
        keys = dotted.strip().split(".")
        node = recipe
        for depth, key in enumerate(keys[:-1]):
            if not isinstance(node.get(key), dict):
                raise KeyError(f"override {item!r}: no section {'.'.join(keys[: depth + 1])!r} in the recipe")
            node = node[key]
        if keys[-1] not in node:
            raise KeyError(
                f"override {item!r}: unknown key {dotted!r}; known here: {', '.join(sorted(node))}"
            )
        node[keys[-1]] = yaml.safe_load(raw)
    if schema is not None:
        schema.from_dict(recipe)  # the values' types
    return recipe

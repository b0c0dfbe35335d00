"""Recipes: YAML files in ``recipes/`` plus ``section.key=value`` overrides from the command line."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

import modsenc

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


def load_recipe(name_or_path: str | os.PathLike, overrides: list[str] | None = None) -> dict[str, Any]:
    path = find_recipe(name_or_path)
    try:
        recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: invalid YAML: {err}") from err
    if not isinstance(recipe, dict):
        raise ValueError(f"{path}: a recipe must be a mapping of sections, got {type(recipe).__name__}")
    recipe = apply_overrides(recipe, overrides or [])
    recipe["_recipe_path"] = str(path)
    return recipe


def apply_overrides(recipe: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``training.max_steps=20`` sets an existing key (values parsed as YAML: ``20``, ``null``, ``[en, de]``).

    Unknown keys are errors, so a typo never silently trains with the default.
    """
    recipe = copy.deepcopy(recipe)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        dotted, raw = item.split("=", 1)
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
    return recipe

"""Recipes: YAML files in ``recipes/`` (installed with the package as ``modsenc/recipes``) plus
``section.key=value`` overrides from the command line.

Each command declares its recipe's sections (``schema``, a ``modsenc.utils.config.Section``:
add-language's, finetune's and train-backbone's, in ``modsenc.training.configs``); every key, in
the file and in the overrides, is checked against those declarations.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

import modsenc
from modsenc.utils.config import RecipeError, Section, set_dotted

S = TypeVar("S", bound=Section)

# The working directory's recipes/ first (a user's own), then the recipes installed with the package
# (modsenc/recipes, package data; a checkout's top-level recipes/ links there).
PACKAGED_RECIPES = Path(modsenc.__file__).resolve().parent / "recipes"
RECIPE_DIRS = (Path.cwd() / "recipes", PACKAGED_RECIPES)


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
    overrides: list[str] | None,
    schema: type[S],
    settings: Mapping[str, Any] | None = None,
) -> S:
    """The recipe as one typed, validated ``schema`` object, defaults filled in, which the command
    hands to its stages as it is (its ``recipe_path`` is the file). ``overrides`` (``la.lr=1e-4``,
    values parsed as YAML) and then ``settings`` (dotted keys with values the command line already
    holds, such as ``--mono``'s files) are set before anything is checked. Every key must be one
    ``schema`` declares: a RecipeError names the file and lists the valid keys otherwise."""
    path, recipe = _read(name_or_path, overrides, schema, settings)
    return _validated(path, recipe, schema, bool(overrides))


def recipe_mapping(
    name_or_path: str | os.PathLike, overrides: list[str] | None, schema: type[Section]
) -> dict[str, Any]:
    """The recipe mapping as written, overrides set and checked against ``schema``, its file under
    ``_recipe_path``: for scripts that derive several recipes from one before each is typed
    (``schema.of``). A command takes ``load_recipe``'s typed object instead."""
    path, recipe = _read(name_or_path, overrides, schema, None)
    _validated(path, recipe, schema, bool(overrides))
    return recipe


def _read(
    name_or_path: str | os.PathLike,
    overrides: list[str] | None,
    schema: type[Section],
    settings: Mapping[str, Any] | None,
) -> tuple[Path, dict[str, Any]]:
    path = find_recipe(name_or_path)
    try:
        recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: invalid YAML: {err}") from err
    if not isinstance(recipe, dict):
        raise ValueError(f"{path}: a recipe must be a mapping of sections, got {type(recipe).__name__}")
    # Checked once, with the overrides applied: they may complete a template (`name_or_path: null`
    # with --set model.name_or_path=...).
    recipe = set_overrides(recipe, overrides or [], schema)
    for dotted, value in (settings or {}).items():
        set_dotted(recipe, schema, dotted, value)
    recipe["_recipe_path"] = str(path)
    return path, recipe


def _validated(path: Path, recipe: dict[str, Any], schema: type[S], overridden: bool) -> S:
    """``schema.from_dict(recipe)``; its error names the file, and says when --set took part."""
    try:
        return schema.from_dict(recipe)
    except RecipeError as err:
        raise RecipeError(f"{path}{' with the --set overrides' if overridden else ''}: {err}") from err


def set_overrides(recipe: dict[str, Any], overrides: list[str], schema: type[Section]) -> dict[str, Any]:
    """A copy of ``recipe`` with ``training.max_steps=20``-style overrides set (values parsed as
    YAML: ``20``, ``null``, ``[en, de]``); the caller checks the values (``schema.from_dict``).

    A key must be one ``schema`` declares (it may be missing from the file), so a typo never
    silently trains with the default; a free-form mapping takes new keys:
    ``cla.adapter.non_linearity=gelu``.
    """
    recipe = copy.deepcopy(recipe)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} must look like section.key=value")
        dotted, raw = item.split("=", 1)
        set_dotted(recipe, schema, dotted.strip(), yaml.safe_load(raw))
    return recipe

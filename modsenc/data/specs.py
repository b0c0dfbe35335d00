"""Data specs in recipes: where a file named in a recipe is, and the record of what was read.

A spec is a path string (``$VARS`` and ``~`` expanded), ``demo:NAME`` for a file packaged in
``modsenc/data/demo``, or a mapping ``{path: ..., column: ..., rows: [start, stop]}``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from modsenc.data.demo import demo_path
from modsenc.utils.io import file_sha256


def resolve_data_spec(spec: Any, recipe_path: str | None = None) -> Any:
    """``demo:parallel.tsv`` names a packaged demo file; other strings are paths ($VARS expanded).

    A relative path is taken from the working directory, or else from the repository holding the
    recipe (so ``../shared/data/...`` in ``recipes/*.yaml`` works from any directory; for the
    recipes installed in the package, ``modsenc/recipes``, the checkout holding the package).
    """
    if isinstance(spec, dict) and isinstance(spec.get("path"), str):  # {path: ..., rows: ...}
        return {**spec, "path": resolve_data_spec(spec["path"], recipe_path)}
    if isinstance(spec, str):
        if spec.startswith("demo:"):
            return demo_path(spec.removeprefix("demo:"))
        path = Path(os.path.expanduser(os.path.expandvars(spec)))
        recipe_dir = Path(recipe_path).resolve().parent if recipe_path else None
        if not path.is_absolute() and not path.exists() and recipe_dir and recipe_dir.name == "recipes":
            repo = recipe_dir.parent.parent if recipe_dir.parent.name == "modsenc" else recipe_dir.parent
            beside_repo = repo / path
            if beside_repo.exists():
                return beside_repo
        return path
    return spec


def file_record(path: Path) -> dict[str, Any]:
    """What manifests and cache keys record of a data file: its path and the sha256 of its bytes."""
    return {"path": str(path), "sha256": file_sha256(path)}

"""Data specs in recipes: where a file named in a recipe is, and the record of what was read.

A spec is a path string (``$VARS`` and ``~`` expanded), ``demo:NAME`` for a file packaged in
``modsenc/data/demo``, or a mapping ``{path: ..., column: ..., rows: [start, stop]}``.

The shipped recipes name their files ``../shared/data/KIND/FILE``: a folder beside a git clone.
An installed package has no such folder, so a data folder given as ``data_dir`` (add-language's
``--data DIR``, default ``$MODSENC_DATA``) stands for ``../shared/data``: ``--data /x`` reads
``../shared/data/paraphrase/a.tsv`` as ``/x/paraphrase/a.tsv``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from modsenc.data.demo import demo_path
from modsenc.utils.errors import MissingFileError
from modsenc.utils.io import file_sha256

SHARED_DATA = "../shared/data/"  # how the shipped recipes name their data folder
DATA_ENV = "MODSENC_DATA"  # the default of --data


def resolve_data_spec(
    spec: Any, recipe_path: str | None = None, data_dir: str | os.PathLike | None = None
) -> Any:
    """``demo:parallel.tsv`` names a packaged demo file; other strings are paths ($VARS expanded).

    A path starting with ``../shared/data/`` is taken from ``data_dir`` when one is given (and
    must be there). Otherwise a relative path is taken from the working directory, or else from
    the repository holding the recipe (so ``../shared/data/...`` in ``recipes/*.yaml`` works from
    any directory; for the recipes installed in the package, ``modsenc/recipes``, the checkout
    holding the package); a ``../shared/data/`` file found in neither is a MissingFileError
    that says what to pass.
    """
    if isinstance(spec, dict) and isinstance(spec.get("path"), str):  # {path: ..., rows: ...}
        return {**spec, "path": resolve_data_spec(spec["path"], recipe_path, data_dir)}
    if not isinstance(spec, str):
        return spec
    if spec.startswith("demo:"):
        return demo_path(spec.removeprefix("demo:"))
    expanded = os.path.expanduser(os.path.expandvars(spec))
    shared = expanded.replace("\\", "/").startswith(SHARED_DATA)
    if shared and data_dir is not None:
        inside = expanded.replace("\\", "/").removeprefix(SHARED_DATA)
        path = Path(data_dir).expanduser() / inside
        if not path.exists():
            raise MissingFileError(
                f"recipe data file {spec}: {inside} is not in the data folder {data_dir} (--data or "
                f"${DATA_ENV}): put it there, pass --data DIR for a folder that holds it, or give "
                "your own files (--paraphrase, --parallel, --mono)"
            )
        return path
    path = Path(expanded)
    if path.is_absolute() or path.exists():
        return path
    looked = [Path.cwd() / path]
    repo = _checkout_of(recipe_path)
    if repo is not None:
        beside_repo = repo / path
        if beside_repo.exists():
            return beside_repo
        looked.append(beside_repo)
    if shared:
        folders = " and ".join(str(p.parent.resolve()) for p in looked)
        raise MissingFileError(
            f"recipe data file {spec} not found (looked in {folders}): pass --data DIR (or set "
            f"${DATA_ENV}) for a folder holding {spec.removeprefix(SHARED_DATA)}, or give your own "
            "files (--paraphrase, --parallel, --mono)"
        )
    return path


def _checkout_of(recipe_path: str | None) -> Path | None:
    """The repository holding a recipe in ``recipes/`` (or ``modsenc/recipes``), else None."""
    recipe_dir = Path(recipe_path).resolve().parent if recipe_path else None
    if recipe_dir is None or recipe_dir.name != "recipes":
        return None
    return recipe_dir.parent.parent if recipe_dir.parent.name == "modsenc" else recipe_dir.parent


def file_record(path: Path) -> dict[str, Any]:
    """What manifests and cache keys record of a data file: its path and the sha256 of its bytes."""
    return {"path": str(path), "sha256": file_sha256(path)}

"""Data specs in recipes: where a file named in a recipe is, and the record of what was read.

A spec is a path string (``$VARS`` and ``~`` expanded), ``demo:NAME`` for a file packaged in
``modsenc/data/demo``, or a mapping ``{path: ..., column: ..., rows: [start, stop]}``.

The shipped recipes name their files ``../shared/data/KIND/FILE``: a folder beside a git clone.
An installed package has no such folder, so a data folder given as ``data_dir`` (add-language's
``--data DIR``, default ``$MODSENC_DATA``) stands for ``../shared/data``: ``--data /x`` reads
``../shared/data/paraphrase/a.tsv`` as ``/x/paraphrase/a.tsv``.

The loaders at the end (``load_parallel``, ``load_paraphrases``, ``load_monolingual``) take a
resolved spec and dispatch it to its reader: ``modsenc.data.readers`` for files,
``modsenc.data.hf_parallel`` for a Hugging Face dataset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modsenc.data.demo import demo_path
from modsenc.data.errors import DataFormatError
from modsenc.data.hf_parallel import load_hf_parallel
from modsenc.data.lines import check_file, read_table
from modsenc.data.readers import (
    ParallelCorpus,
    ParaphrasePair,
    PathLike,
    read_monolingual,
    read_parallel_tsv,
    read_paraphrase_tsv,
    select_rows,
    select_split,
)
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


# --------------------------------------------------------------------------------------------------
# config-level loaders: a path, or a dict from a recipe YAML


def spec_dict(spec: Mapping[str, Any], allowed: set[str], what: str) -> dict[str, Any]:
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(
            f"{what} spec has unknown key(s) {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    if "path" not in spec:
        raise ValueError(f"{what} spec needs a 'path' key, got {dict(spec)!r}")
    return dict(spec)


def _spec_type_error(spec: Any, what: str, example: str) -> TypeError:
    return TypeError(f"{what} spec must be a path or a dict such as {example}, not {type(spec).__name__}")


def load_parallel(spec: PathLike | Mapping[str, Any]) -> ParallelCorpus:
    """Resolve a recipe's parallel-data entry.

    Accepted: a path to a parallel TSV; ``{"path": p, "languages": [...], "rows": [start, stop],
    "split": "selection" | "report"}`` (a dev file's part: ``modsenc.data.splits``); or
    ``{"hf": name, "config": ..., "split": ..., "languages": [...], **load_dataset_kwargs}``
    (e.g. ``data_files``, ``revision``), passed to :func:`load_hf_parallel`.
    """
    if isinstance(spec, (str, os.PathLike)):
        return read_parallel_tsv(spec)
    if not isinstance(spec, Mapping):
        raise _spec_type_error(
            spec, "parallel data", "{'path': 'x.tsv'} or {'hf': 'wmt19', 'config': 'de-en'}"
        )
    if "hf" in spec:
        if "path" in spec:
            raise ValueError(f"parallel data spec has both 'hf' and 'path'; give one: {dict(spec)!r}")
        kwargs = dict(spec)
        name = kwargs.pop("hf")
        return load_hf_parallel(
            name,
            config=kwargs.pop("config", None),
            split=kwargs.pop("split", "train"),
            languages=kwargs.pop("languages", None),
            **kwargs,
        )
    d = spec_dict(spec, {"path", "languages", "rows", "split"}, "parallel data")
    if d.get("split") is not None:  # its groups are the whole file's rows, whichever languages
        corpus = select_split(read_parallel_tsv(d["path"]), d["split"], d.get("languages"))
    else:
        corpus = read_parallel_tsv(d["path"], languages=d.get("languages"))
    if d.get("rows") is None:
        return corpus
    return select_rows(corpus, d["rows"])


def load_paraphrases(spec: PathLike | Mapping[str, Any]) -> list[ParaphrasePair]:
    """Resolve a recipe's paraphrase entry: a path or ``{"path": p, "languages": [...]}``."""
    if isinstance(spec, (str, os.PathLike)):
        return read_paraphrase_tsv(spec)
    if not isinstance(spec, Mapping):
        raise _spec_type_error(spec, "paraphrase data", "{'path': 'x.tsv', 'languages': ['en']}")
    d = spec_dict(spec, {"path", "languages"}, "paraphrase data")
    return read_paraphrase_tsv(d["path"], languages=d.get("languages"))


def _tsv_header_hint(path: PathLike) -> str:
    try:
        _header_line, header, _rows = read_table(path)
    except (OSError, DataFormatError):
        return ""
    return f" (its columns: {' '.join(header)})"


def load_monolingual(spec: PathLike | Mapping[str, Any]) -> list[str]:
    """Resolve a recipe's monolingual entry: a text file, or one column of a parallel TSV.

    ``{"path": "parallel.tsv", "column": "uz"}`` reuses the target side of a parallel file as
    monolingual text (empty cells skipped). A ``.tsv`` path without a column is refused: reading
    it line by line would train on tab-joined rows of several languages.
    """
    if isinstance(spec, (str, os.PathLike)):
        spec = {"path": spec}
    if not isinstance(spec, Mapping):
        raise _spec_type_error(
            spec, "monolingual data", "{'path': 'uz.txt'} or {'path': 'x.tsv', 'column': 'uz'}"
        )
    d = spec_dict(spec, {"path", "column"}, "monolingual data")
    path, column = d["path"], d.get("column")
    if column is None:
        if Path(path).suffix.lower() == ".tsv":
            check_file(path)
            raise DataFormatError(
                path,
                None,
                f"is a TSV file{_tsv_header_hint(path)}; to use one of its columns as monolingual text, "
                f"pass {{'path': {os.fspath(path)!r}, 'column': '<lang>'}}",
            )
        return read_monolingual(path)
    corpus = read_parallel_tsv(path, languages=[column])
    sentences = [text for text in corpus.columns[column] if text]
    if not sentences:
        raise DataFormatError(path, None, f"column {column!r} has no non-empty cells")
    return sentences

"""Parallel corpora from Hugging Face datasets (``load_hf_parallel``; a recipe's ``{hf: ...}`` spec).

``datasets`` is imported when a dataset is loaded: it costs about a second and most runs read TSVs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modsenc.data.errors import DataFormatError
from modsenc.data.readers import ParallelCorpus, check_languages_arg, is_language_code
from modsenc.utils.hub import check_model_source


def _hf_label(name: str, config: str | None, split: str, load_kwargs: Mapping[str, Any]) -> str:
    label = f"hf:{name}" + (f":{config}" if config else "") + f"[{split}]"
    data_files = load_kwargs.get("data_files")
    if isinstance(data_files, (str, os.PathLike)):
        label += f" ({os.fspath(data_files)})"
    return label


def _cell(label: str, row: int, lang: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataFormatError(
            label, None, f"row {row}: {lang!r} holds a {type(value).__name__}, not a string"
        )
    return value.strip()


def _load_hf_split(
    name: str, config: str | None, split: str, load_kwargs: Mapping[str, Any], label: str
) -> Any:
    """``datasets.load_dataset``'s result, with its errors as a :class:`DataFormatError` on ``label``."""
    import datasets  # deferred: importing datasets costs about a second and most runs read TSVs

    # A packaged builder (json, csv, parquet, text ...) reads local files: no hub name to check.
    builders = getattr(datasets.packaged_modules, "_PACKAGED_DATASETS_MODULES", {})
    if name not in builders:
        check_model_source(name, kind="dataset")
    try:
        return datasets.load_dataset(name, config, split=split, **load_kwargs)
    except (OSError, ValueError, ConnectionError) as err:  # datasets' own errors subclass these
        reason = " ".join(str(err).split())[:200]
        raise DataFormatError(label, None, f"cannot be loaded ({type(err).__name__}: {reason})") from err


def _column_reader(ds: Any, label: str) -> tuple[list[str], Callable[[str], list[Any]]]:
    """A split's column names and a function that reads one column's values."""
    import datasets  # deferred (see _load_hf_split); already imported by then

    if isinstance(ds, datasets.Dataset):
        column_names = list(ds.column_names)

        def values(column: str) -> list[Any]:
            return ds.select_columns([column]).to_dict()[column]

    elif isinstance(ds, datasets.IterableDataset):  # streaming=True: materialise once
        rows = list(ds)
        column_names = list(dict.fromkeys(key for row in rows for key in row))

        def values(column: str) -> list[Any]:
            return [row.get(column) for row in rows]

    else:
        raise DataFormatError(
            label, None, f"load_dataset returned a {type(ds).__name__}; pass a single split"
        )
    return column_names, values


def _language_reader(
    column_names: list[str],
    values: Callable[[str], list[Any]],
    wanted: list[str] | None,
    label: str,
) -> tuple[list[str], Callable[[str], list[Any]]]:
    """The languages a split holds and a function that reads one language's texts, from a
    ``translation`` column of ``{lang: text}`` dicts or from columns named by language codes."""
    if "translation" in column_names:
        records = [record or {} for record in values("translation")]
        for i, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise DataFormatError(
                    label,
                    None,
                    f"row {i}: 'translation' holds a {type(record).__name__}, not a {{lang: text}} dict",
                )
        available = list(dict.fromkeys(lang for record in records for lang in record))

        def lang_values(lang: str) -> list[Any]:
            return [record.get(lang) for record in records]

    else:
        cache: dict[str, list[Any]] = {}

        def lang_values(lang: str) -> list[Any]:
            if lang not in cache:
                cache[lang] = values(lang)
            return cache[lang]

        # Only text columns are guessed to be languages: "id" is a valid code (Indonesian) but is
        # usually an integer row id. Passing ``languages`` makes the choice explicit.
        available = [
            column
            for column in column_names
            if is_language_code(column)
            and (wanted is not None or all(v is None or isinstance(v, str) for v in lang_values(column)))
        ]
    return available, lang_values


def load_hf_parallel(
    name: str,
    config: str | None = None,
    split: str = "train",
    languages: Sequence[str] | None = None,
    **load_kwargs: Any,
) -> ParallelCorpus:
    """Load a parallel corpus with ``datasets.load_dataset(name, config, split=split, **load_kwargs)``.

    Two layouts are accepted: one column per language code, or a single ``translation`` column
    of ``{lang: text}`` dicts (WMT/OPUS datasets on the Hub). The returned corpus's ``path`` is
    a ``hf:name:config[split]`` label so that later errors still say where the data came from.
    """
    wanted = check_languages_arg(languages)
    label = _hf_label(name, config, split, load_kwargs)
    ds = _load_hf_split(name, config, split, load_kwargs, label)
    column_names, values = _column_reader(ds, label)
    available, lang_values = _language_reader(column_names, values, wanted, label)
    if not available:
        raise DataFormatError(
            label,
            None,
            "no language columns: expected columns named by language codes (e.g. 'en', 'de') or a "
            f"'translation' column of {{lang: text}} dicts; found columns: {' '.join(column_names)}",
        )
    keep = wanted if wanted is not None else available
    missing = [lang for lang in keep if lang not in available]
    if missing:
        raise DataFormatError(
            label, None, f"no language(s) {', '.join(missing)}; available: {' '.join(available)}"
        )
    columns = {lang: [_cell(label, i, lang, v) for i, v in enumerate(lang_values(lang))] for lang in keep}
    if not columns[keep[0]]:
        raise DataFormatError(label, None, "dataset split has no rows")
    return ParallelCorpus(path=label, columns=columns)

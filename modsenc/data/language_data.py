"""One language's training data, as ``add-language`` and ``finetune`` read it from a recipe's ``data``
section: monolingual text, paraphrase pairs (LANG-LANG and, through shared pair ids, pivot-LANG) and
parallel pairs with the pivot, with the last ``dev_pairs`` paraphrase pair ids held out.

``{lang}`` in a spec is replaced by the language code; a ``.tsv`` under ``mono`` means its LANG
column; ``data.per_language.LANG.KEY`` adds files for one language only.

The section's own lists serve every language: each language takes what they hold for it (its rows
of a paraphrase file, its column of a parallel file) and a file without it is skipped, recorded
with a count of 0. That is what lets one default recipe train any language its files cover
(``add-language ky`` from the Kardeş files' ky columns) with no per-language entry. A file listed
for one language (``per_language``) must have that language's column.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modsenc.data.readers import ParaphrasePair
from modsenc.data.specs import (
    file_record,
    load_monolingual,
    load_parallel,
    load_paraphrases,
    resolve_data_spec,
)
from modsenc.utils.config import Section


@dataclass
class DataFiles(Section):
    """Data specs (paths, ``demo:NAME``, or ``{path, column, rows}``) by kind."""

    mono: list[Any] = field(default_factory=list)  # LA (MLM) and tokenizer text; a .tsv: its LANG column
    paraphrase: list[Any] = field(default_factory=list)  # TSV: pair_id lang anchor positive negative
    parallel: list[Any] = field(default_factory=list)  # multi-parallel TSV, columns named by language


@dataclass
class DataConfig(DataFiles):
    """A recipe's ``data`` section (add-language; finetune reads only its paraphrases)."""

    dev_pairs: int = 0  # paraphrase pair ids (the last ones, sorted) held out for dev metrics
    # parallel pairs held out (chosen by a hash of the pivot sentence, so independent of file order)
    # to score and early-stop the stages that train on parallel data; their sentences leave every
    # training set of the language
    dev_parallel: int = 0
    per_language: dict[str, DataFiles] = field(default_factory=dict)  # files for one language only


@dataclass
class LanguageData:
    """Everything one language's stages train on; ``dev_*`` pairs are held out of training."""

    lang: str
    pivot: str
    mono: list[str] = field(default_factory=list)
    paraphrases: list[ParaphrasePair] = field(default_factory=list)  # LANG-LANG
    # Other languages' pairs in the same paraphrase files (dev pair ids and held-out sentences
    # removed): the SE stage may add some of them to LANG's own (``se.transfer_languages``).
    other_paraphrases: list[ParaphrasePair] = field(default_factory=list)
    # (pivot anchor, LANG positive, LANG negative or None)
    crosslingual: list[tuple[str, str, str | None]] = field(default_factory=list)
    parallel: list[tuple[str, str]] = field(default_factory=list)  # (pivot sentence, LANG translation)
    dev_paraphrases: list[ParaphrasePair] = field(default_factory=list)
    dev_crosslingual: list[tuple[str, str]] = field(default_factory=list)  # (pivot anchor, LANG positive)
    dev_parallel: list[tuple[str, str]] = field(default_factory=list)  # (pivot sentence, LANG translation)
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def texts(self) -> list[str]:
        """Every sentence of this language in its data (monolingual text, both sides of its
        paraphrases, its side of the parallel pairs), dev splits included: the router's text."""
        paraphrases = self.paraphrases + self.dev_paraphrases
        return [
            *self.mono,
            *(t for p in paraphrases for t in (p.anchor, p.positive)),
            *(b for _, b in self.parallel + self.dev_parallel),
        ]

    def counts(self) -> dict[str, int]:
        return {
            "mono_sentences": len(self.mono),
            "paraphrase_pairs": len(self.paraphrases),
            "crosslingual_paraphrase_pairs": len(self.crosslingual),
            "parallel_pairs": len(self.parallel),
            "dev_paraphrase_pairs": len(self.dev_paraphrases),
            "dev_crosslingual_pairs": len(self.dev_crosslingual),
            "dev_parallel_pairs": len(self.dev_parallel),
        }


def crosslingual_pairs(
    pairs: Sequence[ParaphrasePair], pivot_rows: Mapping[str, ParaphrasePair]
) -> list[tuple[str, str, str | None]]:
    """Cross-lingual paraphrase pairs (the modular paper's CLA-pp data) from multi-parallel rows.

    For every pair id that LANG (``pairs``) and the pivot (``pivot_rows``, by pair id) both have,
    two pairs, one per direction of the paraphrase: (pivot anchor, LANG positive, LANG negative) and
    (pivot positive, LANG anchor, None); the second has no hard negative, because the row's
    negative contradicts its anchor, not its positive. Returned as (pivot text, LANG text, LANG
    negative or None), in the order of ``pairs``.
    """
    out: list[tuple[str, str, str | None]] = []
    for pair in pairs:
        pivot = pivot_rows.get(pair.pair_id)
        if pivot is None:
            continue
        out.append((pivot.anchor, pair.positive, pair.negative))
        out.append((pivot.positive, pair.anchor, None))
    return out


def _held_out(pairs: list[tuple[str, str]], size: int) -> set[tuple[str, str]]:
    """``size`` distinct pairs chosen by a hash of their pivot sentence: stable across runs and
    independent of the order or number of files."""
    if size <= 0:
        return set()
    unique = sorted(set(pairs), key=lambda p: (hashlib.sha256(p[0].encode("utf-8")).hexdigest(), p))
    return set(unique[:size])


def _substitute(spec: Any, lang: str) -> Any:
    if isinstance(spec, str):
        return spec.replace("{lang}", lang)
    if isinstance(spec, dict):
        return {k: _substitute(v, lang) for k, v in spec.items()}
    if isinstance(spec, list):
        return [_substitute(v, lang) for v in spec]
    return spec


def _records(specs: list[Any], counts: list[int]) -> list[dict[str, Any]]:
    out = []
    for spec, count in zip(specs, counts):
        path = spec.get("path") if isinstance(spec, dict) else spec
        record = file_record(Path(path)) if path is not None and Path(path).is_file() else {"spec": str(spec)}
        if isinstance(spec, dict):
            record["column"] = spec.get("column")
            if spec.get("rows") is not None:
                record["rows"] = list(spec["rows"])
        record["count"] = count
        out.append(record)
    return out


def _resolve_specs(
    data_cfg: DataConfig, own: DataFiles, key: str, lang: str, recipe_path: str | None, data_dir: Any = None
) -> list[Any]:
    """The specs of one kind (``key``) for LANG: the section's and its ``per_language`` ones,
    ``{lang}`` substituted and paths resolved (``data_dir``: see ``resolve_data_spec``)."""
    specs = []
    for spec in _substitute(getattr(data_cfg, key) + getattr(own, key), lang):
        if key == "mono" and isinstance(spec, str) and spec.endswith(".tsv"):
            spec = {"path": spec, "column": lang}  # a parallel/paraphrase TSV: its LANG column
        if isinstance(spec, dict) and "path" in spec:
            spec = {**spec, "path": resolve_data_spec(spec["path"], recipe_path, data_dir)}
        else:
            spec = resolve_data_spec(spec, recipe_path, data_dir)
        specs.append(spec)
    return specs


def _has_column(spec: Any, lang: str) -> bool:
    """False only for a TSV spec read by column whose header has no ``lang`` column."""
    if not (isinstance(spec, dict) and spec.get("column") == lang and Path(spec.get("path", "")).is_file()):
        return True
    with open(spec["path"], encoding="utf-8-sig") as handle:
        return lang in handle.readline().rstrip("\r\n").split("\t")


def _load_paraphrase_files(
    specs: list[Any], lang: str, pivot: str
) -> tuple[list[ParaphrasePair], list[ParaphrasePair], dict[str, ParaphrasePair], list[int]]:
    """From the paraphrase files: LANG's pairs, the other languages' pairs, the pivot's rows by
    pair id, and LANG's pair count per file."""
    para_counts, pivot_rows = [], {}
    all_pairs: list[ParaphrasePair] = []
    others: list[ParaphrasePair] = []
    for spec in specs:
        rows = load_paraphrases(spec)
        mine = [p for p in rows if p.lang == lang]
        para_counts.append(len(mine))
        all_pairs.extend(mine)
        # Transfer pairs come only from files that hold LANG: languages published side by side
        # with it (Kardeş XNLI: uz kk az ky ug), not every language of every file listed.
        if mine:
            others.extend(p for p in rows if p.lang != lang)
        pivot_rows.update({p.pair_id: p for p in rows if p.lang == pivot})
    return all_pairs, others, pivot_rows, para_counts


def _load_mono_sentences(specs: list[Any], lang: str, shared: int) -> tuple[list[str], list[int]]:
    """LANG's monolingual sentences and the count per file. The first ``shared`` specs are the
    section's list for every language: a TSV among them without LANG's column gives nothing."""
    sentences: list[str] = []
    counts = []
    for position, spec in enumerate(specs):
        if position < shared and not _has_column(spec, lang):
            counts.append(0)
            continue
        loaded = load_monolingual(spec)
        counts.append(len(loaded))
        sentences.extend(loaded)
    return sentences, counts


def _load_parallel_pairs(
    specs: list[Any], lang: str, pivot: str, dev_texts: set[str], shared: int = 0
) -> tuple[list[tuple[str, str]], list[int]]:
    """(pivot sentence, LANG translation) pairs of the parallel files, without those whose LANG
    side is a dev paraphrase sentence, and the pair count per file. The first ``shared`` specs are
    the section's list for every language: one without both columns counts 0. The rest were
    listed for LANG alone and must have them."""
    par_counts = []
    parallel: list[tuple[str, str]] = []
    for position, spec in enumerate(specs):
        corpus = load_parallel(spec)
        if lang not in corpus.columns or pivot not in corpus.columns:
            if position < shared:
                par_counts.append(0)
                continue
            raise ValueError(
                f"{spec}: parallel data needs columns {pivot!r} and {lang!r}, has {corpus.languages}"
            )
        pairs = [
            (a, b)
            for a, b in zip(corpus.columns[pivot], corpus.columns[lang])
            if a and b and b not in dev_texts
        ]
        par_counts.append(len(pairs))
        parallel.extend(pairs)
    return parallel, par_counts


def load_language_data(
    lang: str,
    pivot: str,
    data_cfg: DataConfig | Mapping[str, Any],
    recipe_path: str | None,
    data_dir: str | os.PathLike | None = None,
) -> LanguageData:
    """LANG's data from a recipe's ``data`` section (a DataConfig, or its mapping); paths resolved
    as ``resolve_data_spec`` does (``../shared/data/`` from ``data_dir`` when given)."""
    if not isinstance(data_cfg, DataConfig):
        data_cfg = DataConfig.from_dict(data_cfg, "data")
    # ``data.per_language.LANG.KEY`` adds files for one language only (e.g. its own mono corpus).
    own = data_cfg.per_language.get(lang) or DataFiles()

    data = LanguageData(lang=lang, pivot=pivot)
    mono_specs = _resolve_specs(data_cfg, own, "mono", lang, recipe_path, data_dir)
    shared = len(mono_specs) - len(own.mono)  # the section's own list comes first
    data.mono, mono_counts = _load_mono_sentences(mono_specs, lang, shared)
    data.files["mono"] = _records(mono_specs, mono_counts)

    para_specs = _resolve_specs(data_cfg, own, "paraphrase", lang, recipe_path, data_dir)
    all_pairs, others, pivot_rows, para_counts = _load_paraphrase_files(para_specs, lang, pivot)
    data.files["paraphrase"] = _records(para_specs, para_counts)
    # Hold out the last pair ids (sorted, so the split is stable) for dev retrieval metrics.
    dev_size = data_cfg.dev_pairs
    dev_ids = set(sorted({p.pair_id for p in all_pairs})[-dev_size:]) if dev_size else set()
    train_pairs = [p for p in all_pairs if p.pair_id not in dev_ids]
    data.dev_paraphrases = [p for p in all_pairs if p.pair_id in dev_ids]
    if lang != pivot:
        data.dev_crosslingual = [
            (pivot_rows[p.pair_id].anchor, p.positive)
            for p in data.dev_paraphrases
            if p.pair_id in pivot_rows
        ]

    par_specs = []
    if lang != pivot:
        par_specs = _resolve_specs(data_cfg, own, "parallel", lang, recipe_path, data_dir)
    dev_texts = {p.anchor for p in data.dev_paraphrases} | {p.positive for p in data.dev_paraphrases}
    shared = len(par_specs) - len(own.parallel)  # the section's own list comes first
    parallel, par_counts = _load_parallel_pairs(par_specs, lang, pivot, dev_texts, shared=shared)
    dev_parallel = _held_out(parallel, data_cfg.dev_parallel)
    data.dev_parallel = sorted(dev_parallel)
    # A held-out translation's sentences leave every training set, paraphrases included (the same
    # sentences recur across files: Kardeş XNLI is both parallel data and paraphrases).
    held = {t for pair in dev_parallel for t in pair}
    data.parallel = [p for p in parallel if p not in dev_parallel and p[0] not in held and p[1] not in held]
    data.paraphrases = [p for p in train_pairs if p.anchor not in held and p.positive not in held]
    # A held-out pair's translations leave the other languages' pairs too: same pair id, or a
    # pivot row (of the same id) that holds a held-out sentence.
    held_ids = dev_ids | {i for i, p in pivot_rows.items() if p.anchor in held or p.positive in held}
    data.other_paraphrases = [
        p for p in others if p.pair_id not in held_ids and p.anchor not in held and p.positive not in held
    ]
    if lang != pivot:
        data.crosslingual = [
            c for c in crosslingual_pairs(train_pairs, pivot_rows) if c[0] not in held and c[1] not in held
        ]
    data.files["parallel"] = _records(par_specs, par_counts)
    return data

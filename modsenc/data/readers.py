"""Readers for the three kinds of training text: multi-parallel tables, paraphrase triples, plain text.

Every reader validates as it goes and raises :class:`DataFormatError` naming the file and line,
because a silently skipped or misaligned row in a parallel corpus corrupts training without any
visible symptom. The line and table reading they share is ``modsenc.data.lines`` (its public
helpers are importable from here too); Hugging Face datasets are ``modsenc.data.hf_parallel``, and
a recipe's data entries (a path or a dict) are dispatched to these readers by ``modsenc.data.specs``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from modsenc.data.errors import DataFormatError
from modsenc.data.lines import check_file, count_lines, decode_line, iter_lines, no_rows_error, read_table
from modsenc.data.splits import rows_in

__all__ = [
    "PARAPHRASE_COLUMNS",
    "ParallelCorpus",
    "ParaphrasePair",
    "TranslationPair",
    "english_centric_pairs",
    "check_file",
    "count_lines",
    "decode_line",
    "base_language",
    "is_language_code",
    "iter_lines",
    "no_rows_error",
    "read_monolingual",
    "read_parallel_tsv",
    "read_paraphrase_tsv",
    "read_table",
]

PathLike = str | os.PathLike
PARAPHRASE_COLUMNS: tuple[str, ...] = ("pair_id", "lang", "anchor", "positive", "negative")

# ISO 639-1 (two letters) or, for the many languages without one, ISO 639-3 (three), optionally
# with an ISO 15924 script subtag for a language written in two scripts ("uz-Cyrl", "kaa-Latn").
# Codes name zoo folders, so nothing path-like can pass.
_CODE = re.compile(r"[a-z]{2,3}(-[A-Z][a-z]{3})?")
_CODE_HINT = (
    "a language code: ISO 639-1 or 639-3 in lowercase ASCII ('en', 'uz', 'kaa'), optionally with a "
    "script subtag ('uz-Cyrl')"
)


def is_language_code(code: str) -> bool:
    """True for an ISO 639-1 or 639-3 code, optionally with a script subtag (``uz``, ``kaa``,
    ``uz-Cyrl``); the project keys everything by these."""
    return isinstance(code, str) and _CODE.fullmatch(code) is not None


def check_language_code(code: str) -> str:
    """Codes name folders in the zoo, so only ISO 639-1/639-3 codes with an optional script subtag
    pass (``uz``, ``kaa``, ``uz-Cyrl``; nothing path-like)."""
    if not is_language_code(code):
        raise ValueError(
            f"invalid language code {code!r}: expected an ISO 639-1 or 639-3 code such as 'uz' or "
            "'kaa', optionally with a script subtag such as 'uz-Cyrl'"
        )
    return code


def base_language(code: str) -> str:
    """The language of a code without its script subtag: ``uz-Cyrl`` -> ``uz``."""
    return code.split("-", 1)[0]


# --------------------------------------------------------------------------------------------------
# data classes


@dataclass
class ParallelCorpus:
    """Aligned sentences: ``columns[lang][i]`` are translations of each other for every ``lang``.

    An empty string is a missing translation; rows are kept so that row ``i`` still means the
    same sentence in every language (and the same line of the source file, minus the header).
    """

    path: str
    columns: dict[str, list[str]]

    def __post_init__(self) -> None:
        lengths = {lang: len(texts) for lang, texts in self.columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{self.path}: columns of a parallel corpus differ in length: {lengths}")

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def languages(self) -> list[str]:
        return list(self.columns)


@dataclass(frozen=True)
class ParaphrasePair:
    """An (anchor, positive[, hard negative]) triple in one language; ``pair_id`` links translations."""

    pair_id: str
    lang: str
    anchor: str
    positive: str
    negative: str | None = None


@dataclass(frozen=True)
class TranslationPair:
    """One MEXMA training example: a pivot-language sentence and its translation.

    Frozen (hashable) so pairs can be deduplicated with a set.
    """

    lang_a: str
    text_a: str
    lang_b: str
    text_b: str


# --------------------------------------------------------------------------------------------------
# arguments


def check_languages_arg(languages: Sequence[str] | None) -> list[str] | None:
    # A bare string is a Sequence[str] too, and "en" would silently become ["e", "n"].
    if languages is None:
        return None
    if isinstance(languages, str):
        raise TypeError(
            f"languages must be a list of codes such as ['{languages}'], not the string {languages!r}"
        )
    return list(dict.fromkeys(languages))


def _check_header_codes(path: PathLike, header_line: int, header: list[str]) -> None:
    seen: dict[str, int] = {}
    for column, name in enumerate(header, start=1):
        if not is_language_code(name):
            hint = ""
            if set(PARAPHRASE_COLUMNS) <= set(header):
                hint = "; this looks like a paraphrase file: read it with read_paraphrase_tsv"
            elif name.lower() != name and is_language_code(name.lower()):
                hint = f"; write it in lowercase ({name.lower()!r})"
            raise DataFormatError(
                path, header_line, f"header column {column} is {name!r}, which is not {_CODE_HINT}{hint}"
            )
        if name in seen:
            raise DataFormatError(
                path,
                header_line,
                f"language {name!r} appears twice in the header (columns {seen[name]} and {column})",
            )
        seen[name] = column


# --------------------------------------------------------------------------------------------------
# file readers


def read_parallel_tsv(path: PathLike, languages: Sequence[str] | None = None) -> ParallelCorpus:
    """Read a multi-parallel TSV: a header of language codes, then one sentence per column.

    ``languages`` keeps only those columns (in that order); asking for a language the file does
    not have is an error rather than an empty column, since it is almost always a typo or the
    wrong file.
    """
    wanted = check_languages_arg(languages)
    header_line, header, rows = read_table(path)
    _check_header_codes(path, header_line, header)
    if wanted is not None:
        missing = [lang for lang in wanted if lang not in header]
        if missing:
            raise DataFormatError(
                path,
                None,
                f"no column for language(s) {', '.join(missing)}; available: {' '.join(header)}",
            )
    keep = wanted if wanted is not None else header
    positions = [header.index(lang) for lang in keep]
    columns: dict[str, list[str]] = {lang: [] for lang in keep}
    targets = [columns[lang] for lang in keep]
    for lineno, fields in rows:
        if not any(fields):
            raise DataFormatError(path, lineno, "every cell of the row is empty; remove the row")
        for target, position in zip(targets, positions):
            target.append(fields[position])
    if not targets[0]:
        raise no_rows_error(path)
    return ParallelCorpus(path=os.fspath(path), columns=columns)


def read_paraphrase_tsv(path: PathLike, languages: Sequence[str] | None = None) -> list[ParaphrasePair]:
    """Read ``pair_id lang anchor positive negative`` rows (extra columns are ignored).

    An empty ``negative`` becomes None (no hard negative for that pair); an empty anchor or
    positive is an error because the pair would train the model towards an empty string.
    """
    wanted = check_languages_arg(languages)
    header_line, header, rows = read_table(path)
    for name in PARAPHRASE_COLUMNS:
        if name not in header:
            raise DataFormatError(
                path,
                None,
                f"header has no column {name!r} (required: {' '.join(PARAPHRASE_COLUMNS)}; "
                f"found: {' '.join(header)})",
            )
        if header.count(name) > 1:
            raise DataFormatError(path, header_line, f"column {name!r} appears more than once in the header")
    i_id, i_lang, i_anchor, i_pos, i_neg = (header.index(name) for name in PARAPHRASE_COLUMNS)
    pairs: list[ParaphrasePair] = []
    seen_langs: set[str] = set()
    n_rows = 0
    for lineno, fields in rows:
        n_rows += 1
        lang = fields[i_lang]
        if not is_language_code(lang):
            raise DataFormatError(path, lineno, f"lang is {lang!r}, which is not {_CODE_HINT}")
        for column, index in (("pair_id", i_id), ("anchor", i_anchor), ("positive", i_pos)):
            if not fields[index]:
                raise DataFormatError(
                    path, lineno, f"empty {column}; every row needs a pair_id, anchor and positive"
                )
        seen_langs.add(lang)
        if wanted is not None and lang not in wanted:
            continue
        pairs.append(
            ParaphrasePair(fields[i_id], lang, fields[i_anchor], fields[i_pos], fields[i_neg] or None)
        )
    if n_rows == 0:
        raise no_rows_error(path)
    if wanted is not None:
        missing = [lang for lang in wanted if lang not in seen_langs]
        if missing:
            raise DataFormatError(
                path,
                None,
                f"no rows for language(s) {', '.join(missing)}; available: {' '.join(sorted(seen_langs))}",
            )
    return pairs


def read_monolingual(path: PathLike) -> list[str]:
    """Read plain text, one sentence per line; blank lines are separators, not sentences."""
    sentences = [text.strip() for _lineno, text in iter_lines(path) if text.strip()]
    if not sentences:
        raise DataFormatError(path, None, "empty file: expected one sentence per line")
    return sentences


# --------------------------------------------------------------------------------------------------
# translation pairs


def english_centric_pairs(
    corpus: ParallelCorpus | Sequence[ParallelCorpus],
    pivot: str = "en",
    languages: Sequence[str] | None = None,
) -> list[TranslationPair]:
    """(pivot sentence, translation) pairs for MEXMA, in file, row, then column order.

    MEXMA aligns every language to the pivot, so non-pivot columns are never paired with each
    other. Exact repeats of (lang_b, text_a, text_b) are dropped (first kept) because corpora
    overlap (e.g. NTREX and newstest2019 share their English) and a repeated pair would only
    be over-weighted, not add information.
    """
    corpora = [corpus] if isinstance(corpus, ParallelCorpus) else list(corpus)
    wanted = check_languages_arg(languages)
    if wanted is not None:
        wanted = [lang for lang in wanted if lang != pivot]
        available = {lang for c in corpora for lang in c.languages}
        missing = [lang for lang in wanted if lang not in available]
        if missing:
            raise ValueError(
                f"no corpus has language(s) {', '.join(missing)}; available: {' '.join(sorted(available))}"
            )
    pairs: list[TranslationPair] = []
    seen: set[tuple[str, str, str]] = set()
    for c in corpora:
        if pivot not in c.columns:
            raise DataFormatError(
                c.path, None, f"no {pivot!r} (pivot) column; available: {' '.join(c.languages)}"
            )
        pivot_texts = c.columns[pivot]
        others = [lang for lang in c.languages if lang != pivot and (wanted is None or lang in wanted)]
        for row, text_a in enumerate(pivot_texts):
            if not text_a:
                continue
            for lang in others:
                text_b = c.columns[lang][row]
                key = (lang, text_a, text_b)
                if not text_b or key in seen:
                    continue
                seen.add(key)
                pairs.append(TranslationPair(pivot, text_a, lang, text_b))
    return pairs


def select_split(corpus: ParallelCorpus, part: str, languages: Sequence[str] | None = None) -> ParallelCorpus:
    """The rows of ``corpus`` in ``part`` (``selection`` or ``report``: modsenc.data.splits), grouped
    over all its columns so that no translation crosses the split; then ``languages``' columns."""
    keep = rows_in(list(zip(*corpus.columns.values())), part)
    if languages is not None:
        missing = [lang for lang in languages if lang not in corpus.columns]
        if missing:
            raise DataFormatError(
                corpus.path,
                None,
                f"has no column(s) {', '.join(missing)}; its columns: {' '.join(corpus.columns)}",
            )
    wanted = list(languages) if languages is not None else list(corpus.columns)
    columns = {lang: [corpus.columns[lang][i] for i in keep] for lang in wanted}
    return ParallelCorpus(f"{corpus.path}[{part}]", columns)


def select_rows(corpus: ParallelCorpus, rows: Sequence[int | None]) -> ParallelCorpus:
    """Rows ``[start, stop)`` of a corpus (Python slice semantics, ``None`` for an open end): a
    recipe keeps part of a file for training and the rest for evaluation, e.g. ``rows: [0, 240]``."""
    if (
        not isinstance(rows, Sequence)
        or isinstance(rows, str)
        or len(rows) != 2
        or not all(r is None or (isinstance(r, int) and not isinstance(r, bool)) for r in rows)
    ):
        raise ValueError(f"{corpus.path}: rows must be [start, stop] (integers or null), got {rows!r}")
    # Python's slicing would read -5 from the end and cut 1000 to the end without a word
    if any(r is not None and r < 0 for r in rows):
        raise ValueError(
            f"{corpus.path}: rows {list(rows)} must be row numbers from 0 (the first row after the "
            "header; null for an open end), not counted from the end"
        )
    if rows[0] is not None and rows[0] >= len(corpus):
        raise ValueError(f"{corpus.path}: rows {list(rows)} select none of its {len(corpus)} rows")
    if rows[1] is not None and rows[1] > len(corpus):
        raise ValueError(f"{corpus.path}: rows {list(rows)} go past its {len(corpus)} rows")
    picked = slice(*rows)
    columns = {lang: texts[picked] for lang, texts in corpus.columns.items()}
    if not next(iter(columns.values()), []):
        raise ValueError(f"{corpus.path}: rows {list(rows)} select none of its {len(corpus)} rows")
    return ParallelCorpus(f"{corpus.path}[{rows[0]}:{rows[1]}]", columns)

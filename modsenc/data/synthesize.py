"""Machine-translated paraphrase data, as *Modular Sentence Encoders* made theirs (§4.2): English
paraphrase pairs translated into each target language with a seq2seq MT model (NLLB-200 3.3B in
the paper), both sides of every pair, dropping translations that are empty, copied from the source
when the scripts differ, degenerate (repetition) or of an implausible length.

The output is the multi-parallel paraphrase TSV that ``add-language --paraphrase`` reads
(``pair_id lang anchor positive negative``): the English rows kept, and each language's row under
the same ``pair_id``. Translations go through a cache (JSONL, one line per sentence, keyed by model,
target language and source text, appended and fsynced after every batch), so a sentence is
translated once, and a killed run resumes where its last batch ended. The TSV and a report of what
was dropped are written atomically at the end.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from modsenc.data.readers import ParaphrasePair, read_paraphrase_tsv
from modsenc.utils.hub import check_model_source, load_tokenizer
from modsenc.utils.io import atomic_write_json, atomic_write_text, fsync_dir

log = logging.getLogger(__name__)

# ISO 639-1 (or 639-3 where there is no 639-1 code) -> FLORES-200, the codes NLLB's tokenizer knows.
FLORES_200 = {
    "en": "eng_Latn", "uz": "uzn_Latn", "kk": "kaz_Cyrl", "az": "azj_Latn", "tr": "tur_Latn",
    "ky": "kir_Cyrl", "ug": "uig_Arab", "tk": "tuk_Latn", "tt": "tat_Cyrl", "ba": "bak_Cyrl",
    "de": "deu_Latn", "fr": "fra_Latn", "es": "spa_Latn", "it": "ita_Latn", "pt": "por_Latn",
    "nl": "nld_Latn", "pl": "pol_Latn", "ru": "rus_Cyrl", "uk": "ukr_Cyrl", "ar": "arb_Arab",
    "fa": "pes_Arab", "hi": "hin_Deva", "bn": "ben_Beng", "ur": "urd_Arab", "zh": "zho_Hans",
    "ja": "jpn_Jpan", "ko": "kor_Hang", "fi": "fin_Latn", "et": "est_Latn", "hu": "hun_Latn",
    "el": "ell_Grek", "he": "heb_Hebr", "ka": "kat_Geor", "hy": "hyd_Armn", "mn": "khk_Cyrl",
    "tg": "tgk_Cyrl", "sw": "swh_Latn", "id": "ind_Latn", "vi": "vie_Latn", "th": "tha_Thai",
}  # fmt: skip
# ISO 639-1 -> 639-3, for multi-target Marian (OPUS-MT) models whose target token is >>xxx<<.
ISO_639_3 = {
    "uz": "uzb", "kk": "kaz", "az": "aze", "tr": "tur", "ky": "kir", "ug": "uig", "tk": "tuk",
    "tt": "tat", "ba": "bak", "de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "en": "eng",
}  # fmt: skip

TSV_COLUMNS = ("pair_id", "lang", "anchor", "positive", "negative")
DROP_REASONS = ("empty", "copy", "repetition", "length_ratio")


class Translator(Protocol):
    """What synthesis needs of an MT model: a name (the cache key) and batch translation."""

    name: str

    def translate(self, texts: Sequence[str], lang: str) -> list[str]: ...


def flores_code(lang: str) -> str:
    """The FLORES-200 code of an ISO code, or the argument itself when it already is one."""
    if re.fullmatch(r"[a-z]{3}_[A-Z][a-z]{3}", lang):
        return lang
    if lang not in FLORES_200:
        raise ValueError(
            f"--lang {lang}: no FLORES-200 code known for it; pass the code itself (e.g. uzn_Latn)"
        )
    return FLORES_200[lang]


def target_script(lang: str) -> str | None:
    """The ISO 15924 script a language is written in by FLORES-200 (Latn, Cyrl, Arab, ...)."""
    try:
        return flores_code(lang).split("_")[1]
    except ValueError:
        return None


# A run of 1-4 words repeated at least four times in a row, or one character eleven times or more:
# the loops a decoder falls into.
_REPEATED_WORDS = re.compile(r"(\b\w+(?:\W+\w+){0,3})(?:\W+\1\b){3,}", re.UNICODE)
_REPEATED_CHAR = re.compile(r"(\S)\1{10,}")


@dataclass
class Filters:
    min_length_ratio: float = 0.4  # translation length / source length, in characters
    max_length_ratio: float = 2.5

    def __post_init__(self) -> None:
        if not 0 < self.min_length_ratio < self.max_length_ratio:
            raise ValueError(
                f"length ratio range must satisfy 0 < min < max, got "
                f"[{self.min_length_ratio}, {self.max_length_ratio}]"
            )

    def reason(self, source: str, translation: str | None, lang: str, source_lang: str = "en") -> str | None:
        """Why a translation into ``lang`` is dropped (one of DROP_REASONS), or None to keep it."""
        if translation is None or not translation.strip():
            return "empty"
        if translation.strip() == source.strip():
            # A copy is a failed translation where the target writes another script; between two
            # Latin-script languages a name or a number may legitimately stay as it is.
            scripts = target_script(lang), target_script(source_lang)
            if None not in scripts and scripts[0] != scripts[1]:
                return "copy"
        if _REPEATED_WORDS.search(translation) and not _REPEATED_WORDS.search(source):
            return "repetition"
        if _REPEATED_CHAR.search(translation) and not _REPEATED_CHAR.search(source):
            return "repetition"
        ratio = len(translation) / max(len(source), 1)
        if not self.min_length_ratio <= ratio <= self.max_length_ratio:
            return "length_ratio"
        return None


@dataclass
class LanguageReport:
    pairs_in: int = 0
    pairs_kept: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROP_REASONS, 0))
    negatives_dropped: int = 0  # a failed hard negative leaves the pair without one
    translated: int = 0  # sentences sent to the model in this run
    from_cache: int = 0


class TranslationCache:
    """Translations on disk, one JSON line per sentence: {"model", "lang", "source", "text"}.

    A batch is appended with one write and fsynced; a line cut short by a kill is ignored on load
    (and the next append starts on a fresh line), so the file is always usable."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.entries: dict[tuple[str, str, str], str] = {}
        if self.path.exists():
            with self.path.open(encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    try:
                        row = json.loads(line)
                        self.entries[(row["model"], row["lang"], row["source"])] = row["text"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        log.warning(
                            "%s:%d: unreadable cache line skipped (an interrupted write)", self.path, lineno
                        )

    def get(self, model: str, lang: str, source: str) -> str | None:
        return self.entries.get((model, lang, source))

    def add(self, model: str, lang: str, sources: Sequence[str], texts: Sequence[str]) -> None:
        lines = "".join(
            json.dumps({"model": model, "lang": lang, "source": s, "text": t}, ensure_ascii=False) + "\n"
            for s, t in zip(sources, texts, strict=True)
        )
        new = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")  # close a line a kill cut short; the loader skips it
            f.write(lines.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if new:
            fsync_dir(self.path.parent)
        for s, t in zip(sources, texts):
            self.entries[(model, lang, s)] = t


def english_pairs(pairs: Iterable[ParaphrasePair], max_pairs: int | None = None) -> list[ParaphrasePair]:
    """The English pairs, one per pair_id, in file order, the first ``max_pairs`` of them."""
    out, seen = [], set()
    for p in pairs:
        if p.lang == "en" and p.pair_id not in seen:
            seen.add(p.pair_id)
            out.append(p)
            if max_pairs is not None and len(out) >= max_pairs:
                break
    return out


def load_source(
    source: str, split: str = "train", columns: Sequence[str] = ("anchor", "positive", "negative")
) -> list[ParaphrasePair]:
    """English paraphrase pairs from a paraphrase TSV, or from a Hugging Face dataset (a hub name or a
    ``save_to_disk`` folder) whose ``columns`` hold anchor, positive and optionally a negative."""
    path = Path(source)
    if path.is_file():
        return read_paraphrase_tsv(path, languages=["en"])
    import datasets  # noqa: PLC0415  (only this path needs it)

    dataset = datasets.load_from_disk(source) if path.is_dir() else datasets.load_dataset(source)
    if isinstance(dataset, datasets.DatasetDict):
        if split not in dataset:
            raise ValueError(f"{source}: no split {split!r} (has: {', '.join(dataset)}); pass --split")
        dataset = dataset[split]
    if len(columns) not in (2, 3):
        raise ValueError(f"--columns: two or three column names (anchor,positive[,negative]), got {columns}")
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise ValueError(
            f"{source}: no column {', '.join(missing)} "
            f"(has: {', '.join(dataset.column_names)}); pass --columns"
        )
    name = path.name if path.is_dir() else source.replace("/", "-")
    pairs = []
    for i, row in enumerate(dataset):
        anchor, positive = str(row[columns[0]] or ""), str(row[columns[1]] or "")
        negative = str(row[columns[2]] or "") if len(columns) == 3 else ""
        if anchor.strip() and positive.strip():
            pairs.append(ParaphrasePair(f"{name}-{i}", "en", anchor, positive, negative or None))
    return pairs


def _clean(text: str) -> str:
    """One TSV cell: tabs and line breaks inside a translation become spaces."""
    return re.sub(r"[\t\r\n]+", " ", text).strip()


def synthesize(
    pairs: Sequence[ParaphrasePair],
    languages: Sequence[str],
    translator: Translator,
    output: str | os.PathLike,
    cache_path: str | os.PathLike | None = None,
    batch_size: int = 32,
    filters: Filters | None = None,
    progress: bool = True,
    on_estimate: Callable[[float, int], None] | None = None,
) -> dict[str, LanguageReport]:
    """Translate English ``pairs`` into ``languages`` and write the multi-parallel paraphrase TSV.

    Sentences are translated in batches sorted by length (less padding), once per language
    whatever the number of pairs they occur in. After the first batch, ``on_estimate(seconds,
    sentences)`` gets the projected time for the rest (default: logged). Returns per-language counts
    (also written next to the TSV as ``<output>.report.json``)."""
    from tqdm.auto import tqdm  # noqa: PLC0415

    filters = filters or Filters()
    output = Path(output)
    cache = TranslationCache(cache_path or output.with_name(output.name + ".cache.jsonl"))
    if not pairs:
        raise ValueError("no English pairs to translate (rows with lang 'en')")
    sentences = sorted(
        {s for p in pairs for s in (p.anchor, p.positive, p.negative) if s}, key=lambda s: (len(s), s)
    )
    reports = {lang: LanguageReport(pairs_in=len(pairs)) for lang in languages}
    todo = [
        (lang, [s for s in sentences if cache.get(translator.name, lang, s) is None]) for lang in languages
    ]
    total = sum(len(pending) for _, pending in todo)
    for lang, pending in todo:
        reports[lang].from_cache = len(sentences) - len(pending)
    done, started = 0, time.perf_counter()
    with tqdm(total=total, unit="sent", desc="translate", disable=not progress or total == 0) as bar:
        for lang, pending in todo:
            for start in range(0, len(pending), batch_size):
                batch = pending[start : start + batch_size]
                _translate_batch(translator, cache, batch, lang)
                reports[lang].translated += len(batch)
                done += len(batch)
                bar.update(len(batch))
                if done == len(batch) and total > done:
                    # Batches are sorted by length, so the first is among the shortest: the estimate
                    # is a lower bound on CPU, roughly right on a GPU where batches are latency-bound.
                    rest = (time.perf_counter() - started) / done * (total - done)
                    (on_estimate or _log_estimate)(rest, total - done)

    rows = []
    for p in pairs:
        rows.append((p.pair_id, "en", _clean(p.anchor), _clean(p.positive), _clean(p.negative or "")))
    for lang in languages:
        rows.extend(_language_rows(pairs, lang, translator.name, cache, filters, reports[lang]))
    _write_outputs(output, rows, translator.name, reports)
    return reports


def _translate_batch(translator: Translator, cache: TranslationCache, batch: list[str], lang: str) -> None:
    """Translate one batch into ``lang`` and append the cleaned translations to the cache."""
    texts = translator.translate(batch, lang)
    if len(texts) != len(batch):
        raise RuntimeError(f"the translator returned {len(texts)} texts for {len(batch)} sentences")
    cache.add(translator.name, lang, batch, [_clean(t) for t in texts])


def _language_rows(
    pairs: Sequence[ParaphrasePair],
    lang: str,
    model: str,
    cache: TranslationCache,
    filters: Filters,
    report: LanguageReport,
) -> list[tuple[str, str, str, str, str]]:
    """``lang``'s TSV rows: each pair whose anchor and positive translations pass ``filters``, with
    its negative where that one passes too; what is dropped is counted in ``report``."""
    rows = []
    for p in pairs:
        sides = {k: cache.get(model, lang, s) for k, s in (("anchor", p.anchor), ("positive", p.positive))}
        reason = next(
            (
                r
                for k, s in (("anchor", p.anchor), ("positive", p.positive))
                if (r := filters.reason(s, sides[k], lang))
            ),
            None,
        )
        if reason:
            report.dropped[reason] += 1
            continue
        negative = ""
        if p.negative:
            candidate = cache.get(model, lang, p.negative)
            if filters.reason(p.negative, candidate, lang):
                report.negatives_dropped += 1
            else:
                negative = candidate
        rows.append((p.pair_id, lang, sides["anchor"], sides["positive"], negative))
        report.pairs_kept += 1
    return rows


def _write_outputs(
    output: Path, rows: list[tuple[str, ...]], model: str, reports: dict[str, LanguageReport]
) -> None:
    """Write the TSV and its ``.report.json`` beside it, each atomically."""
    text = "\t".join(TSV_COLUMNS) + "\n" + "".join("\t".join(r) + "\n" for r in rows)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(output, text)
    atomic_write_json(
        output.with_name(output.name + ".report.json"),
        {"model": model, "languages": {lang: vars(r) for lang, r in reports.items()}},
    )


def _log_estimate(seconds: float, sentences: int) -> None:
    log.info(
        "about %.0f s (%.1f min) left for %d sentences, from the first batch",
        seconds,
        seconds / 60,
        sentences,
    )


class HFTranslator:
    """A Hugging Face seq2seq MT model: NLLB-200 (FLORES-200 codes), M2M100 / SMaLL-100 (ISO codes),
    or Marian / OPUS-MT (one target, or several chosen by a >>xxx<< token). bf16 on a GPU."""

    def __init__(
        self,
        model: str,
        device: str = "auto",
        max_length: int = 256,
        num_beams: int = 4,
        source_lang: str = "en",
    ) -> None:
        import torch  # noqa: PLC0415
        from transformers import AutoModelForSeq2SeqLM  # noqa: PLC0415

        from modsenc.utils.devices import check_device  # noqa: PLC0415 - torch loads on first use

        self.name = model
        # Both checked before anything loads: a wrong device or model name is one line, at once
        # (a mistyped hub name would otherwise cost a minute of retries and end in a traceback).
        self.device = str(check_device(device))
        check_model_source(model)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = load_tokenizer(model)
        self.model = AutoModelForSeq2SeqLM.from_pretrained(model, dtype=dtype).to(self.device).eval()
        # Neither the source nor the output may outgrow the model's position table.
        positions = getattr(self.model.config, "max_position_embeddings", None) or max_length
        self.max_length, self.num_beams = min(max_length, positions), num_beams
        self.kind = self.model.config.model_type
        if self.kind == "m2m_100" and not hasattr(self.tokenizer, "get_lang_id"):
            self.kind = "nllb"  # NLLB is an M2M100 architecture with FLORES-200 language tokens
        if self.kind == "nllb":
            self.tokenizer.src_lang = flores_code(source_lang)
        elif self.kind == "m2m_100":
            self.tokenizer.src_lang = source_lang

    def _target(self, lang: str) -> tuple[str, dict[str, Any]]:
        """(prefix for the source text, generate() arguments) that select target language ``lang``."""
        if self.kind == "nllb":
            return "", {"forced_bos_token_id": self.tokenizer.convert_tokens_to_ids(flores_code(lang))}
        if self.kind == "m2m_100":
            return "", {"forced_bos_token_id": self.tokenizer.get_lang_id(lang)}
        codes = getattr(self.tokenizer, "supported_language_codes", None) or []
        if not codes:
            return "", {}  # a single-target Marian model: the user picked the model for the language
        iso3 = ISO_639_3.get(lang, lang)
        match = [c for c in codes if c.strip("><").split("_")[0] in (lang, iso3)]
        if not match:
            raise ValueError(
                f"--lang {lang}: {self.name} has no target token for it (has: {' '.join(codes)})"
            )
        return match[0] + " ", {}

    def translate(self, texts: Sequence[str], lang: str) -> list[str]:
        import torch  # noqa: PLC0415

        prefix, kwargs = self._target(lang)
        inputs = self.tokenizer(
            [prefix + t for t in texts], return_tensors="pt", padding=True, truncation=True,
            max_length=self.max_length,
        ).to(self.device)  # fmt: skip
        with torch.inference_mode():
            generated = self.model.generate(
                **inputs, max_new_tokens=self.max_length, num_beams=self.num_beams, **kwargs
            )
        return self.tokenizer.batch_decode(generated, skip_special_tokens=True)

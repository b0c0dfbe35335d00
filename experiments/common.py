"""The helpers the experiments share, and those they share with the maintained benchmarks
(bench/common.py, imported from here).

The experiments run from the repository root as modules (``python -m experiments.x``); each
imports what it shares from this module, never from another experiment: the modules table's
languages, held-out files and zoo training (modules_table.py, precision_quality.py,
significance.py, default_mode.py) and the paired tests of significance.py (default_mode.py too).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import binomtest, bootstrap, spearmanr

from bench.common import (
    KARDES_TARGETS,
    MODSENC,
    Runner,
    kardes_sts_bitext,
    machine,
    read_tsv,
    replace_section,
    sts_score,
    sts_subset,
    write_tsv,
    xsim_score,
)
from modsenc.data.readers import ParallelCorpus
from modsenc.eval.bitext import xsim_correct
from modsenc.eval.runner import EncoderSet
from modsenc.eval.sts import row_cosines

__all__ = [
    "KARDES_TARGETS",
    "LANGS",
    "MODSENC",
    "Runner",
    "Scored",
    "bitext_columns",
    "heldout_files",
    "kardes_sts_bitext",
    "machine",
    "mcnemar",
    "read_tsv",
    "replace_section",
    "scored",
    "spearman_gap",
    "sts_score",
    "sts_subset",
    "train_zoo",
    "write_tsv",
    "xsim_score",
]

LANGS = ("uz", "kk", "az")  # the modules table's languages
Encode = Callable[[list[str]], np.ndarray]


# --------------------------------------------------------------------- the modules table's files
# Not bench/common.py's heldout: the bitext file's name and the --bitext order differ, and they are
# in the commands the results pages record.
def heldout_files(work: Path, data: Path) -> tuple[Path, list[str]]:
    """The held-out evaluation files: Kardeş STS dev's en/uz/kk/az rows, and the ``--bitext`` specs
    of NTREX-128 and the Kardeş bitext read off the STS file (both en, uz, kk, az)."""
    evaldata = work / "evaldata"
    evaldata.mkdir(parents=True, exist_ok=True)
    kardes = data / "eval-dev" / "sts" / "kardes-sts-dev.tsv"
    kbitext = kardes_sts_bitext(kardes, evaldata / "kardes-bitext.tsv")
    sts = sts_subset(kardes, evaldata / "kardes-sts-dev.en-uz-kk-az.tsv", ("en", *LANGS))
    langs = ", ".join(("en", *LANGS))
    bitexts = [f"{{path: {data / 'parallel' / 'ntrex.tsv'}, languages: [{langs}]}}"]
    bitexts += [f"{{path: {kbitext}, languages: [{langs}]}}"]
    return sts, bitexts


def train_zoo(run, work: Path, backbone: Path, zoo: Path) -> None:
    """The default recipe's modules for en (none: English is the backbone's) and each language."""
    for index, lang in enumerate(("en", *LANGS)):
        cmd = ["add-language", lang, "--recipe", "add-language-e5", "--zoo", str(zoo)]
        cmd += ["--work-dir", f"{zoo}-w-{lang}"] + (["--backbone", str(backbone)] if index == 0 else [])
        run("train", cmd, zoo / lang, work / "logs" / f"{zoo.name}-{lang}.log")


# ------------------------------------------------------------------- paired tests (significance)
def spearman_gap(
    model: np.ndarray, baseline: np.ndarray, gold: np.ndarray, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(difference, low, high): Spearman x100 of the model's cosines against gold minus the
    baseline's, with a 95% percentile bootstrap interval resampling the pairs for both at once."""

    def gap(a: np.ndarray, b: np.ndarray, g: np.ndarray) -> float:
        return 100 * (spearmanr(a, g).statistic - spearmanr(b, g).statistic)

    interval = bootstrap(
        (model, baseline, gold),
        gap,
        paired=True,
        vectorized=False,
        n_resamples=resamples,
        method="percentile",
        random_state=np.random.default_rng(seed),
    ).confidence_interval
    return gap(model, baseline, gold), float(interval.low), float(interval.high)


def mcnemar(model_correct: np.ndarray, baseline_correct: np.ndarray) -> tuple[int, int, float]:
    """(only the model right, only the baseline right, exact two-sided McNemar p-value)."""
    only_model = int((model_correct & ~baseline_correct).sum())
    only_baseline = int((~model_correct & baseline_correct).sum())
    discordant = only_model + only_baseline
    p = binomtest(only_model, discordant, 0.5).pvalue if discordant else 1.0
    return only_model, only_baseline, float(p)


class Scored:
    """One model's per-item outcomes on the held-out files: STS cosines and mining correctness.
    Each (mode, language, sentences) is encoded once: the same English side serves every
    language and baseline."""

    def __init__(self, encode_mono: Callable[[str], Encode], encode_cross: Callable[[str], Encode]) -> None:
        self.encoders = {"mono": encode_mono, "cross": encode_cross}
        self._vectors: dict[tuple[str, str, tuple[str, ...]], np.ndarray] = {}

    def encode(self, mode: str, lang: str, texts: list[str]) -> np.ndarray:
        key = (mode, lang, tuple(texts))
        if key not in self._vectors:
            self._vectors[key] = np.asarray(self.encoders[mode](lang)(texts))
        return self._vectors[key]

    def sts_cosines(self, pairs: list, lang1: str, lang2: str) -> np.ndarray:
        mode = "mono" if lang1 == lang2 else "cross"
        left = self.encode(mode, lang1, [p.sentence1 for p in pairs])
        right = self.encode(mode, lang2, [p.sentence2 for p in pairs])
        return row_cosines(left, right)

    def mining(self, columns: dict[str, list[str]], src: str, tgt: str) -> np.ndarray:
        vectors = {lang: self.encode("cross", lang, columns[lang]) for lang in (src, tgt)}
        return xsim_correct(vectors[src], vectors[tgt], columns[tgt])


def scored(model: str) -> Scored:
    """A zoo (monolingual STS without its CLA) or a backbone folder, encoded in bf16 where native."""
    cross = EncoderSet(model)
    mono = EncoderSet(model, mode="mono") if cross.kind == "zoo" else cross
    return Scored(mono.for_language, cross.for_language)


def bitext_columns(corpus: ParallelCorpus, lang: str) -> dict[str, list[str]]:
    """The English and ``lang`` columns of the rows that have both."""
    rows = [i for i, (a, b) in enumerate(zip(corpus.columns["en"], corpus.columns[lang])) if a and b]
    return {code: [corpus.columns[code][i] for i in rows] for code in ("en", lang)}

"""Does a continued backbone beat the one it started from, alone (no modules)? Issue 53's table.

Every column of issue 53's *Done when*, on one part of the dev files (modsenc/data/splits.py:
``selection`` to choose a variant, ``report`` for the table, never the other way round):

* STS en-en (STS-B-mt dev): must stay within 0.3 of the start;
* per zoo language (uz kk az ky ug, Kardeş STS dev): STS xx-xx (at least the start's), STS en-xx,
  xsim both ways on the Kardeş bitext read off the STS file, and on NTREX-128 where it has the
  language (uz kk az): better than the start's;
* PUD xsim both ways for de fr es ru tr: no worse.

Significance as experiments/significance.py: a 95% paired bootstrap interval of each STS
difference, McNemar on the sentences only one model mines right. Backbones are encoded in fp32.

    python -m experiments.backbone_continuation --baseline runs/e5/backbone \\
        --backbone anchor10=runs/m53/anchor10/backbone --part selection
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from bench.common import NTREX_LANGS, kardes_sts_bitext, machine, sts_subset
from experiments.common import Scored, bitext_columns, mcnemar, spearman_gap
from modsenc.data.readers import read_parallel_tsv
from modsenc.data.specs import load_parallel
from modsenc.eval.runner import EncoderSet
from modsenc.eval.sts import read_sts_tsv

PARTS = ("selection", "report")
ZOO_LANGS = ("uz", "kk", "az", "ky", "ug")
PUD_LANGS = ("de", "fr", "es", "ru", "tr")


class DevSets:
    """One part's STS pairs and bitexts, by column family."""

    def __init__(self, data: Path, work: Path, part: str) -> None:
        work.mkdir(parents=True, exist_ok=True)
        stsb = data / "eval-dev" / "sts" / "stsb-mt-dev.tsv"
        kardes = data / "eval-dev" / "sts" / "kardes-sts-dev.tsv"
        self.english = read_sts_tsv(sts_subset(stsb, work / f"stsb-en-en.{part}.tsv", ("en",), part=part))
        self.kardes = read_sts_tsv(
            sts_subset(kardes, work / f"kardes-sts.{part}.tsv", ("en", *ZOO_LANGS), part=part)
        )
        bitext_file = kardes_sts_bitext(kardes, work / f"kardes-bitext.{part}.tsv", ZOO_LANGS, part=part)
        bitext = read_parallel_tsv(bitext_file)
        self.bitexts: dict[str, dict[str, list[str]]] = {}  # "Kardeş uz" -> {en: [...], uz: [...]}
        for lang in ZOO_LANGS:
            self.bitexts[f"Kardeş {lang}"] = bitext_columns(bitext, lang)
        ntrex, pud = data / "parallel" / "ntrex.tsv", data / "eval-dev" / "bitext" / "pud.tsv"
        for family, path, langs in (
            ("NTREX", ntrex, [lang for lang in ZOO_LANGS if lang in NTREX_LANGS]),
            ("PUD", pud, PUD_LANGS),
        ):
            for lang in langs:
                corpus = load_parallel({"path": str(path), "languages": ["en", lang], "split": part})
                self.bitexts[f"{family} {lang}"] = bitext_columns(corpus, lang)

    def sts_sets(self) -> dict[str, tuple[list, str, str]]:
        """Column name -> (pairs, lang1, lang2)."""
        sets: dict[str, tuple[list, str, str]] = {"STS en-en": (self.english, "en", "en")}
        for lang in ZOO_LANGS:
            for first in (lang, "en"):
                pairs = [p for p in self.kardes if (p.lang1, p.lang2) == (first, lang)]
                sets[f"STS {first}-{lang}"] = (pairs, first, lang)
        return sets


class Outcomes:
    """One backbone's per-item outcomes: STS cosines and, per mining direction, correctness."""

    def __init__(self, path: str, dev: DevSets) -> None:
        encoders = EncoderSet(path, dtype="fp32")  # a backbone: no modes, one encoder for both
        model = Scored(encoders.for_language, encoders.for_language)
        self.sts = {name: (model.sts_cosines(p, a, b), np.array([x.score for x in p]))
                    for name, (p, a, b) in dev.sts_sets().items()}  # fmt: skip
        self.mined = {}
        for name, columns in dev.bitexts.items():
            family, lang = name.split()
            for src, tgt in (("en", lang), (lang, "en")):
                self.mined[f"xsim {family} {src}-{tgt}"] = model.mining(columns, src, tgt)

    def values(self) -> dict[str, float]:
        out = {name: 100 * spearmanr(cos, gold).statistic for name, (cos, gold) in self.sts.items()}
        return out | {name: 100 * (1 - ok.mean()) for name, ok in self.mined.items()}


def compare(arm: Outcomes, base: Outcomes, resamples: int) -> dict[str, str]:
    """arm minus base per column: STS difference [95% interval]; mining, the change in errors and
    the McNemar p."""
    out = {}
    for name, (cosines, gold) in arm.sts.items():
        diff, low, high = spearman_gap(cosines, base.sts[name][0], gold, resamples)
        out[name] = f"{diff:+.1f} [{low:+.1f}, {high:+.1f}]"
    for name, correct in arm.mined.items():
        only_arm, only_base, p = mcnemar(correct, base.mined[name])
        out[name] = f"{only_base - only_arm:+d} errors (p {p:.2g})"
    return out


def criteria(arm: Outcomes, base: Outcomes) -> dict[str, bool]:
    """Issue 53's *Done when* for a backbone alone, one entry each (17 with every language): en-en
    STS within 0.3; per zoo language, mono STS at least the start's, en-xx STS above it, and
    fewer mining errors over its Kardeş and NTREX columns, both directions summed; PUD errors,
    every language both ways summed, no more. The selection rule (docs/results/objectives.md)
    counts the entries met."""
    ours, theirs = arm.values(), base.values()
    errors = {name: int((~ok).sum()) for name, ok in arm.mined.items()}
    base_errors = {name: int((~ok).sum()) for name, ok in base.mined.items()}

    def mined(predicate) -> tuple[int, int]:
        names = [name for name in errors if predicate(name)]
        return sum(errors[n] for n in names), sum(base_errors[n] for n in names)

    met = {"STS en-en within 0.3": bool(abs(ours["STS en-en"] - theirs["STS en-en"]) <= 0.3)}
    langs = [name.split("-")[1] for name in ours if name.startswith("STS en-") and name != "STS en-en"]
    for lang in langs:
        met[f"STS {lang}-{lang} >= start"] = bool(ours[f"STS {lang}-{lang}"] >= theirs[f"STS {lang}-{lang}"])
        met[f"STS en-{lang} > start"] = bool(ours[f"STS en-{lang}"] > theirs[f"STS en-{lang}"])
        now, before = mined(
            lambda n, lang=lang: not n.startswith("xsim PUD") and lang in n.split()[-1].split("-")
        )
        met[f"xsim {lang} fewer errors"] = now < before
    now, before = mined(lambda n: n.startswith("xsim PUD"))
    met["xsim PUD no more errors"] = now <= before
    return met


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", required=True, help="the starting backbone (e5 alone)")
    parser.add_argument("--backbone", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--part", choices=PARTS, required=True)
    parser.add_argument("--work", default="runs/backbone-continuation")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--json", help="also write every number here")
    args = parser.parse_args(argv)
    dev = DevSets(Path(args.data), Path(args.work) / "evaldata", args.part)
    arms = {item.partition("=")[0]: item.partition("=")[2] for item in args.backbone}
    base = Outcomes(args.baseline, dev)
    base_values = base.values()
    sizes = {name: len(columns["en"]) for name, columns in dev.bitexts.items()}
    print(f"{machine()}; {args.part} part; STS pairs: " + ", ".join(
        f"{name.removeprefix('STS ')} {len(p)}" for name, (p, _, _) in dev.sts_sets().items()
    ) + f"; bitext sentences: {sizes}")  # fmt: skip
    numbers: dict[str, object] = {"baseline": {column: float(v) for column, v in base_values.items()}}
    for name, path in arms.items():
        arm = Outcomes(path, dev)
        values, cells = arm.values(), compare(arm, base, args.resamples)
        numbers[name] = {column: float(value) for column, value in values.items()}
        numbers[f"{name} vs baseline"] = cells
        print(f"\n| column | start | {name} | {name} − start |\n|---|---:|---:|---|")
        for column in base_values:
            print(f"| {column} | {base_values[column]:.1f} | {values[column]:.1f} | {cells[column]} |")
        met = criteria(arm, base)
        numbers[f"{name} criteria"] = met
        print(
            f"\n{name} meets {sum(met.values())} of {len(met)}; not: "
            + ", ".join(k for k, v in met.items() if not v)
        )
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()

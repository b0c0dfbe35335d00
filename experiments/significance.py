"""How sure is each gap between the default modules and a baseline? Into docs/results/significance.md.

The modules table (experiments/modules_table.py) compares point estimates on 200 STS pairs and on 395
and 1,997 translations, where one sentence is 0.25 or 0.05 points of xsim. This script scores the
same held-out files per item and says, for every column, how far the difference could be chance:

- **STS** (Spearman x100): the difference modules - baseline with a 95% paired bootstrap interval
  (scipy.stats.bootstrap, the same pairs resampled for both models);
- **mining** (margin xsim, both directions): the sentences only the modules find and those only the
  baseline finds, and the exact two-sided McNemar p-value (a binomial test on those discordant
  sentences, scipy.stats.binomtest): the chance of a split at least that uneven if neither model
  were better.

    python -m experiments.significance --model runs/x/zoo-c5 \
        --baseline "naive LoRA=runs/lora-e5/m/backbone" --baseline Full_m=runs/full-e5/m/backbone \
        --out docs/results/significance.md

The zoo's monolingual STS is scored without the CLA (``mode="mono"``), its cross-lingual columns
with it, as in the modules table; baselines are plain backbones.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from experiments.common import (
    LANGS,
    Scored,
    bitext_columns,
    heldout_files,
    mcnemar,
    replace_section,
    scored,
    spearman_gap,
)
from modsenc.data.readers import ParallelCorpus, read_parallel_tsv
from modsenc.eval.sts import STSPair, read_sts_tsv

MARK_BEGIN = "<!-- significance: written by experiments/significance.py -->"
MARK_END = "<!-- end of significance -->"


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


def compare(
    model: Scored,
    baseline: Scored,
    lang: str,
    pairs: list[STSPair],
    bitexts: dict[str, ParallelCorpus],
    resamples: int,
) -> list[str]:
    """Markdown rows: one per STS pair and mining direction of ``lang``."""
    rows = []
    for lang1, lang2 in ((lang, lang), ("en", lang)):
        subset = [p for p in pairs if (p.lang1, p.lang2) == (lang1, lang2)]
        gold = np.array([p.score for p in subset])
        ours, theirs = model.sts_cosines(subset, lang1, lang2), baseline.sts_cosines(subset, lang1, lang2)
        diff, low, high = spearman_gap(ours, theirs, gold, resamples)
        column = f"STS {lang1}-{lang2} ({len(subset)} pairs)"
        rows.append(f"| {column} | {diff:+.1f} | [{low:+.1f}, {high:+.1f}] | |")
    for name, corpus in bitexts.items():
        columns = bitext_columns(corpus, lang)
        for src, tgt in (("en", lang), (lang, "en")):
            only_model, only_baseline, p = mcnemar(
                model.mining(columns, src, tgt), baseline.mining(columns, src, tgt)
            )
            rows.append(
                f"| xsim {src}-{tgt} {name} ({len(columns['en'])}) | {only_baseline - only_model:+d} "
                f"| {only_model} : {only_baseline} | {_p(p)} |"
            )
    return rows


def report(
    model_path: str,
    baselines: dict[str, str],
    langs: list[str],
    sts_file: Path,
    bitexts: dict[str, Path],
    resamples: int,
) -> str:
    model = scored(model_path)
    pairs = read_sts_tsv(sts_file)  # read once: every baseline and language scores the same files
    corpora = {name: read_parallel_tsv(path) for name, path in bitexts.items()}
    lines = [MARK_BEGIN, ""]
    for name, path in baselines.items():
        baseline = scored(path)
        for lang in langs:
            lines += [
                f"**{lang}: modules against {name}**",
                "",
                "| column | modules - baseline (STS points; mining errors) | STS: 95% interval; "
                "mining: sentences only the modules find : only the baseline finds | McNemar p |",
                "|---|---|---|---|",
                *compare(model, baseline, lang, pairs, corpora, resamples),
                "",
            ]
    return "\n".join([*lines, MARK_END])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="the zoo whose default modules are compared")
    parser.add_argument(
        "--baseline", action="append", required=True, metavar="NAME=PATH", help="a backbone to compare with"
    )
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument("--data", default="../shared/data", help="the shared data folder (eval-dev, NTREX)")
    parser.add_argument("--work", default="runs", help="where the held-out files are written (evaldata/)")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per STS column")
    parser.add_argument("--out", help="a markdown file whose significance section is replaced (else stdout)")
    args = parser.parse_args(argv)
    baselines = {}
    for item in args.baseline:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"--baseline {item!r}: expected NAME=PATH")
        baselines[name] = path
    sts_file, _ = heldout_files(Path(args.work), Path(args.data))
    bitexts = {
        "NTREX": Path(args.data) / "parallel" / "ntrex.tsv",
        "Kardeş": Path(args.work) / "evaldata" / "kardes-bitext.tsv",
    }
    text = report(args.model, baselines, args.langs.split(","), sts_file, bitexts, args.resamples)
    if not args.out:
        sys.stdout.write(text + "\n")
        return
    replace_section(Path(args.out), MARK_BEGIN, MARK_END, text)


if __name__ == "__main__":
    main()

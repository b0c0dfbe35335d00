"""Which change to the default CLA lost held-out en-xx STS? One row per variant zoo, on the dev
files' report part (modsenc/data/splits.py: what no training, stopping rule or choice reads),
with significance against e5 alone and between the zoos (issue 49's bisect; the table goes
into docs/results/modules.md by hand, with the commands).

Columns, per language: STS xx-xx without the CLA (``mode="mono"``) and through it (the default
mode, what ``encode`` gives), en-xx STS, and margin xsim both ways on the Kardeş bitext read off the
STS file and on NTREX-128 (report part). Significance as experiments/significance.py: a 95% paired
bootstrap interval of each STS difference, McNemar on the sentences only one model mines right.

    python -m experiments.cla_bisect --lang kk --backbone runs/bisect/zoo-sw0/backbone \\
        --zoo shipped=modsenc/adapters_zoo --zoo structure_weight=0=runs/bisect/zoo-sw0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.common import NTREX_LANGS, kardes_sts_bitext, machine, sts_subset
from experiments.common import Scored, bitext_columns, mcnemar, scored, spearman_gap
from modsenc.data.readers import read_parallel_tsv
from modsenc.data.specs import load_parallel
from modsenc.eval.sts import read_sts_tsv, row_cosines

PARTS = ("report", "selection")


def _files(
    work: Path, data: Path, lang: str, part: str = "report"
) -> tuple[list, dict[str, dict[str, list[str]]]]:
    """One part's STS pairs of en and ``lang``, and its bitexts' en/``lang`` columns: the report
    part for the tables, the selection part for choosing a variant."""
    evaldata = work / "evaldata"
    evaldata.mkdir(parents=True, exist_ok=True)
    kardes = data / "eval-dev" / "sts" / "kardes-sts-dev.tsv"
    sts = sts_subset(kardes, evaldata / f"kardes-sts-dev.en-{lang}.{part}.tsv", ("en", lang), part=part)
    bitext = kardes_sts_bitext(kardes, evaldata / f"kardes-bitext.{lang}.{part}.tsv", (lang,), part=part)
    bitexts = {"Kardeş": bitext_columns(read_parallel_tsv(bitext), lang)}
    if lang in NTREX_LANGS:
        spec = {"path": str(data / "parallel" / "ntrex.tsv"), "languages": ["en", lang], "split": part}
        bitexts["NTREX"] = bitext_columns(load_parallel(spec), lang)
    return read_sts_tsv(sts), bitexts


class Outcomes:
    """One model's per-item outcomes on one language's report part."""

    def __init__(
        self, model: Scored, lang: str, pairs: list, bitexts: dict[str, dict[str, list[str]]]
    ) -> None:
        own = [p for p in pairs if (p.lang1, p.lang2) == (lang, lang)]
        cross = [p for p in pairs if (p.lang1, p.lang2) == ("en", lang)]
        self.gold = {"own": np.array([p.score for p in own]), "cross": np.array([p.score for p in cross])}
        self.cosines = {
            f"STS {lang}-{lang} (mono)": row_cosines(
                model.encode("mono", lang, [p.sentence1 for p in own]),
                model.encode("mono", lang, [p.sentence2 for p in own]),
            ),
            f"STS {lang}-{lang} (default mode)": row_cosines(
                model.encode("cross", lang, [p.sentence1 for p in own]),
                model.encode("cross", lang, [p.sentence2 for p in own]),
            ),
            f"STS en-{lang}": model.sts_cosines(cross, "en", lang),
        }
        self.mined = {
            f"xsim {src}-{tgt} {name}": model.mining(columns, src, tgt)
            for name, columns in bitexts.items()
            for src, tgt in (("en", lang), (lang, "en"))
        }

    def gold_of(self, column: str) -> np.ndarray:
        return self.gold["cross" if column.startswith("STS en-") else "own"]

    def values(self) -> dict[str, float]:
        from scipy.stats import spearmanr  # noqa: PLC0415

        out = {c: 100 * spearmanr(v, self.gold_of(c)).statistic for c, v in self.cosines.items()}
        return out | {c: 100 * (1 - v.mean()) for c, v in self.mined.items()}


def compare(a: Outcomes, b: Outcomes, resamples: int) -> dict[str, str]:
    """a against b, per column: the STS difference [95% interval]; mining, a's errors minus b's
    and the McNemar p."""
    out = {}
    for column, cosines in a.cosines.items():
        diff, low, high = spearman_gap(cosines, b.cosines[column], a.gold_of(column), resamples)
        out[column] = f"{diff:+.1f} [{low:+.1f}, {high:+.1f}]"
    for column, correct in a.mined.items():
        only_a, only_b, p = mcnemar(correct, b.mined[column])
        out[column] = f"{only_b - only_a:+d} errors (p {p:.2g})"
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lang", required=True)
    parser.add_argument("--backbone", required=True, help="e5 alone (a backbone folder)")
    parser.add_argument(
        "--zoo", action="append", required=True, metavar="NAME=PATH",
        help="a zoo to score; each is compared with e5 alone and with every zoo given before it",
    )  # fmt: skip
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument(
        "--part", choices=PARTS, default="report",
        help="report: the tables' numbers; selection: for choosing among variants (never the report part)",
    )  # fmt: skip
    parser.add_argument("--work", default="runs/cla-bisect")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--json", help="also write every number here")
    args = parser.parse_args(argv)
    zoos = {item.rpartition("=")[0]: item.rpartition("=")[2] for item in args.zoo}
    pairs, bitexts = _files(Path(args.work), Path(args.data), args.lang, args.part)
    models = {"e5 alone": args.backbone, **zoos}
    outcomes = {name: Outcomes(scored(path), args.lang, pairs, bitexts) for name, path in models.items()}
    columns = list(outcomes["e5 alone"].values())
    sizes = {name: len(cols["en"]) for name, cols in bitexts.items()}
    gold = outcomes["e5 alone"].gold
    print(f"{machine()}; {args.part} part: {len(gold['own'])} {args.lang}-{args.lang} and "
          f"{len(gold['cross'])} en-{args.lang} STS pairs; bitexts {sizes}")  # fmt: skip
    print("| model | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    numbers: dict[str, object] = {}
    for name, result in outcomes.items():
        values = result.values()
        numbers[name] = values
        print(f"| {name} | " + " | ".join(f"{values[c]:.1f}" for c in columns) + " |")
    names = list(zoos)  # each against e5 alone, then against every zoo before it
    for index, name in enumerate(names):
        for base in ["e5 alone", *names[:index]]:
            cells = compare(outcomes[name], outcomes[base], args.resamples)
            numbers[f"{name} vs {base}"] = cells
            print(f"| {name} − {base} | " + " | ".join(cells[c] for c in columns) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()

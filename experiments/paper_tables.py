"""The papers' two comparisons at CPU scale, on ../shared/data, written to docs/results/papers.md.

1. MEXMA ablation (Janeiro et al., MEXMA, Table 5): the cpu-minilm backbone recipe trained three
   times with the same data and step budget: sentence-level gradients only (the unmasking reaches
   the encoder only through the sentence vectors, no KoLeo), + token-level gradients, + KoLeo (full
   MEXMA).
2. Full-parameter fine-tuning versus modules (Huang et al., Modular Sentence Encoders, Tables 1-2),
   all on that full-MEXMA backbone with the same paraphrase/parallel data and per-stage budgets:
   Full_m, Full_c, Full_mc (`modsenc finetune`) and Mod_en, Mod_m, Mod_mc-pp/pl/jt
   (`modsenc add-language`, one zoo per CLA variant), for en, uz, kk and az.

Every training and evaluation is a `modsenc` command run as a subprocess; its output directory is
its cache, so a second run of this script only formats (and a killed one continues where it
stopped: trainings are started with --resume). The commands are printed and written into the
document. Evaluation data (eval-dev only, never trained on):

* STS: eval-dev/sts/kardes-sts-dev.tsv, rows of en, uz, kk and az (200 pairs per language pair);
  eval-dev/sts/stsb-mt-dev.tsv for the ablation, its en-en and en-de/fr/es/ru rows (1,500 pairs each).
* Bitext: eval-dev/bitext/pud.tsv (en de fr es ru tr; 1,000 sentences) for the ablation. PUD has no
  uz/kk/az, so for those a bitext is read off kardes-sts-dev.tsv itself: its en-en, XX-XX and en-XX
  rows are row-aligned translations of the same STS-B pairs, so every distinct English sentence
  there has its uz, kk and az translation (395 sentences; the alignment is checked, not assumed).

    python -m experiments.paper_tables --data ../shared/data --work runs/paper \
        --mexma-repeat runs/cpu-minilm --modular-backbone runs/cpu-minilm/backbone \
        --zoo-pattern 'runs/zoo-cpu-{variant}' \
        --language-work-pattern 'runs/add-language-cpu/{lang}' --out docs/results/papers.md
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from experiments.common import Runner, kardes_sts_bitext, replace_section, sts_subset

LANGS = ("en", "uz", "kk", "az")
TARGETS = ("uz", "kk", "az")
PUD_LANGS = ("en", "de", "fr", "es", "ru", "tr")  # stsb-mt has no tr: en-de/fr/es/ru
VARIANTS = ("pp", "pl", "jt")
ABLATION = (
    (
        "sentence",
        "sentence-level gradients only",
        ["objective.token_gradients=false", "objective.koleo=false"],
    ),
    ("token", "+ token-level gradients", ["objective.koleo=false"]),
    ("full", "+ KoLeo (MEXMA)", []),
)
REPEAT_LABEL = "+ KoLeo (MEXMA), earlier run (--mexma-repeat)"
# This script rewrites only the block between these markers of its page (docs/results/papers.md).
MARK_BEGIN = "<!-- paper tables: written by experiments/paper_tables.py -->"
MARK_END = "<!-- end of paper tables -->"


# ------------------------------------------------------------------------------------- training
def train(args: argparse.Namespace, run: Runner) -> dict[str, Any]:
    """Everything the tables need; returns where each model lies."""
    data, work = args.data, args.work
    models: dict[str, Any] = {"mexma": {}, "full": {}, "zoo": {}}
    for name, _, overrides in ABLATION:
        out = work / f"mexma-{name}"
        command = ["train-backbone", "--recipe", "cpu-minilm", "--output", str(out)]
        command += [x for o in overrides for x in ("--set", o)]
        if (out / "run" / "checkpoints").exists() and not (out / "backbone").exists():
            command.append("--resume")  # train-backbone refuses --resume when there is nothing to resume
        run("mexma", command, out / "backbone", work / f"log-mexma-{name}.txt")
        models["mexma"][name] = out / "backbone"
    if args.mexma_repeat:  # an earlier run of the same recipe: a look at run-to-run spread
        models["mexma"]["repeat"] = Path(args.mexma_repeat) / "backbone"
    backbone = Path(args.modular_backbone) if args.modular_backbone else models["mexma"]["full"]
    models["backbone"] = backbone

    full = work / "full"
    for pairs, phase in (("mono,cross", "mc"), ("cross", "c")):
        command = ["finetune", "--backbone", str(backbone), "--output", str(full), "--pairs", pairs]
        run("full", command + ["--resume"], full / phase / "backbone", work / f"log-full-{phase}.txt")
    models["full"] = {"Full_m": full / "m" / "backbone", "Full_c": full / "c" / "backbone"}
    models["full"]["Full_mc"] = full / "mc" / "backbone"

    para = data / "paraphrase"
    language_data = {
        "en": ["--paraphrase", str(para / "kardes-xnli.tsv"), "--paraphrase", str(para / "stsb-mt.tsv")],
        "uz": ["--mono", str(data / "mono/uz.ud-ut.txt"), "--mono", str(data / "parallel/kardes-xnli.tsv")],
        "kk": ["--mono", str(data / "mono/kk.ud-ktb.txt"), "--mono", str(data / "parallel/kardes-xnli.tsv")],
        "az": ["--mono", str(data / "parallel/kardes-xnli.tsv")],
    }
    for variant in ("jt", "pp", "pl"):  # jt first: it trains the LA and SE that pp and pl reuse
        zoo = Path(args.zoo_pattern.format(variant=variant))
        for lang in LANGS:
            command = ["add-language", lang, "--recipe", "add-language-cpu", "--zoo", str(zoo)]
            command += ["--work-dir", args.language_work_pattern.format(lang=lang), *language_data[lang]]
            if lang == "en":
                command += ["--backbone", str(backbone)]
            else:
                command += ["--set", f"cla.variant={variant}"]
            log = work / f"log-add-{lang}-{variant}.txt"
            run("modular", command + ["--resume"], zoo / lang / "modsenc_bundle.json", log)
        models["zoo"][variant] = zoo
    return models


# ----------------------------------------------------------------------------------- evaluation
def evaluate(args: argparse.Namespace, run: Runner, models: dict[str, Any]) -> dict[str, dict]:
    data, out = args.data, args.work / "eval"
    kardes = data / "eval-dev/sts/kardes-sts-dev.tsv"
    sts_all = sts_subset(kardes, args.work / "data/kardes-sts-dev.en-uz-kk-az.tsv", LANGS)
    bitext = kardes_sts_bitext(kardes, args.work / "data/kardes-sts-bitext.tsv")
    # STS-B dev en-en and en-XX in the PUD languages: all 21 language pairs would be 63,000
    # sentences per model, an hour of encoding for the three arms on 2 cores.
    stsb = sts_subset(
        data / "eval-dev/sts/stsb-mt-dev.tsv", args.work / "data/stsb-mt-dev.en-pud.tsv", PUD_LANGS, "en"
    )
    results: dict[str, dict] = {}

    def run_eval(section: str, name: str, model: Path, files: list[str], extra: list[str] = ()) -> None:
        target = out / f"{name}.json"
        run(section, ["eval", str(model), *files, *extra, "--json", str(target)], target)
        if target.exists():
            results[name] = json.loads(target.read_text(encoding="utf-8"))

    ablation_files = ["--bitext", str(data / "eval-dev/bitext/pud.tsv"), "--bitext", str(bitext)]
    ablation_files += ["--sts", str(stsb), "--sts", str(sts_all)]
    for name, path in models["mexma"].items():
        run_eval("eval-mexma", f"mexma-{name}", path, ablation_files)

    modular_files = ["--bitext", str(bitext), "--sts", str(sts_all)]
    for name, path in [("backbone", models["backbone"]), *models["full"].items()]:
        run_eval("eval-modular", name, path, modular_files)
    jt = models["zoo"]["jt"]
    run_eval("eval-modular", "Mod_en", jt, modular_files, ["--route", "en"])
    run_eval("eval-modular", "Mod_m", jt, modular_files, ["--mode", "mono"])
    for variant, zoo in models["zoo"].items():
        # Cross-lingual rows with the CLA. Monolingual ones go without it (the paper's set-up), and
        # the three zoos share their vocabulary, LA and SE, so those are Mod_m's numbers.
        run_eval("eval-modular", f"Mod_mc-{variant}", zoo, modular_files, ["--mode", "cross"])
    return results


# -------------------------------------------------------------------------------------- tables
def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _fmt(value: float) -> str:
    return f"{value:.1f}"


def _bitext_avg(result: dict, file: str, langs: tuple[str, ...], key: str = "xsim_error") -> float:
    pairs = result["bitext"][file]
    return _mean([pairs[f"{a}-{b}"][key] for lang in langs for a, b in (("en", lang), (lang, "en"))])


def _sts(result: dict, file: str) -> dict[str, float]:
    return result["sts"][file]["spearman"]


def ablation_table(results: dict[str, dict]) -> tuple[str, dict[str, dict[str, float]]]:
    pud_langs = PUD_LANGS[1:]
    stsb_langs = ("de", "fr", "es", "ru")
    lines = [
        "| model | PUD xsim err. % (5 langs <-> en) | PUD P@1 % | uz/kk/az xsim err. % | "
        "STS-B en-en | STS-B en-xx (de fr es ru) | Kardeş STS en-xx (uz kk az) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    numbers: dict[str, dict[str, float]] = {}
    for name, label, _ in (*ABLATION, ("repeat", REPEAT_LABEL, [])):
        r = results.get(f"mexma-{name}")
        if r is None:
            continue
        stsb, kardes = _sts(r, "stsb-mt-dev.en-pud.tsv"), _sts(r, "kardes-sts-dev.en-uz-kk-az.tsv")
        row = {
            "pud_xsim": _bitext_avg(r, "pud.tsv", pud_langs),
            "pud_p1": _bitext_avg(r, "pud.tsv", pud_langs, "p@1"),
            "kardes_xsim": _bitext_avg(r, "kardes-sts-bitext.tsv", TARGETS),
            "stsb_en": stsb["en-en"],
            "stsb_cross": _mean([stsb[f"en-{x}"] for x in stsb_langs]),
            "kardes_cross": _mean([kardes[f"en-{x}"] for x in TARGETS]),
        }
        numbers[name] = row
        lines.append(f"| {label} | " + " | ".join(_fmt(v) for v in row.values()) + " |")
    return "\n".join(lines), numbers


MODULAR_ROWS = (
    ("backbone", "backbone (no fine-tuning)", None),
    ("Full_m", "Full_m", None),
    ("Full_c", "Full_c", None),
    ("Full_mc", "Full_mc", None),
    ("Mod_en", "Mod_en", None),
    ("Mod_m", "Mod_m", None),
    ("Mod_mc-pp", "Mod_mc-pp", "Mod_m"),
    ("Mod_mc-pl", "Mod_mc-pl", "Mod_m"),
    ("Mod_mc-jt", "Mod_mc-jt", "Mod_m"),
)


def modular_tables(results: dict[str, dict]) -> tuple[str, str, dict[str, dict[str, float]]]:
    sts_file, bitext_file = "kardes-sts-dev.en-uz-kk-az.tsv", "kardes-sts-bitext.tsv"
    sts_lines = [
        "| model | en | uz | kk | az | mono avg | en-uz | en-kk | en-az | cross avg | language bias |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    bitext_lines = [
        "| model | en->uz | uz->en | en->kk | kk->en | en->az | az->en | avg xsim err. % | avg P@1 % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    numbers: dict[str, dict[str, float]] = {}
    for name, label, mono_name in MODULAR_ROWS:
        cross = results.get(name)
        mono = results.get(mono_name or name)
        if cross is None or mono is None:
            continue
        mono_sts, cross_sts = _sts(mono, sts_file), _sts(cross, sts_file)
        mono_cells = [mono_sts[f"{x}-{x}"] for x in LANGS]
        cross_cells = [cross_sts[f"en-{x}"] for x in TARGETS]
        bias = cross["sts"][sts_file]["language_bias"]["bias"]
        numbers[name] = {"mono": _mean(mono_cells), "cross": _mean(cross_cells), "bias": bias}
        cells = [*mono_cells, _mean(mono_cells), *cross_cells, _mean(cross_cells), bias]
        sts_lines.append(f"| {label} | " + " | ".join(_fmt(v) for v in cells) + " |")
        pairs = cross["bitext"][bitext_file]
        directions = [f"{a}-{b}" for x in TARGETS for a, b in (("en", x), (x, "en"))]
        xsim = [pairs[d]["xsim_error"] for d in directions]
        p1 = _mean([pairs[d]["p@1"] for d in directions])
        numbers[name] |= {"xsim": _mean(xsim), "p1": p1}
        bitext_lines.append(f"| {label} | " + " | ".join(_fmt(v) for v in [*xsim, _mean(xsim), p1]) + " |")
    return "\n".join(sts_lines), "\n".join(bitext_lines), numbers


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def compute_table(models: dict[str, Any]) -> tuple[str, float]:
    """Training time of every model, as recorded beside it by the command that trained it."""
    lines = ["| model | training time (s), as recorded |", "|---|---:|"]
    total = 0.0

    def add(label: str, seconds: float | None) -> None:
        nonlocal total
        total += seconds or 0.0
        cell = "not recorded" if seconds is None else f"{seconds:.0f}" if seconds else "0 (all reused)"
        lines.append(f"| {label} | {cell} |")

    for name, label, _ in ABLATION:
        add(
            f"backbone: {label}",
            _read_json(models["mexma"][name] / "modsenc_backbone.json").get("wall_seconds"),
        )
    if models["backbone"] not in models["mexma"].values() or "repeat" in models["mexma"]:
        path = models["mexma"].get("repeat", models["backbone"])
        add(f"backbone: {path}", _read_json(path / "modsenc_backbone.json").get("wall_seconds"))
    full = models["full"]["Full_m"].parent.parent
    for phase in ("m", "c", "mc"):
        add(f"finetune phase {phase}", _read_json(full / phase / "done.json").get("seconds"))
    for variant, zoo in models["zoo"].items():
        for lang in LANGS:
            stages = _read_json(zoo / lang / "modsenc_bundle.json").get("stage_seconds", {})
            if variant != "jt":  # vocabulary, LA and SE were trained once, in the jt run
                stages = {k: v for k, v in stages.items() if k == "cla"}
            label = f"add-language {lang} ({'+'.join(stages) or 'nothing new'}, zoo {variant})"
            installed = (zoo / lang / "modsenc_bundle.json").exists()
            add(label, sum(stages.values()) if installed else None)
    return "\n".join(lines), total


def _held(flag: bool) -> str:
    return "**held**" if flag else "**did not hold**"


def ablation_direction(n: dict[str, dict[str, float]]) -> str:
    if len(n) < 3:
        return "(incomplete: not every arm has been trained and evaluated)"
    s, t, f = n["sentence"], n["token"], n["full"]
    spread = (
        f" The two runs of the full recipe differ by {abs(f['pud_xsim'] - n['repeat']['pud_xsim']):.1f} "
        "points of PUD xsim, so gaps of that size are noise."
        if "repeat" in n
        else ""
    )
    return (
        f"MEXMA's Table 5 has each addition lowering the xsim error. Token-level gradients: PUD xsim "
        f"{_fmt(s['pud_xsim'])} -> {_fmt(t['pud_xsim'])} ({_held(t['pud_xsim'] < s['pud_xsim'])}); "
        f"KoLeo on top: {_fmt(t['pud_xsim'])} -> {_fmt(f['pud_xsim'])} "
        f"({_held(f['pud_xsim'] < t['pud_xsim'])})." + spread
    )


def modular_direction(n: dict[str, dict[str, float]]) -> tuple[str, str]:
    if not all(k in n for k, _, _ in MODULAR_ROWS):
        return ("(incomplete)", "(incomplete)")
    full_best_mono = max(n[k]["mono"] for k in ("Full_m", "Full_c", "Full_mc"))
    full_best_cross = max(n[k]["cross"] for k in ("Full_m", "Full_c", "Full_mc"))
    mod_best_cross = max(n[f"Mod_mc-{v}"]["cross"] for v in VARIANTS)
    sts = (
        "The paper finds language-specific modules beat full multilingual fine-tuning on monolingual STS "
        f"(here Mod_m {_fmt(n['Mod_m']['mono'])} vs the best Full {_fmt(full_best_mono)}: "
        f"{_held(n['Mod_m']['mono'] > full_best_mono)}), that the CLA lifts cross-lingual STS above Mod_m "
        f"(best Mod_mc {_fmt(mod_best_cross)} vs {_fmt(n['Mod_m']['cross'])}: "
        f"{_held(mod_best_cross > n['Mod_m']['cross'])}) and that Mod_mc is at least as good as the Full "
        f"models cross-lingually (best Full {_fmt(full_best_cross)}: "
        f"{_held(mod_best_cross >= full_best_cross)})."
    )
    full_best_xsim = min(n[k]["xsim"] for k in ("Full_m", "Full_c", "Full_mc"))
    jt, pp, pl = (n[f"Mod_mc-{v}"]["xsim"] for v in ("jt", "pp", "pl"))
    bitext = (
        f"For mining, the paper finds the CLA essential and jt the best variant: Mod_mc-jt {_fmt(jt)} vs "
        f"Mod_m {_fmt(n['Mod_m']['xsim'])} ({_held(jt < n['Mod_m']['xsim'])}); jt vs pp {_fmt(pp)} and "
        f"pl {_fmt(pl)} ({_held(jt <= min(pp, pl))}); jt vs the best Full {_fmt(full_best_xsim)} "
        f"({_held(jt < full_best_xsim)})."
    )
    return sts, bitext


def _ablation_section(ablation: str, ablation_numbers: Any, mexma_commands: str) -> list[str]:
    """The heading, the command and section 1, the MEXMA ablation."""
    return [
        "# Results: the papers' comparisons at CPU scale",
        "",
        "Produced by `experiments/paper_tables.py` (this block is its output; the prose around the",
        "numbers is generated from them). Machine: 2 CPU cores, fp32, no GPU. Command:",
        "",
        "    "
        + " ".join(shlex.quote(a) for a in ["python", "-m", "experiments.paper_tables", *sys.argv[1:]]),
        "",
        "The scale is tiny next to the papers': a 17M-parameter backbone (all-MiniLM-L6-v2 moved to a",
        "16K multilingual SentencePiece vocabulary with FOCUS), 400 MEXMA steps of 32 pairs, and",
        "add-language / fine-tuning budgets of minutes (recipes `cpu-minilm`, `add-language-cpu`,",
        "`full-finetune-cpu`). The numbers say which direction each comparison takes at this scale,",
        "not what the methods reach. Evaluation files are the eval-dev sets only (see the module",
        "docstring of the script for the uz/kk/az bitext read off Kardeş STS dev: 395 sentences).",
        "",
        "## 1. MEXMA ablation (MEXMA paper, Table 5 layout)",
        "",
        "Same recipe (`recipes/cpu-minilm.yaml`: 400 steps, batch 32, same data and seed); only the",
        "objective switches differ. xsim error: LASER ratio margin, k=4, both directions averaged.",
        "STS: Spearman x100 of cosine similarity. A row 'earlier run' is the same recipe trained",
        "again (the issue-2 run, with an older dropout seeding): the gap between it and the full",
        "arm is the run-to-run spread to read the other gaps against.",
        "",
        ablation,
        "",
        ablation_direction(ablation_numbers),
        "",
        "Commands:",
        "",
        mexma_commands,
        "",
    ]


def _modular_section(
    models: dict[str, Any], tables: tuple[str, str, str, str], modular_commands: str
) -> list[str]:
    """Section 2: full fine-tuning against modules; ``tables``: STS, bitext and their directions."""
    sts, bitext, sts_direction, bitext_direction = tables
    return [
        "## 2. Full fine-tuning versus modules (Modular Sentence Encoders, Tables 1-2 layout)",
        "",
        f"Backbone: `{models['backbone']}` (recipe cpu-minilm, full MEXMA; the zoos were built on it).",
        "Full_m: every parameter trained on the monolingual",
        "paraphrases of en, uz, kk and az (4 epochs, the SE stage's budget); Full_c: on the en->XX",
        "cross-lingual paraphrases (2 epochs, the CLA stage's budget); Full_mc: Full_m then the Full_c",
        "phase. Mod_en: the English SE adapter for every language (backbone tokenizer);",
        "Mod_m: each language's vocabulary + LA + SE; Mod_mc-*: plus its CLA trained on",
        "cross-lingual paraphrases (pp), parallel sentences (pl) or both, alternating (jt). The",
        "pairs are the same in both families (`modsenc finetune` reads them with add-language's",
        "own reader, the same 100 dev pairs per language held out). Monolingual columns use no CLA,",
        "so the Mod_mc rows repeat Mod_m there (the three zoos share vocabulary, LA and SE).",
        "",
        "### Table 1: STS (Kardeş STS dev, Spearman x100)",
        "",
        sts,
        "",
        "Language bias: the modular paper's definition (average bilingual Spearman minus Spearman",
        "over the pooled bilingual pairs); closer to 0 is better.",
        "",
        sts_direction,
        "",
        "### Table 2: bitext mining (uz/kk/az <-> en, 395 sentences from Kardeş STS dev)",
        "",
        bitext,
        "",
        bitext_direction,
        "",
        "Commands:",
        "",
        modular_commands,
        "",
    ]


def _compute_section(args: argparse.Namespace, run: Runner, compute: str, train_seconds: float) -> list[str]:
    """The compute section: recorded training times and this invocation's evaluations."""
    return [
        "## Compute",
        "",
        "Training on the 2 CPU cores, as recorded by each command next to its output (a stage that",
        "was reused is counted once; 'not recorded': trained before train-backbone wrote its wall",
        "time into the manifest, see docs/benchmarks.md):",
        "",
        compute,
        "",
        f"Total recorded training time: {train_seconds / 3600:.2f} h. {args.compute_note}".rstrip(),
        "",
        "Wall times of the evaluations this invocation of the script ran itself (s):",
        "",
        "\n".join(f"    {s:>8.0f}  {c}" for c, s in run.seconds.items())
        or "    (none: every output existed)",
        "",
    ]


def document(args: argparse.Namespace, run: Runner, results: dict[str, dict], models: dict[str, Any]) -> str:
    ablation, ablation_numbers = ablation_table(results)
    compute, train_seconds = compute_table(models)
    sts, bitext, modular_numbers = modular_tables(results)
    sts_direction, bitext_direction = modular_direction(modular_numbers)

    def commands(*sections: str) -> str:
        return "\n".join("    " + c for s in sections for c in run.commands.get(s, []))

    return "\n".join(
        [
            *_ablation_section(ablation, ablation_numbers, commands("mexma", "eval-mexma")),
            *_modular_section(
                models,
                (sts, bitext, sts_direction, bitext_direction),
                commands("full", "modular", "eval-modular"),
            ),
            *_compute_section(args, run, compute, train_seconds),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--work", type=Path, default=Path("runs/paper"))
    parser.add_argument(
        "--mexma-repeat",
        help="An earlier `train-backbone --recipe cpu-minilm` run folder, shown as an extra row of the "
        "ablation (same recipe, another run: how much the numbers move between runs).",
    )
    parser.add_argument(
        "--modular-backbone",
        help="Backbone directory the zoos were built on [default: the ablation's full MEXMA arm].",
    )
    parser.add_argument("--zoo-pattern", default="runs/paper/zoo-{variant}")
    parser.add_argument("--language-work-pattern", default="runs/paper/add-language/{lang}")
    parser.add_argument("--out", type=Path, default=Path("docs/results/papers.md"))
    parser.add_argument("--compute-note", default="", help="A remark on the training times, kept in the doc.")
    parser.add_argument("--dry-run", action="store_true", help="Print the commands that would run.")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    run = Runner(dry_run=args.dry_run)
    models = train(args, run)
    results = evaluate(args, run, models)
    if args.dry_run:
        return
    text = document(args, run, results, models)
    replace_section(
        args.out, MARK_BEGIN, MARK_END, f"{MARK_BEGIN}\n\n{text.rstrip()}\n\n{MARK_END}", prepend=True
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

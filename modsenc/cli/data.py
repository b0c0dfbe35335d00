"""Training data: synthesize."""

from __future__ import annotations

import click

from modsenc.cli.app import main


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
    for lang, r in reports.items():
        dropped = ", ".join(f"{k} {v}" for k, v in r.dropped.items())
        click.echo(
            f"{lang}: {r.pairs_kept}/{r.pairs_in} pairs kept (dropped: {dropped}; "
            f"negatives dropped {r.negatives_dropped}); {r.translated} sentences translated, "
            f"{r.from_cache} from the cache",
            err=True,
        )
    click.echo(f"written to {output_path}", err=True)

"""Corpus-scale encode and mine on Ray: the scale group."""

from __future__ import annotations

import click

from modsenc.cli.app import main
from modsenc.cli.options import (
    dtype_option,
    engine_options,
    mode_option,
    other_option,
    quantize_option,
    runtime_option,
    zoo_option,
)


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


@scale_group.command("encode")
@zoo_option()
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
@mode_option()
@click.option("--normalize", is_flag=True, help="L2-normalise the embeddings.")
@click.option(
    "--vector-dtype",
    type=click.Choice(["float32", "float16"]),
    default="float32",
    show_default=True,
    help="Stored vectors' type (the computation's precision is --dtype).",
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
@engine_options
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
@quantize_option("the backbone's")
@dtype_option()
@runtime_option()
@other_option()
def scale_encode(
    zoo_dir, inputs, output_dir, lang, lang_field, text_field, id_column, mode, normalize, vector_dtype,
    shard_size, batch_size, workers, address, threads_per_worker, resume, device, no_verify, quantize, dtype,
    runtime, other,
) -> None:  # fmt: skip
    """Embed a corpus with a pool of Ray actors into Parquet shards (resumable; rejects listed)."""
    from modsenc.scale.encode import encode_corpus  # noqa: PLC0415

    manifest = encode_corpus(
        zoo_dir,
        inputs,
        output_dir,
        lang=lang,
        lang_field=lang_field,
        text_field=text_field,
        mode=mode,
        normalize=normalize,
        vector_dtype=vector_dtype,
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
        dtype=dtype,
        runtime=runtime,
    )
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
@engine_options
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
    click.echo(f"{len(pairs)} pairs written to {output_path}", err=True)

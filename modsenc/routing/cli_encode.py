"""What ``modsenc encode`` and ``modsenc zoo`` do, as plain functions (the CLI only parses options).

``encode_file`` streams: it reads ``chunk_size`` lines at a time, so memory holds one chunk of text
and one of vectors whatever the input size. Row ``i`` of the output is line ``i`` of the input
(empty lines included: they are encoded as empty text). The output appears atomically when done.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from modsenc.data.readers import count_lines, iter_lines
from modsenc.modules.bundle import Zoo, check_language_code, check_outside_zoo
from modsenc.utils.io import atomic_file
from modsenc.utils.logs import progress
from modsenc.utils.outputs import check_output_file


def _chunks(path: Path, size: int, name: str) -> Iterator[list[str]]:
    chunk: list[str] = []
    for _, line in iter_lines(path, name=name):
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def encode_file(
    zoo_dir: str | os.PathLike,
    input_path: str,
    output_path: str | os.PathLike,
    lang: str = "auto",
    mode: str = "cross",
    batch_size: int = 32,
    chunk_size: int = 10000,
    normalize: bool = False,
    device: str | None = None,
    verify: bool = True,
    quantize: str | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
) -> int:
    """Encode ``input_path`` ('-': stdin) line by line into ``output_path`` (.npy or .jsonl).

    ``verify=False`` skips re-hashing the backbone and bundles, ``quantize="int8"`` runs the backbone
    in int8, ``dtype`` chooses fp32 or bf16 (see ``ModularEncoder.from_pretrained``); an existing
    output is replaced only with ``overwrite`` (``modsenc.utils.outputs``).
    """
    from modsenc.routing.encoder import ModularEncoder  # noqa: PLC0415 - heavy import

    output_path = Path(output_path)
    if output_path.suffix not in (".npy", ".jsonl"):
        raise ValueError(f"--output must end in .npy or .jsonl, got {output_path}")
    if output_path.is_dir():
        raise ValueError(f"--output {output_path} is a folder; give a file name ending in .npy or .jsonl")
    if input_path != "-" and Path(input_path).is_dir():
        raise ValueError(f"--input {input_path} is a folder; give a text file (one sentence per line)")
    if lang != "auto":
        check_language_code(lang)
    check_outside_zoo(output_path, Zoo(zoo_dir), "--output")
    check_output_file(output_path, "--output", inputs=[input_path], overwrite=overwrite)
    # Errors name what the user gave, not the spooled copy of stdin.
    shown = "standard input" if input_path == "-" else input_path
    with tempfile.TemporaryDirectory() as scratch:
        if input_path == "-":
            source = Path(scratch) / "stdin.txt"
            with source.open("wb") as spool:
                shutil.copyfileobj(sys.stdin.buffer, spool)
        else:
            source = Path(input_path)
            if not source.is_file():
                raise FileNotFoundError(f"{input_path}: no such input file")
        total = count_lines(source)
        encoder = ModularEncoder.from_pretrained(
            zoo_dir, device=device, verify=verify, quantize=quantize, dtype=dtype
        )
        dim = encoder.get_sentence_embedding_dimension()
        bar = progress(total=total, desc="encode", unit="sent", enabled=total >= 1000)
        written = 0
        # A temporary unique to this run: two runs writing one path each finish a complete file.
        with atomic_file(output_path) as tmp:
            try:
                if output_path.suffix == ".npy":
                    matrix = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(total, dim))
                    for chunk in _chunks(source, chunk_size, shown):
                        vectors = encoder.encode(
                            chunk, lang=lang, batch_size=batch_size, normalize_embeddings=normalize, mode=mode
                        )
                        matrix[written : written + len(chunk)] = vectors
                        written += len(chunk)
                        bar.update(len(chunk))
                    matrix.flush()
                    del matrix
                else:
                    with tmp.open("w", encoding="utf-8") as out:
                        for chunk in _chunks(source, chunk_size, shown):
                            vectors, langs = encoder.encode(
                                chunk,
                                lang=lang,
                                batch_size=batch_size,
                                normalize_embeddings=normalize,
                                mode=mode,
                                return_languages=True,
                            )
                            for text, code, vector in zip(chunk, langs, vectors):
                                out.write(
                                    json.dumps({"text": text, "lang": code, "embedding": vector.tolist()})
                                    + "\n"
                                )
                            written += len(chunk)
                            bar.update(len(chunk))
            finally:
                bar.close()
    return written


def zoo_table(zoo_dir: str | os.PathLike) -> str:
    zoo = Zoo(zoo_dir)
    if not zoo.index_path.exists():
        raise FileNotFoundError(f"{zoo_dir} is not a modsenc zoo (no index.json)")
    rows = ["lang  script  pivot  modules               size (MB)  created"]
    for lang in zoo.languages():
        try:
            manifest = zoo.read_manifest(lang)
        except (OSError, ValueError) as err:  # one broken entry is reported, the others still listed
            rows.append(f"{lang:<5} BROKEN: {err}")
            continue
        size = zoo.bundle_bytes(lang) / 2**20
        modules = ",".join(k for k in ("vocab", "la", "se", "cla") if k in manifest["modules"])
        rows.append(
            f"{lang:<5} {manifest.get('script', '?'):<7} {'yes' if manifest.get('is_pivot') else 'no':<6} "
            f"{modules:<21} {size:>9.1f}  {manifest.get('created', '?')}"
        )
    backbone = zoo.read_index().get("backbone") or {}
    rows.append(f"backbone: {zoo.backbone_dir} (fingerprint {str(backbone.get('fingerprint'))[:12]})")
    return "\n".join(rows)


def bundle_info(zoo_dir: str | os.PathLike, lang: str) -> str:
    manifest = Zoo(zoo_dir).read_manifest(check_language_code(lang))
    lines = [
        f"language {manifest['language']} ({manifest['script']}), pivot {manifest['pivot']}"
        + (" (this is the pivot)" if manifest["is_pivot"] else ""),
        f"stages: {', '.join(manifest['stages'])}"
        + (f" (CLA variant {manifest['cla_variant']})" if manifest.get("cla_variant") else ""),
        "modules:",
    ]
    for kind, info in sorted(manifest["modules"].items()):
        lines.append(
            f"  {kind:<6} {info['parameters']:>12,} parameters  "
            f"{info['percent_of_backbone']:6.2f}% of backbone"
        )
    lines.append("data:")
    for kind, files in manifest["data"]["files"].items():
        for record in files:
            column = f" [{record['column']}]" if record.get("column") else ""
            lines.append(
                f"  {kind:<10} {record.get('path', record.get('spec'))}{column}: {record['count']} rows"
            )
    lines.append("dev metrics:")
    for stage, metrics in manifest["dev_metrics"].items():
        lines.append(f"  after {stage}: {json.dumps(metrics)}")
    lines.append(
        f"built {manifest['created']} in {manifest['wall_seconds']:.0f} s with "
        + ", ".join(f"{k} {v}" for k, v in manifest["versions"].items())
    )
    return "\n".join(lines)

"""``modsenc encode``: a text file (or stdin) through a ``ModularEncoder`` into .npy or .jsonl."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from modsenc.data.readers import count_lines, iter_lines
from modsenc.encoder.modular_encoder import ModularEncoder
from modsenc.modules.bundle import Zoo, check_outside_zoo
from modsenc.routing.router import RefusedSentenceError, explicit_route
from modsenc.utils.io import atomic_file
from modsenc.utils.logs import progress
from modsenc.utils.outputs import check_file_name, check_output_file


def _chunks(path: Path, size: int, name: str) -> Iterator[list[str]]:
    chunk: list[str] = []
    for _, line in iter_lines(path, name=name):
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _check_encode_paths(
    zoo_dir: str | os.PathLike, input_path: str, output_path: Path, lang: str, overwrite: bool
) -> None:
    """Everything ``encode_file`` checks before reading a line or loading the model."""
    if output_path.suffix not in (".npy", ".jsonl"):
        raise ValueError(f"--output must end in .npy or .jsonl, got {output_path}")
    if output_path.is_dir():
        raise ValueError(f"--output {output_path} is a folder; give a file name ending in .npy or .jsonl")
    if input_path != "-" and Path(input_path).is_dir():
        raise ValueError(f"--input {input_path} is a folder; give a text file (one sentence per line)")
    if input_path != "-":
        _source_file(input_path, Path())  # a missing file or a device is named before any model loads
    if lang != "auto":
        explicit_route(lang)
    check_outside_zoo(output_path, Zoo(zoo_dir), "--output")
    check_output_file(output_path, "--output", inputs=[input_path], overwrite=overwrite)


def _write_npy(tmp: Path, chunks: Iterable[list[str]], total: int, encode: Any, bar: Any) -> int:
    """Rows into a float32 .npy memory map of ``total`` rows, one chunk at a time."""
    matrix = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(total, encode.dimension))
    written = 0
    for chunk in chunks:
        matrix[written : written + len(chunk)] = encode(chunk)
        written += len(chunk)
        bar.update(len(chunk))
    matrix.flush()
    del matrix
    return written


def _write_jsonl(tmp: Path, chunks: Iterable[list[str]], encode: Any, bar: Any) -> int:
    """One JSON object per line: the text, its language, its route and why (what the router
    ``detected``, its ``confidence``, whether it was ``unsure``: issue 48), and its vector."""
    written = 0
    installed = set(encode.encoder.installed)
    with tmp.open("w", encoding="utf-8") as out:
        for chunk in chunks:
            vectors, langs = encode(chunk, return_languages=True)
            for text, code, vector, why in zip(chunk, langs, vectors, encode.why(chunk)):
                # a language without a bundle here went to the backbone (ModularEncoder.encode)
                route = "bundle" if code in installed else "backbone"
                row = {"text": text, "lang": code, "route": route, **why, "embedding": vector.tolist()}
                out.write(json.dumps(row) + "\n")
            written += len(chunk)
            bar.update(len(chunk))
    return written


class _ChunkEncoder:
    """``ModularEncoder.encode`` with the command's options bound, for one chunk of lines after
    another; a sentence the router refuses is named by its line in ``source``."""

    def __init__(self, encoder: ModularEncoder, source: str, **options: Any) -> None:
        self.encoder, self.source, self.options = encoder, source, options
        self.dimension = encoder.get_sentence_embedding_dimension()
        self.lines_done = 0

    def __call__(self, chunk: list[str], return_languages: bool = False) -> Any:
        try:
            result = self.encoder.encode(chunk, return_languages=return_languages, **self.options)
        except RefusedSentenceError as err:
            line = self.lines_done + err.index + 1
            where = f"{self.source}: line {line}: {err.reason}"
            raise type(err)(err.reason, err.index, where) from err
        self.lines_done += len(chunk)
        return result

    def why(self, chunk: list[str]) -> list[dict[str, Any]]:
        """Each line's ``detected``, ``confidence`` and ``unsure`` as the router gave them (the
        same deterministic routes ``encode`` took; a given ``lang`` is certain)."""
        if self.options.get("lang", "auto") not in (None, "auto"):
            return [{"detected": None, "confidence": 1.0, "unsure": False}] * len(chunk)
        return [
            {"detected": d.detected, "confidence": round(d.confidence, 4), "unsure": d.unsure}
            for d in self.encoder.detect_languages(chunk)
        ]


def encode_file(
    zoo_dir: str | os.PathLike,
    input_path: str,
    output_path: str | os.PathLike,
    lang: str = "auto",
    mode: str = "cross",
    other: str = "backbone",
    batch_size: int = 32,
    chunk_size: int = 10000,
    normalize: bool = False,
    device: str | None = None,
    verify: bool = True,
    quantize: str | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    runtime: str = "auto",
    calibration: list[str] | None = None,
) -> int:
    """Encode ``input_path`` ('-': stdin) line by line into ``output_path`` (.npy or .jsonl).

    It streams: ``chunk_size`` lines at a time, so memory holds one chunk of text and one of
    vectors whatever the input size. Row ``i`` of the output is line ``i`` of the input (empty
    lines included: they are encoded as empty text). The output appears atomically when done.
    ``other`` is the router's policy for lines in a language the zoo lacks (``from_pretrained``);
    ``verify=False`` skips re-hashing the backbone and bundles, ``quantize="int8"`` runs the backbone
    in int8, ``dtype`` chooses fp32 or bf16, ``runtime`` torch, openvino or auto, ``calibration``
    the openvino runtime's int8 calibration sentences (see
    ``ModularEncoder.from_pretrained``); an existing output is replaced only with ``overwrite``
    (``modsenc.utils.outputs``).
    """
    output_path = check_file_name(output_path, "--output")  # "x.npy/" is refused, not written as x.npy
    _check_encode_paths(zoo_dir, input_path, output_path, lang, overwrite)
    # Errors name what the user gave, not the spooled copy of stdin.
    shown = "standard input" if input_path == "-" else input_path
    with tempfile.TemporaryDirectory() as scratch:
        source = _source_file(input_path, Path(scratch))
        total = count_lines(source)
        encoder = ModularEncoder.from_pretrained(
            zoo_dir,
            device=device,
            verify=verify,
            quantize=quantize,
            dtype=dtype,
            runtime=runtime,
            calibration=calibration,
            other=other,
        )
        encode = _ChunkEncoder(
            encoder, shown, lang=lang, batch_size=batch_size, normalize_embeddings=normalize, mode=mode
        )
        chunks = _chunks(source, chunk_size, shown)
        bar = progress(total=total, desc="encode", unit="sent", enabled=total >= 1000)
        # A temporary unique to this run: two runs writing one path each finish a complete file.
        with atomic_file(output_path) as tmp:
            try:
                if output_path.suffix == ".npy":
                    return _write_npy(tmp, chunks, total, encode, bar)
                return _write_jsonl(tmp, chunks, encode, bar)
            finally:
                bar.close()


def _source_file(input_path: str, scratch: Path) -> Path:
    """The file to read: ``input_path``, or standard input ('-') spooled into ``scratch`` (it is
    read twice: counted, then encoded)."""
    if input_path == "-":
        source = scratch / "stdin.txt"
        with source.open("wb") as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
        return source
    source = Path(input_path)
    if source.exists() and not source.is_file():  # /dev/zero, a FIFO: endless, or readable once
        raise ValueError(
            f"--input {input_path} is not a regular file (a device, FIFO or socket); give a text file, "
            "or pipe it in with --input -"
        )
    if not source.is_file():
        raise FileNotFoundError(f"{input_path}: no such input file")
    return source

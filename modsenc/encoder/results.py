"""What ``ModularEncoder.encode`` takes and gives back, as sentence-transformers does: its
arguments checked before any work, and its vectors shaped (quantised, tensor, array or list)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from sentence_transformers.util import quantize_embeddings

from modsenc.utils.errors import InputError

log = logging.getLogger("modsenc.encoder.modular_encoder")

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


def check_texts(sentences: Any) -> tuple[list[str], bool]:
    """``sentences`` as a list of str, and whether one sentence was given as a plain string (one
    text, not its characters), or a one-line error naming the first bad sentence: not a str, or
    not valid Unicode (a lone surrogate, which no UTF-8 encoder takes: the tokenizer and the
    language detector would fail on it with their own errors)."""
    if isinstance(sentences, (bytes, bytearray, Mapping)) or not isinstance(sentences, (str, Iterable)):
        raise TypeError(
            f"sentences must be a str or a list of str, got {type(sentences).__name__}"
            + ("; decode bytes first, e.g. data.decode('utf-8')" if isinstance(sentences, bytes) else "")
        )
    single = isinstance(sentences, str)
    texts = [sentences] if single else list(sentences)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            hint = "; decode bytes first, e.g. data.decode('utf-8')" if isinstance(text, bytes) else ""
            raise TypeError(f"sentence {i} is {type(text).__name__}, expected str{hint}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            char = f"U+{ord(text[err.start]):04X}"
            raise InputError(
                f"sentence {i} is not valid Unicode: a lone surrogate {char} at character {err.start}"
            ) from None
    return texts, single


def check_flags(**flags: Any) -> None:
    """Each flag True or False: a string such as ``"no"`` would count as True."""
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {value!r}")


def check_encode_arguments(
    sentences: Any, mode: str, batch_size: Any, precision: str, **flags: Any
) -> tuple[list[str], bool]:
    """``encode``'s arguments checked before any work (``flags``: its True/False ones, by name):
    the texts as a list, and whether one sentence was given as a plain string."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if precision not in EMBEDDING_PRECISIONS:
        raise ValueError(
            f"precision must be one of {', '.join(EMBEDDING_PRECISIONS)}, got {precision!r} (the "
            "computation's fp32/bf16 is from_pretrained's dtype)"
        )
    check_flags(**flags)
    return check_texts(sentences)


# Names sentence-transformers models give one prompt: e5's config calls "passage" what
# encode_document's "document" is. A name the encoder lacks is looked up under its other name.
PROMPT_ALIASES = {"passage": "document", "document": "passage"}


def resolve_prompt(prompts: Mapping[str, str], prompt: Any, prompt_name: Any) -> str | None:
    """The prefix ``encode`` puts before each text, as sentence-transformers resolves it:
    ``prompt`` itself, else ``prompts[prompt_name]`` (``passage`` and ``document`` are one), else
    None (the backbone's own)."""
    for name, value in (("prompt", prompt), ("prompt_name", prompt_name)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str or None, got {type(value).__name__} {value!r}")
    if prompt is not None:
        if prompt_name is not None:
            log.warning("both prompt and prompt_name given: prompt_name %r is ignored", prompt_name)
        return prompt
    if prompt_name is None:
        return None
    for candidate in (prompt_name, PROMPT_ALIASES.get(prompt_name)):
        if candidate in prompts:
            return prompts[candidate]
    raise InputError(
        f"prompt_name {prompt_name!r} is not one of this encoder's prompts "
        f"({', '.join(map(repr, prompts)) or 'none'}); give prompt='...' or set encoder.prompts"
    )


def float_vectors(embeddings: Any) -> Any:
    """``embeddings`` for ``similarity``: integer vectors (``encode(precision="int8")`` or
    ``"uint8"``) as float32, since torch normalises floats only; floats as they are. (``binary``
    and ``ubinary`` vectors are packed bits, which a Hamming distance compares, not a cosine.)"""
    if isinstance(embeddings, np.ndarray) and not np.issubdtype(embeddings.dtype, np.floating):
        return embeddings.astype(np.float32)
    if isinstance(embeddings, torch.Tensor) and not embeddings.is_floating_point():
        return embeddings.float()
    return embeddings

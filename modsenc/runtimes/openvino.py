"""The OpenVINO runtime: a language's merged encoder compiled by OpenVINO, routed CPU inference.

``ModularEncoder.from_pretrained(..., runtime="openvino")`` keeps everything else as it is (the
zoo, the router, lazy per-language loading, the tokenizers and orthographies, the server's dynamic
batching) and runs each language's forward pass through an OpenVINO model built from ``export``'s
exact merge (``merged_model``: the LoRAs added into a copy of the weights; the CLA beside each FFN,
``language_encoder``, which the torch runtime runs merged too). Why OpenVINO: on the CPUs measured
in docs/benchmarks.md its compiled BERT graph runs faster than torch's eager kernels at a cosine of
0.99997 to fp32 (fused attention and layer norms, no Python between the operations).

The graph starts at the word vectors (``inputs_embeds``): the word-embedding matrix (96M of
multilingual-e5-small's 118M parameters) is not copied into every language's graph; the lookup is
done in torch, in the language's own matrix or the backbone's shared one, so a language costs its
encoder layers (about 21M parameters for e5-small) and not a whole model.

A batch is *packed*: its sentences are laid end to end in rows of about ``row_tokens`` tokens
(first fit, longest first), with a block-diagonal attention mask so a token attends only to its own
sentence, and position ids that restart at each sentence (a batch that would pad little, such as
``encode``'s length-sorted ones, keeps a sentence per row). The torch runtime packs too (varlen
attention); padding each sentence to the batch's longest instead made the server's small batches
of mixed lengths run at 0.6x the rate of sorted full ones (docs/benchmarks.md). The token states
are read off the rows back into the packed layout, and pooled (CLS or the mean over a sentence's
tokens) by the torch runtime's own ``pool``.

``precision``: ``bf16`` compiles with OpenVINO's ``INFERENCE_PRECISION_HINT=bf16`` (native on CPUs
with AMX / AVX512_BF16), ``fp32`` with ``f32``. openvino is imported only when this path is used.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from modsenc.backbone.encoder import pool
from modsenc.backbone.packing import PackedBatch
from modsenc.modules.bundle import Zoo
from modsenc.modules.export import merged_model
from modsenc.modules.modular import ModularBackbone
from modsenc.runtimes.base import Runtime, language_key
from modsenc.runtimes.batching import encode_length_sorted
from modsenc.runtimes.graph_cache import (
    cached_graph,
    compiled_folder,
    graph_key,
    openvino_cache,
    record_compiled,
)

# Bumped whenever language_encoder or _HiddenFromEmbeddings changes what a graph computes: cached
# graphs of another format are never read.
GRAPH_FORMAT = 1
log = logging.getLogger(__name__)

OPENVINO_HINTS = {"fp32": "f32", "bf16": "bf16"}


@contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Only errors from ``logger_name`` while the block runs."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def require_openvino() -> Any:
    """The ``openvino`` module, or an ImportError that says how to install it."""
    try:
        import openvino  # noqa: PLC0415
    except ImportError as err:
        raise ImportError(
            "runtime='openvino' needs OpenVINO: pip install -e '.[openvino]' (or pip install openvino)"
        ) from err
    return openvino


def language_encoder(modular: ModularBackbone, lang: str, kinds: set[str]) -> PreTrainedModel:
    """A plain model with ``lang``'s LoRAs merged and its CLA, if among ``kinds``, beside every FFN
    (``merged_model`` with ``widen_cla=False``: the CLA kind's ``merge_into``, which copies the CLA's
    matrices, so ``modular`` can drop the language later). Its word-embedding matrix is a stand-in:
    the graph is fed word vectors, looked up in torch."""
    return merged_model(modular, lang, kinds, widen_cla=False, word_embeddings=False)


class _HiddenFromEmbeddings(nn.Module):
    """What the graph computes: word vectors, a (rows, tokens, tokens) attention mask and position
    ids in, the last layer's token states out (HF BERT/XLM-R take a 3-D mask as given)."""

    def __init__(self, model: PreTrainedModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor
    ) -> torch.Tensor:
        # token types given: the model's stored ones are only max_position_embeddings long, and a
        # packed row may be longer than that (its positions restart at each sentence)
        return self.model(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            token_type_ids=torch.zeros_like(position_ids),
        ).last_hidden_state


# A batch whose padded layout wastes less than this share of its token slots runs one sentence per
# row: packing it would only widen the attention (sorted batches of 32 NTREX sentences ran 5%
# slower packed into rows of 128; random groups of 4-32 ran 1.7x faster: docs/benchmarks.md).
PACK_ABOVE_PADDING = 0.1


def pack_rows(lengths: Sequence[int], row_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into rows of at most ``max(row_tokens, longest)`` tokens:
    first fit, longest first (a row's attention costs its length squared, so rows stay short).
    A batch of nearly equal lengths keeps one sentence per row (``PACK_ABOVE_PADDING``)."""
    longest = max(lengths)
    longest_first = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if sum(lengths) >= (1 - PACK_ABOVE_PADDING) * len(lengths) * longest:
        return [[index] for index in longest_first]
    capacity = max(row_tokens, longest)
    rows: list[list[int]] = []
    room: list[int] = []
    for index in longest_first:
        row = next((r for r, free in enumerate(room) if free >= lengths[index]), None)
        if row is None:
            rows.append([])
            room.append(capacity)
            row = len(rows) - 1
        rows[row].append(index)
        room[row] -= lengths[index]
    return rows


@dataclass
class PackedRows:
    """Where each sentence of a batch sits in the graph's rows: ``place`` lays per-token values
    (word vectors, position ids) out in the rows, ``unpack`` takes the token states back."""

    attention_mask: np.ndarray  # (rows, tokens, tokens) int64: 1 within a sentence (or the padding)
    token_slots: torch.Tensor  # (total tokens,) the flat row*tokens slot of each sentence's tokens

    @classmethod
    def build(cls, lengths: Sequence[int], row_tokens: int) -> PackedRows:
        rows = pack_rows(lengths, row_tokens)
        width = max(sum(lengths[i] for i in row) for row in rows)
        # padding is segment -1 of its row: it attends to itself only, so no softmax row is empty
        segment = np.full((len(rows), width), -1, dtype=np.int64)
        first = np.zeros(len(lengths), dtype=np.int64)  # each sentence's first slot
        for r, row in enumerate(rows):
            start = 0
            for index in row:
                segment[r, start : start + lengths[index]] = index
                first[index] = r * width + start
                start += lengths[index]
        mask = (segment[:, :, None] == segment[:, None, :]).astype(np.int64)
        # slots in the sentences' order, as their token values come
        slots = np.concatenate([np.arange(f, f + n) for f, n in zip(first, lengths)])
        return cls(mask, torch.from_numpy(slots))

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, tokens)."""
        return self.attention_mask.shape[0], self.attention_mask.shape[1]

    def place(self, values: torch.Tensor) -> torch.Tensor:
        """(total tokens, ...) values in the sentences' token order -> (rows, tokens, ...), zero in
        the padding."""
        rows, width = self.shape
        placed = values.new_zeros((rows * width, *values.shape[1:]))
        placed[self.token_slots] = values
        return placed.view(rows, width, *values.shape[1:])

    def unpack(self, hidden: torch.Tensor) -> torch.Tensor:
        """(rows, tokens, dim) states -> (total tokens, dim) in the sentences' token order: the
        packed layout the one pooling (``modsenc.backbone.encoder.pool``) reads."""
        return hidden.reshape(-1, hidden.shape[-1])[self.token_slots]


def _convert(model: PreTrainedModel, position_offset: int) -> Any:
    """The torch model as an OpenVINO graph: word vectors, a 3-D mask and position ids in."""
    ov = require_openvino()
    hidden = model.config.hidden_size
    example = {
        "inputs_embeds": torch.zeros(2, 8, hidden),
        "attention_mask": torch.ones(2, 8, 8, dtype=torch.long),
        "position_ids": torch.arange(8).repeat(2, 1) + position_offset,
    }
    # Tracing warns about Python-side branches (padding_idx checks, a constant 1.0 in the mask)
    # that are fixed for this model, and reading every attribute of the model makes transformers
    # warn about its unused loss_function: neither is the user's to act on.
    with torch.no_grad(), warnings.catch_warnings(), _quiet("transformers.modeling_utils"):
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        return ov.convert_model(
            _HiddenFromEmbeddings(model.eval()),
            example_input=example,
            input=[
                ("inputs_embeds", ov.PartialShape([-1, -1, hidden]), ov.Type.f32),
                ("attention_mask", ov.PartialShape([-1, -1, -1]), ov.Type.i64),
                ("position_ids", ov.PartialShape([-1, -1]), ov.Type.i64),
            ],
            share_weights=False,  # the graph owns its weights; the merged torch copy can go
        )


def language_graph(
    build: Callable[[], PreTrainedModel], position_offset: int, cache: Path | None, parts: dict[str, Any]
) -> Any:
    """``build()``'s model converted to an OpenVINO graph, through ``cached_graph``."""
    return cached_graph(lambda: _convert(build(), position_offset), cache, parts, require_openvino())


def graph_inputs(
    ids: Sequence[Sequence[int]], word_embeddings: nn.Embedding, position_offset: int, row_tokens: int
) -> tuple[dict[str, np.ndarray], PackedRows, PackedBatch]:
    """A batch of token-id lists as the graph takes it (word vectors, mask and positions laid out
    in packed rows), with the layout to read its states back."""
    packed = PackedBatch.from_ids(ids, position_offset)
    rows = PackedRows.build(packed.seqlens, row_tokens)
    with torch.no_grad():
        words = word_embeddings(packed.input_ids).float()
    inputs = {
        "inputs_embeds": rows.place(words).numpy(),
        "attention_mask": rows.attention_mask,
        "position_ids": rows.place(packed.position_ids).numpy(),
    }
    return inputs, rows, packed


class CompiledLanguage:
    """One (language, modules) encoder compiled by OpenVINO; the word lookup and the pooling stay
    in torch, the encoder layers run on packed rows. ``graph`` (from ``language_graph``) replaces
    converting ``merged``; ``compile_cache`` is OpenVINO's own cache of compiled blobs
    (``CACHE_DIR``), which spares a restart the compilation."""

    ROW_TOKENS = 128  # a packed row's width, unless one sentence is longer

    def __init__(
        self,
        merged: PreTrainedModel | None,
        word_embeddings: nn.Embedding,
        pooling: str,
        precision: str,
        threads: int,
        position_offset: int = 0,
        row_tokens: int | None = None,
        *,
        graph: Any | None = None,
        compile_cache: Path | None = None,
    ) -> None:
        if precision not in OPENVINO_HINTS:
            raise ValueError(f"precision must be one of {tuple(OPENVINO_HINTS)}, got {precision!r}")
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        ov = require_openvino()
        self.precision, self.pooling = precision, pooling
        self.word_embeddings = word_embeddings
        self.position_offset, self.row_tokens = position_offset, row_tokens or self.ROW_TOKENS
        if graph is None:
            graph = _convert(merged, position_offset)
        core = ov.Core()
        if compile_cache is not None:  # inside graph_cache.compiled_folder's block: verified, locked
            core.set_property({"CACHE_DIR": str(compile_cache)})
        self.model = core.compile_model(
            graph,
            "CPU",
            {
                "INFERENCE_PRECISION_HINT": OPENVINO_HINTS[precision],
                "INFERENCE_NUM_THREADS": str(threads),
                "PERFORMANCE_HINT": "LATENCY",
                "NUM_STREAMS": "1",
            },
        )
        if compile_cache is not None:
            record_compiled(compile_cache)
        self._request = self.model.create_infer_request()

    def encode_batch(self, ids: Sequence[Sequence[int]]) -> torch.Tensor:
        """(len(ids), dim) fp32 sentence vectors of one batch of token-id lists, packed into rows."""
        inputs, rows, packed = graph_inputs(ids, self.word_embeddings, self.position_offset, self.row_tokens)
        hidden = torch.from_numpy(np.asarray(self._request.infer(inputs)[0], dtype=np.float32))
        return pool(rows.unpack(hidden), packed, self.pooling)


class OpenVINORuntime(Runtime):
    """One ``CompiledLanguage`` per (language, modules), built by ``prepare`` on first use from
    ``export``'s merge of the live modules and kept (its graph cached on disk) until ``drop``."""

    name = "openvino"

    def __init__(
        self,
        modular: ModularBackbone,
        zoo: Zoo,
        precision: str,
        quantize: str | None = None,
        calibration: Sequence[str] | None = None,
        verify: bool = True,
    ) -> None:
        """``quantize="int8"``: each graph quantised by NNCF (``runtimes/int8.py``), calibrated on
        ``calibration`` or the language's own sentences (``runtimes/calibration.py``); what stays
        float runs in ``precision``. ``verify``: the bundle's calibration file is hash-checked."""
        from modsenc.runtimes.int8 import INT8_SCHEMES  # noqa: PLC0415 - nncf is imported only when used

        if quantize is not None and quantize not in INT8_SCHEMES:
            raise ValueError(
                f"quantize must be None or one of {', '.join(INT8_SCHEMES)} on runtime='openvino', "
                f"got {quantize!r}"
            )
        self.modular, self.zoo, self.precision = modular, zoo, precision
        self.quantize, self.calibration, self.verify = quantize, calibration, verify
        self._compiled: dict[tuple[str | None, frozenset[str]], CompiledLanguage] = {}

    def cache_folder(self) -> Path:
        return openvino_cache()

    def prepare(self, lang: str | None, kinds: frozenset[str]) -> None:
        """``lang``'s ``kinds`` merged and compiled by OpenVINO, once (the encoder's lock held)."""
        key = language_key(lang, kinds)
        if key in self._compiled:
            return
        log.info(
            "compiling %s (%s) for OpenVINO in %s%s",
            lang,
            ", ".join(sorted(kinds)) or "backbone",
            self.precision,
            f" in {self.quantize}" if self.quantize else "",
        )
        offset = self.modular.backbone.position_offset
        cache = openvino_cache()
        parts = self._graph_parts(lang, kinds)
        graphs = cache / "graphs" if parts is not None else None
        graph = language_graph(
            lambda: language_encoder(self.modular, lang, set(kinds)), offset, graphs, parts or {}
        )
        words = self.modular.embeddings_of(lang, kinds)
        if self.quantize is not None:
            graph, parts = self._int8_graph(graph, lang, kinds, words, graphs, parts or {})
        # a bundle whose files nothing names (parts None) is compiled each time, not cached
        folder = nullcontext() if parts is None else compiled_folder(cache, graph_key(parts), self.precision)
        with folder as compile_cache:  # locked while compiling: other processes take turns
            self._compiled[key] = CompiledLanguage(
                None,
                words,
                self.modular.backbone.pooling,
                self.precision,
                torch.get_num_threads(),
                position_offset=offset,
                graph=graph,
                compile_cache=compile_cache,
            )

    def _int8_graph(
        self,
        graph: Any,
        lang: str | None,
        kinds: frozenset[str],
        words: nn.Embedding,
        graphs: Path | None,
        parts: dict[str, Any],
    ) -> tuple[Any, dict[str, Any]]:
        """``graph`` quantised in ``self.quantize`` (``runtimes/int8.py``), on ``lang``'s calibration
        sentences where the scheme reads any, cached beside it (its key adds the scheme, the NNCF
        release and the sentences' sha256), and that key's parts."""
        from modsenc.runtimes.calibration import calibration_sentences, sentences_digest  # noqa: PLC0415
        from modsenc.runtimes.int8 import (  # noqa: PLC0415
            CALIBRATED_SCHEMES,
            CALIBRATION_BATCH,
            quantize_graph,
            require_nncf,
        )

        scheme = self.quantize
        texts: list[str] = []
        if scheme in CALIBRATED_SCHEMES:
            texts, source = calibration_sentences(self.zoo, lang, bool(kinds), self.calibration, self.verify)
            log.info("calibrating %s's %s graph on %d sentences (%s)", lang, scheme, len(texts), source)

        def quantized() -> Any:  # only when the cache has no such graph: a restart skips this
            ids = sorted(self.modular.tokenize(lang, texts, kinds), key=len)  # batches as encode's
            offset, row_tokens = self.modular.backbone.position_offset, CompiledLanguage.ROW_TOKENS
            batches = [
                graph_inputs(ids[start : start + CALIBRATION_BATCH], words, offset, row_tokens)[0]
                for start in range(0, len(ids), CALIBRATION_BATCH)
            ]
            return quantize_graph(graph, batches, scheme)

        int8_parts = {
            **parts,
            "quantize": scheme,  # "int8" as before the other schemes: those graphs stay valid
            "nncf": require_nncf().__version__,
            "calibration": sentences_digest(texts) if texts else None,
        }
        return cached_graph(quantized, graphs, int8_parts, require_openvino()), int8_parts

    def _graph_parts(self, lang: str | None, kinds: frozenset[str]) -> dict[str, Any] | None:
        """What ``lang``'s graph is made of, for its on-disk cache key; None (not cached) for a
        bundle without file hashes, whose content nothing names."""
        hashes: dict[str, str] | None = {}
        if kinds:
            hashes = self.zoo.read_manifest(lang).file_sha256
        if hashes is None:
            return None
        return {
            "format": GRAPH_FORMAT,
            "openvino": require_openvino().__version__,
            "backbone": self.zoo.backbone_fingerprint(),
            "language": lang if kinds else None,
            "modules": sorted(kinds),
            "files": hashes,
        }

    def encode_tokens(
        self,
        lang: str | None,
        kinds: frozenset[str],
        token_ids: Sequence[Sequence[int]],
        batch_size: int,
        show_progress_bar: bool = False,
    ) -> torch.Tensor:
        self.prepare(lang, kinds)
        compiled = self._compiled[language_key(lang, kinds)]
        dim = self.modular.backbone.hidden_size
        return encode_length_sorted(token_ids, batch_size, dim, compiled.encode_batch, show_progress_bar)

    def drop(self, lang: str) -> None:
        for key in [k for k in self._compiled if k[0] == lang]:
            del self._compiled[key]

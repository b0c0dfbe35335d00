"""A language's merged encoder compiled by OpenVINO: routed CPU inference at OpenVINO's rate.

``ModularEncoder(..., runtime="openvino")`` keeps everything else as it is (the zoo, the router,
lazy per-language loading, the tokenizers and orthographies, the server's dynamic batching) and
runs each language's forward pass through an OpenVINO model built from ``export``'s exact merge
(``merged_model``: the LoRAs added into a copy of the weights; the CLA beside each FFN,
``language_encoder``). Why
OpenVINO: on the CPUs measured in docs/benchmarks.md its BERT graph runs 1.7x sentence-transformers'
ONNX int8 at a cosine of 0.99997 to fp32, where modsenc's torch path with unmerged LoRAs and one
attention call per run of equal lengths matches ONNX int8 only.

The graph starts at the word vectors (``inputs_embeds``): the word-embedding matrix (96M of
multilingual-e5-small's 118M parameters) is not copied into every language's graph; the lookup is
done in torch, in the language's own matrix or the backbone's shared one, so a language costs its
encoder layers (about 21M parameters for e5-small) and not a whole model. Pooling (CLS or the mean
over real tokens) is in the graph. A batch is padded to its longest sentence; ``encode`` sorts by
length first, so little is spent on padding.

``precision``: ``bf16`` compiles with OpenVINO's ``INFERENCE_PRECISION_HINT=bf16`` (native on CPUs
with AMX / AVX512_BF16), ``fp32`` with ``f32``. openvino is imported only when this path is used.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from modsenc.backbone.packing import PackedBatch
from modsenc.modules.export import check_parallel_layout, merged_model
from modsenc.modules.modular import ModularBackbone, module_name

OPENVINO_HINTS = {"fp32": "f32", "bf16": "bf16"}


def require_openvino() -> Any:
    """The ``openvino`` module, or an ImportError that says how to install it."""
    try:
        import openvino  # noqa: PLC0415
    except ImportError as err:
        raise ImportError(
            "runtime='openvino' needs OpenVINO: pip install 'modsenc[openvino]' (or pip install openvino)"
        ) from err
    return openvino


class _OutputWithParallelBottleneck(nn.Module):
    """A BERT/XLM-R layer's FFN output with the CLA beside it, unmerged:
    ``LayerNorm(dropout(dense(h)) + s * up(act(down(x))) + x)`` for the FFN input ``x``, which is
    what adapters computes for ParBnConfig in eval mode (the export's widening is this merged, and
    exists only when ``act`` is the FFN's own activation; here any activation works)."""

    def __init__(self, output: nn.Module, adapter: nn.Module) -> None:
        super().__init__()
        check_parallel_layout(adapter)
        self.output = output
        self.down, self.up = adapter.adapter_down, adapter.adapter_up
        self.scaling = float(adapter.scaling)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        ffn = self.output.dropout(self.output.dense(hidden_states))
        bottleneck = self.up(self.down(input_tensor)) * self.scaling
        return self.output.LayerNorm(ffn + bottleneck + input_tensor)


def language_encoder(modular: ModularBackbone, lang: str, kinds: set[str]) -> PreTrainedModel:
    """A plain model with ``lang``'s LoRAs merged (``merged_model``) and its CLA, if among ``kinds``,
    beside every FFN. The CLA's matrices are copied, so ``modular`` can drop the language later.
    Its word-embedding matrix is a stand-in: the graph is fed word vectors, looked up in torch."""
    plain = merged_model(modular, lang, kinds, widen_cla=False, word_embeddings=False)
    if "cla" in kinds:
        name = module_name(lang, "cla")
        for layer, live in zip(plain.encoder.layer, modular.backbone.model.encoder.layer):
            layer.output = _OutputWithParallelBottleneck(
                layer.output, copy.deepcopy(live.output.adapters[name])
            )
    return plain.eval()


class _PooledFromEmbeddings(nn.Module):
    """What the graph computes: word vectors and a mask in, pooled sentence vectors out."""

    def __init__(self, model: PreTrainedModel, pooling: str) -> None:
        super().__init__()
        self.model = model
        self.pooling = pooling

    def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.model(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class CompiledLanguage:
    """One (language, modules) encoder compiled by OpenVINO; the word lookup stays in torch."""

    def __init__(
        self,
        merged: PreTrainedModel,
        word_embeddings: nn.Embedding,
        pooling: str,
        precision: str,
        threads: int,
    ) -> None:
        if precision not in OPENVINO_HINTS:
            raise ValueError(f"precision must be one of {tuple(OPENVINO_HINTS)}, got {precision!r}")
        ov = require_openvino()
        self.precision = precision
        self.word_embeddings = word_embeddings
        hidden = merged.config.hidden_size
        wrapper = _PooledFromEmbeddings(merged.eval(), pooling)
        example = {
            "inputs_embeds": torch.zeros(2, 8, hidden),
            "attention_mask": torch.ones(2, 8, dtype=torch.long),
        }
        # Tracing warns about Python-side branches (padding_idx checks, a constant 1.0 in the mask)
        # that are fixed for this model; they are not the user's to act on.
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            graph = ov.convert_model(
                wrapper,
                example_input=example,
                input=[
                    ("inputs_embeds", ov.PartialShape([-1, -1, hidden]), ov.Type.f32),
                    ("attention_mask", ov.PartialShape([-1, -1]), ov.Type.i64),
                ],
                share_weights=False,  # the graph owns its weights; the merged torch copy can go
            )
        self.model = ov.Core().compile_model(
            graph,
            "CPU",
            {
                "INFERENCE_PRECISION_HINT": OPENVINO_HINTS[precision],
                "INFERENCE_NUM_THREADS": str(threads),
                "PERFORMANCE_HINT": "LATENCY",
                "NUM_STREAMS": "1",
            },
        )
        self._request = self.model.create_infer_request()

    def encode_ids(self, ids: Sequence[Sequence[int]], batch_size: int) -> torch.Tensor:
        """Sentence vectors (fp32) for token-id lists, in their order; batches by length."""
        out = torch.empty(len(ids), self.word_embeddings.embedding_dim)
        order = np.argsort([-len(seq) for seq in ids], kind="stable")
        for start in range(0, len(ids), batch_size):
            index = order[start : start + batch_size]
            batch = PackedBatch.from_ids([ids[i] for i in index])
            with torch.no_grad():
                vectors, mask = batch.pad(self.word_embeddings(batch.input_ids).float())
            inputs = {"inputs_embeds": vectors.numpy(), "attention_mask": mask.long().numpy()}
            result = self._request.infer(inputs)
            out[torch.as_tensor(index)] = torch.from_numpy(np.array(result[0], dtype=np.float32))
        return out

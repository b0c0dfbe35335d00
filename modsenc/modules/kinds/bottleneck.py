"""The arithmetic of merging a parallel bottleneck adapter (adapters' ``ParBnConfig``: the CLA)
into the feed-forward block it sits beside; the ``cla`` kind's ``merge_into`` calls it, for export
and for the OpenVINO runtime alike. Kept apart from ``alignment.py`` because it needs torch at
import (an ``nn.Module``), and the kinds' registry is imported without torch.

The bottleneck computes ``FFN(x) + s * up(act(down(x)))``. adapters merges only LoRA-type adapters,
so modsenc merges it itself, exactly, when ``act`` is the backbone's own FFN activation: the
bottleneck then *is* ``r`` extra FFN neurons, i.e. ``intermediate.dense`` gains the rows of
``down`` and ``output.dense`` the columns of ``s * up`` (``widen_ffn``). adapters' default ReLU
beside BERT's GELU FFN is merged through ``GELU(k z) / k``, within ``0.17 / k`` of ``ReLU(z)`` per
unit (``RELU_AS_GELU_SCALE``): the export's vectors are the zoo's to a cosine of 0.9999 or more
(tests/modules/test_export_merge.py, docs/results.md). Any other pair of activations is refused.
Where any activation must work (the OpenVINO graph), ``OutputWithParallelBottleneck`` runs the
bottleneck unmerged beside the FFN instead.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.activations import get_activation

# A ReLU bottleneck beside a GELU FFN (adapters' default CLA beside e5's FFN) becomes GELU neurons:
# GELU(k z) / k = z * Phi(k z) differs from ReLU(z) = max(z, 0) by at most 0.17 / k (largest at
# |z| = 0.75 / k, and below 1.5e-6 / k once |z| > 5 / k), so the bottleneck's rows of W_in are
# scaled by k and its columns of W_out by 1 / k. k = 1000 keeps each unit within 1.7e-4 of ReLU's
# value while k z stays inside fp16's range (65504) for pre-activations below 65.
RELU_AS_GELU_SCALE = 1000.0


def check_parallel_layout(adapter: nn.Module) -> None:
    """The CLA must be ParBnConfig's layout: ``LayerNorm(FFN(x) + s * up(act(down(x))) + x)``."""
    if not (adapter.residual_before_ln and adapter.original_ln_after and not adapter.original_ln_before):
        raise ValueError("only ParBnConfig's layout (added before the FFN's LayerNorm) can be merged")


def _activation_scale(adapter_act: str, ffn_act: str) -> float:
    """By how much the bottleneck's units are scaled so that the FFN's activation computes the
    adapter's: 1 for the same activation, ``RELU_AS_GELU_SCALE`` for ReLU beside (exact) GELU."""
    if adapter_act == ffn_act:
        return 1.0
    if adapter_act == "ReLU" and ffn_act == "GELUActivation":
        return RELU_AS_GELU_SCALE
    raise ValueError(
        f"the CLA uses {adapter_act}, the backbone's FFN {ffn_act}: no merge exists. Export with "
        "mode='mono', or train the CLA with cla.adapter.non_linearity set to the FFN's activation"
    )


def widen_ffn(layer: nn.Module, adapter: nn.Module, hidden_act: str) -> None:
    """Fold a parallel bottleneck into the FFN of ``layer`` (in place) by widening it."""
    down, act = adapter.adapter_down[0], adapter.adapter_down[1]
    up = adapter.adapter_up
    check_parallel_layout(adapter)
    k = _activation_scale(type(act.f).__name__, type(get_activation(hidden_act)).__name__)
    scaling = float(adapter.scaling)
    inter, out = layer.intermediate.dense, layer.output.dense
    wide_in = nn.Linear(inter.in_features, inter.out_features + down.out_features)
    wide_out = nn.Linear(out.in_features + up.in_features, out.out_features)
    with torch.no_grad():
        wide_in.weight.copy_(torch.cat([inter.weight, k * down.weight]))
        wide_in.bias.copy_(torch.cat([inter.bias, k * down.bias]))
        wide_out.weight.copy_(torch.cat([out.weight, (scaling / k) * up.weight], dim=1))
        wide_out.bias.copy_(out.bias + scaling * up.bias)
    layer.intermediate.dense, layer.output.dense = wide_in, wide_out


class OutputWithParallelBottleneck(nn.Module):
    """A BERT/XLM-R layer's FFN output with the CLA beside it, unmerged:
    ``LayerNorm(dropout(dense(h)) + s * up(act(down(x))) + x)`` for the FFN input ``x``, which is
    what adapters computes for ParBnConfig in eval mode (``widen_ffn`` is this merged, and exists
    only when ``act`` is the FFN's own activation; here any activation works)."""

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

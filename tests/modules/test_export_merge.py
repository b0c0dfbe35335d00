"""export's merge of a parallel bottleneck (the CLA) into the feed-forward block it sits beside, on a
tiny backbone with random adapter weights (no training, no zoo): exact for the FFN's own activation,
through scaled GELU neurons for adapters' default ReLU."""

from __future__ import annotations

import pytest
import torch
from adapters import ParBnConfig, SeqBnConfig

from modsenc.backbone import Backbone
from modsenc.modules.kinds.bottleneck import RELU_AS_GELU_SCALE, widen_ffn
from modsenc.modules.modular import ModularBackbone
from tests._zoo import HELD_OUT

TEXTS = HELD_OUT["uz"] + HELD_OUT["en"]


def _modular_with_cla(backbone_dir, config) -> ModularBackbone:
    modular = ModularBackbone(Backbone.from_pretrained(backbone_dir, attention="sdpa")).eval()
    modular.add_alignment("uz", config)
    torch.manual_seed(0)
    with torch.no_grad():  # adapters starts `up` at zero (an identity adapter): make it matter
        for p in modular.module_parameters("uz", "cla"):
            p.normal_(std=0.3)
    return modular


def test_a_gelu_cla_merges_into_wider_ffn_layers_exactly(tiny_backbone_dir) -> None:
    modular = _modular_with_cla(tiny_backbone_dir, ParBnConfig(non_linearity="gelu"))
    model = modular.backbone.model
    with_cla = modular.encode(TEXTS, "uz", ["cla"], convert_to_tensor=True)
    bare = modular.encode(TEXTS, None, convert_to_tensor=True)
    assert (with_cla - bare).abs().max() > 0.1  # the adapter changes the vectors

    layer = model.encoder.layer[0]
    adapter = layer.output.adapters["uz_cla"]
    down, up, s = adapter.adapter_down[0], adapter.adapter_up, float(adapter.scaling)
    assert s == 4.0  # ParBn's default scaling: a factor the merge must apply
    inter_w, inter_b = layer.intermediate.dense.weight.clone(), layer.intermediate.dense.bias.clone()
    out_w, out_b = layer.output.dense.weight.clone(), layer.output.dense.bias.clone()
    for each in model.encoder.layer:
        widen_ffn(each, each.output.adapters["uz_cla"], model.config.hidden_act)

    # FFN(x) + s up(act(down x)) = W_out act(W_in x + b_in) + b_out + s (W_up act(W_down x + b_down) + b_up):
    # the bottleneck's r = 16 units are r more FFN neurons, W_in gains the rows of W_down and W_out
    # the columns of s W_up; the output bias absorbs s b_up.
    assert layer.intermediate.dense.weight.shape == (64 + 16, 32) and layer.output.dense.weight.shape == (
        32,
        80,
    )
    assert torch.equal(layer.intermediate.dense.weight, torch.cat([inter_w, down.weight]))
    assert torch.equal(layer.intermediate.dense.bias, torch.cat([inter_b, down.bias]))
    assert torch.equal(layer.output.dense.weight, torch.cat([out_w, s * up.weight], dim=1))
    torch.testing.assert_close(layer.output.dense.bias, out_b + s * up.bias, rtol=0, atol=0)
    # With the adapter switched off, the widened backbone gives the adapted vectors.
    merged = modular.encode(TEXTS, None, convert_to_tensor=True)
    torch.testing.assert_close(merged, with_cla, rtol=1e-5, atol=1e-5)


def test_gelu_of_scaled_inputs_is_relu_within_the_documented_bound() -> None:
    """max_z |GELU(k z) / k - ReLU(z)| = max_t t * Phi(-t) / k = 0.1700 / k, at t = k |z| = 0.752
    (t Phi(-t) is largest where Phi(-t) = t phi(t)); 5 / k away from 0 it is below 1.5e-6 / k."""
    k = RELU_AS_GELU_SCALE
    z = torch.linspace(-0.05, 0.05, 200_001, dtype=torch.float64)
    error = (torch.nn.functional.gelu(k * z) / k - torch.relu(z)).abs()
    assert 0.1699 / k < error.max().item() < 0.1701 / k
    assert abs(z[error.argmax()].abs().item() * k - 0.752) < 0.002
    assert error[z.abs() > 5 / k].max().item() < 1.5e-6 / k


def test_a_relu_cla_merges_into_scaled_gelu_neurons(tiny_backbone_dir) -> None:
    modular = _modular_with_cla(tiny_backbone_dir, ParBnConfig())  # adapters' default: ReLU
    model = modular.backbone.model
    with_cla = modular.encode(TEXTS, "uz", ["cla"], convert_to_tensor=True)
    layer = model.encoder.layer[0]
    adapter = layer.output.adapters["uz_cla"]
    down, up, s = adapter.adapter_down[0], adapter.adapter_up, float(adapter.scaling)
    assert type(adapter.adapter_down[1].f).__name__ == "ReLU" and model.config.hidden_act == "gelu"
    out_w = layer.output.dense.weight.clone()
    for each in model.encoder.layer:
        widen_ffn(each, each.output.adapters["uz_cla"], model.config.hidden_act)
    k = RELU_AS_GELU_SCALE
    assert torch.equal(layer.intermediate.dense.weight[64:], k * down.weight)
    assert torch.equal(layer.intermediate.dense.bias[64:], k * down.bias)
    torch.testing.assert_close(layer.output.dense.weight, torch.cat([out_w, (s / k) * up.weight], dim=1))
    merged = modular.encode(TEXTS, None, convert_to_tensor=True)
    cosine = torch.nn.functional.cosine_similarity(merged, with_cla)
    assert cosine.min().item() > 0.99999 and (merged - with_cla).abs().max().item() < 1e-3


LAYOUT = r"^only ParBnConfig's layout \(added before the FFN's LayerNorm\) can be merged$"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            ParBnConfig(non_linearity="silu"),
            r"^the CLA uses SiLUActivation, the backbone's FFN GELUActivation: no merge exists\. Export with "
            r"mode='mono', or train the CLA with cla\.adapter\.non_linearity set to the FFN's activation$",
        ),
        (SeqBnConfig(non_linearity="gelu"), LAYOUT),  # after the FFN's output, before its LayerNorm
        (ParBnConfig(non_linearity="gelu", residual_before_ln=False), LAYOUT),
        (ParBnConfig(non_linearity="gelu", original_ln_after=False), LAYOUT),
    ],
)
def test_only_a_merge_that_reproduces_the_cla_is_done(tiny_backbone_dir, config, message) -> None:
    modular = _modular_with_cla(tiny_backbone_dir, config)
    layer = modular.backbone.model.encoder.layer[0]
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    with pytest.raises(ValueError, match=message):
        widen_ffn(layer, layer.output.adapters["uz_cla"], "gelu")
    after = layer.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)

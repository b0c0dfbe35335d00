"""The torch runtime merges each (language, modules) into a copy of the encoder layers: the same
vectors as the modules live (to fp32 rounding), the live backbone untouched, the copy dropped with
its language, and live modules where merging is impossible (a torchao int8 backbone)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from modsenc.encoder import ModularEncoder
from modsenc.runtimes.torch import TorchRuntime
from tests.modules.test_openvino_runtime import TEXTS


def _live_twin(encoder: ModularEncoder) -> ModularEncoder:
    """The same zoo, backbone and router, with the torch runtime's modules live."""
    runtime = TorchRuntime(encoder.modular, encoder.precision, modules="live")
    return ModularEncoder(encoder.zoo, encoder.modular, encoder.router, runtime, verify=False)


@pytest.mark.parametrize("mode", ["cross", "mono"])
def test_merged_modules_give_the_live_vectors_and_leave_the_backbone_as_it_was(zoo_dir, mode) -> None:
    encoder = ModularEncoder.from_pretrained(zoo_dir, runtime="torch", dtype="fp32", verify=False)
    assert encoder._runtime.modules == "merged"
    texts, langs = [], []
    for lang in ("uz", "kk", "en"):  # uz and kk have their own vocabularies (the vocab kind)
        texts += TEXTS[lang]
        langs += [lang] * len(TEXTS[lang])
    for lang in ("uz", "kk", "en"):
        encoder.load_language(lang)
    before = {k: v.clone() for k, v in encoder.modular.backbone.state_dict().items()}
    merged = encoder.encode(texts, lang=langs, mode=mode)
    live = _live_twin(encoder).encode(texts, lang=langs, mode=mode)
    np.testing.assert_allclose(merged, live, atol=2e-6)
    after = encoder.modular.backbone.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    # one copy per (language, modules) used, forgotten with its language
    assert {"uz", "kk"} <= {key[0] for key in encoder._runtime._merged}
    encoder.unload_language("uz")
    copies = {key[0] for key in encoder._runtime._merged}
    assert "uz" not in copies and "kk" in copies


def test_in_bf16_the_copy_keeps_its_linear_weights_in_bf16_and_the_rest_in_fp32(zoo_dir) -> None:
    encoder = ModularEncoder.from_pretrained(zoo_dir, runtime="torch", dtype="bf16", verify=False)
    got = encoder.encode(TEXTS["uz"], lang="uz")
    (copy,) = [m for (lang, _), m in encoder._runtime._merged.items() if lang == "uz"]
    linears = [m for m in copy.layers.modules() if isinstance(m, torch.nn.Linear)]
    norms = [m for m in copy.layers.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears)
    assert norms and all(m.weight.dtype == torch.float32 for m in norms)
    # the live modules under bf16 autocast: the same products, rounded at other places
    live = _live_twin(encoder).encode(TEXTS["uz"], lang="uz")
    cosines = (got * live).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(live, axis=1))
    assert cosines.min() > 0.999


def test_an_int8_backbone_runs_its_modules_live_and_merged_is_refused_there(zoo_dir) -> None:
    pytest.importorskip("torchao")
    encoder = ModularEncoder.from_pretrained(zoo_dir, runtime="torch", quantize="int8", verify=False)
    assert encoder._runtime.modules == "live"
    assert encoder.encode(TEXTS["uz"], lang="uz").shape[0] == len(TEXTS["uz"])
    with pytest.raises(ValueError, match="an int8 .torchao. backbone cannot take merged modules"):
        TorchRuntime(encoder.modular, "fp32", modules="merged")
    with pytest.raises(ValueError, match="modules must be one of merged, live, got 'fused'"):
        TorchRuntime(encoder.modular, "fp32", modules="fused")

"""int8 quantisation of a zoo's backbone (torchao), with language modules loaded before and after."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from modsenc.backbone import Backbone
from modsenc.backbone.quantization import check_quantization, is_quantized, quantize_linears
from modsenc.cli import main
from modsenc.encoder import ModularEncoder
from modsenc.eval.sts import row_cosines
from modsenc.serving.app import ServeConfig
from tests._zoo import HELD_OUT, write_sts

pytest.importorskip("torchao")
from torchao.utils import TorchAOBaseTensor  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def encoders(zoo_dir) -> tuple[ModularEncoder, ModularEncoder]:
    fp32 = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")
    int8 = ModularEncoder.from_pretrained(
        zoo_dir, device="cpu", languages=["uz"], quantize="int8", runtime="torch"
    )
    return fp32, int8


def test_only_the_backbones_linear_weights_become_int8(encoders) -> None:
    _, int8 = encoders
    assert int8.quantization == "int8"
    layer = int8.modular.backbone.model.encoder.layer[0]
    # The base weight under peft's and adapters' wrappers is the int8 tensor; the LoRA matrices
    # peft adds for uz, and the word embeddings, stay float32.
    query = layer.attention.self.query
    assert isinstance(query.get_base_layer().weight, TorchAOBaseTensor)
    lora_a = [m for n, m in int8.modular.named_modules() if n.endswith("lora_A.uz_se")]
    assert lora_a, "uz's SE LoRA is not loaded"
    for module in lora_a:
        assert type(module.weight) is torch.nn.Parameter and module.weight.dtype == torch.float32
    embeddings = int8.modular.backbone.word_embeddings.weight
    assert not isinstance(embeddings, TorchAOBaseTensor) and embeddings.dtype == torch.float32


@pytest.mark.parametrize("lang", ["uz", "kk", "de", "en"])  # uz loaded before, the others after
def test_int8_vectors_stay_close_to_float32_and_keep_each_languages_modules(encoders, lang) -> None:
    fp32, int8 = encoders
    texts = HELD_OUT[lang]
    exact = fp32.encode(texts, lang=lang, mode="cross")
    quantised = int8.encode(texts, lang=lang, mode="cross")
    assert quantised.dtype == np.float32 and np.isfinite(quantised).all()
    assert row_cosines(exact, quantised).min() > 0.99
    # The modules still act: the int8 vectors lie nearer to float32 *with* this language's modules
    # than to the float32 bare backbone (what a quantised model that lost them would give).
    bare = Backbone.from_pretrained(fp32.zoo.backbone_dir).eval().encode(texts)
    assert row_cosines(exact, quantised).mean() > row_cosines(bare, quantised).mean()


def test_mode_mono_leaves_out_the_alignment_adapter_under_int8_too(encoders) -> None:
    fp32, int8 = encoders
    texts = HELD_OUT["uz"]
    mono8, cross8 = int8.encode(texts, lang="uz", mode="mono"), int8.encode(texts, lang="uz", mode="cross")
    mono32 = fp32.encode(texts, lang="uz", mode="mono")
    assert row_cosines(mono32, mono8).mean() > row_cosines(mono32, cross8).mean()


def test_cli_encode_quantize_int8(encoders, zoo_dir, tmp_path) -> None:
    _, int8 = encoders
    source = tmp_path / "uz.txt"
    source.write_text("\n".join(HELD_OUT["uz"]) + "\n", encoding="utf-8")
    out = tmp_path / "uz.npy"
    args = ["encode", "--zoo", str(zoo_dir), "--lang", "uz", "--input", str(source), "--output", str(out)]
    result = CliRunner().invoke(main, [*args, "--quantize", "int8", "--runtime", "torch"])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(np.load(out), int8.encode(HELD_OUT["uz"], lang="uz"), atol=1e-5)


def test_quantize_linears_and_its_errors(monkeypatch) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(0))
    expected = model(x)
    assert not is_quantized(model)
    assert quantize_linears(model) is model and is_quantized(model)
    got = model(x)
    assert torch.nn.functional.cosine_similarity(got, expected).min() > 0.99
    assert check_quantization(None) is None and check_quantization("none") is None
    choices = "none, int8, int8-mixed, int8-weights"
    with pytest.raises(ValueError, match=rf"quantize must be one of {choices}; got 'int4'"):
        check_quantization("int4")
    monkeypatch.setitem(sys.modules, "torchao.quantization", None)  # as if torchao were not installed
    with pytest.raises(ImportError, match=r"needs torchao: pip install -e '\.\[quantize\]'"):
        quantize_linears(torch.nn.Linear(4, 4))
    with pytest.raises(ImportError, match=r"quantize='int8' needs torchao"):  # the server: before loading
        ServeConfig("any-zoo", quantize="int8", runtime="torch").check()


def test_cli_eval_quantize_int8(tiny_backbone_dir, tmp_path) -> None:
    sts = tmp_path / "sts.tsv"
    rows = [
        ("en", "en", "A man is playing a guitar.", "A man plays the guitar.", 4.8),
        ("en", "en", "A woman is slicing an onion.", "Someone is cutting an onion.", 4.0),
        ("en", "en", "A dog runs in the park.", "The stock market fell today.", 0.2),
        ("en", "en", "Two children are swimming.", "Kids swim in a pool.", 3.9),
    ]
    write_sts(sts, rows)
    report = tmp_path / "int8.json"
    args = ["eval", str(tiny_backbone_dir), "--sts", str(sts), "--quantize", "int8", "--json", str(report)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["quantize"] == "int8" and "en-en" in data["sts"]["sts.tsv"]["spearman"]
    bad = CliRunner().invoke(main, ["eval", str(tiny_backbone_dir), "--sts", str(sts), "--quantize", "int4"])
    assert bad.exit_code == 2 and "'int4' is not one of 'none', 'int8'" in bad.output

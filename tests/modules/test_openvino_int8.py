"""runtime="openvino", quantize="int8": each language's merged graph quantised by NNCF on its own
bundle's sentences stays close to fp32, routed per sentence in both modes."""

from __future__ import annotations

import numpy as np
import pytest

from modsenc.encoder import ModularEncoder
from modsenc.modules.bundle import CALIBRATION_FILE, Zoo
from modsenc.modules.manifest import BundleIntegrityError
from modsenc.runtimes.calibration import CALIBRATION_SENTENCES, calibration_sentences, even_sample
from tests.modules.test_openvino_runtime import TEXTS, _cosines, graph_cache  # noqa: F401 - its fixture too


def test_even_sample_spreads_over_the_distinct_texts_by_hand() -> None:
    texts = ["a", "b", " a ", "c", "", "d", "e", "f"]  # distinct, stripped: a b c d e f
    assert even_sample(texts, 3) == ["a", "c", "e"]  # step 6/3 = 2: indices 0, 2, 4
    assert even_sample(texts, 10) == ["a", "b", "c", "d", "e", "f"]


@pytest.mark.parametrize("mode", ["cross", "mono"])
def test_int8_graphs_of_a_two_language_zoo_stay_within_cosine_099_of_fp32(zoo_dir, mode) -> None:
    pytest.importorskip("openvino")
    pytest.importorskip("nncf")
    texts, langs = [], []
    for lang in ("uz", "kk", "en"):
        texts += TEXTS[lang]
        langs += [lang] * len(TEXTS[lang])
    fp32 = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False, runtime="torch")
    int8 = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino", quantize="int8")
    expected = fp32.encode(texts, lang=langs, mode=mode)
    got = int8.encode(texts, lang=langs, mode=mode, batch_size=2)
    assert int8.quantization == "int8" and int8.runtime == "openvino"
    assert _cosines(got, expected).min() >= 0.99
    # the graphs really are int8: not the fp32 graph under another name
    compiled = int8._runtime._compiled[("uz", frozenset(int8._kinds("uz", mode)))]
    precisions = {
        op.get_rt_info()["runtimePrecision"].astype(str)
        for op in compiled.model.get_runtime_model().get_ops()
        if op.get_rt_info()["layerType"].astype(str) == "FullyConnected"
    }
    assert precisions & {"u8", "i8"}


def test_the_calibration_sentences_come_from_the_bundle(zoo_dir, tmp_path, monkeypatch) -> None:
    zoo = Zoo(zoo_dir)
    written = (zoo.bundle_dir("uz") / CALIBRATION_FILE).read_text(encoding="utf-8").splitlines()
    assert 0 < len(written) <= CALIBRATION_SENTENCES and len(set(written)) == len(written)
    texts, source = calibration_sentences(zoo, "uz", True, None)
    assert (texts, source) == (written, "uz bundle")
    assert calibration_sentences(zoo, "uz", True, ["one", "two"]) == (["one", "two"], "given")
    texts, source = calibration_sentences(zoo, None, False, None)  # the backbone's own graph
    assert source == "demo corpus, all languages" and len(texts) == CALIBRATION_SENTENCES

    # the graph is quantised on exactly those sentences, tokenised as encode tokenises them
    pytest.importorskip("openvino")
    pytest.importorskip("nncf")
    import modsenc.runtimes.int8 as int8_module

    seen: list[int] = []
    real = int8_module.quantize_graph

    def counting(graph, inputs, scheme):
        # real tokens: padding slots get zero word vectors
        seen.append(sum(int((np.abs(batch["inputs_embeds"]).sum(-1) > 0).sum()) for batch in inputs))
        return real(graph, inputs, scheme)

    monkeypatch.setattr(int8_module, "quantize_graph", counting)
    monkeypatch.setenv("MODSENC_CACHE", str(tmp_path / "cache"))  # quantised here, not read back
    encoder = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino", quantize="int8")
    encoder.encode(TEXTS["uz"], lang="uz")
    kinds = encoder._kinds("uz", "cross")
    tokens = sum(len(ids) for ids in encoder.modular.tokenize("uz", written, kinds))
    assert seen == [tokens]  # one quantisation (uz), fed every calibration token


def test_a_damaged_calibration_file_is_refused(zoo_dir, tmp_path) -> None:
    import shutil

    copy = tmp_path / "zoo"
    shutil.copytree(zoo_dir, copy, symlinks=True)
    path = copy / "uz" / CALIBRATION_FILE
    path.write_text("something else\n", encoding="utf-8")
    with pytest.raises(BundleIntegrityError, match="calibration.txt is damaged"):
        calibration_sentences(Zoo(copy), "uz", True, None)


def _matmul_precisions(encoder: ModularEncoder, lang: str, mode: str) -> list[str]:
    """The runtime precision of each FullyConnected (MatMul) of ``lang``'s compiled graph, in order."""
    compiled = encoder._runtime._compiled[(lang, frozenset(encoder._kinds(lang, mode)))]
    return [
        op.get_rt_info()["runtimePrecision"].astype(str)
        for op in compiled.model.get_runtime_model().get_ops()
        if op.get_rt_info()["layerType"].astype(str) == "FullyConnected"
    ]


def test_int8_mixed_keeps_the_ffn_outputs_float_and_int8_weights_reads_no_calibration(
    zoo_dir, monkeypatch
) -> None:
    pytest.importorskip("openvino")
    pytest.importorskip("nncf")
    import modsenc.runtimes.calibration as calibration_module

    texts = TEXTS["uz"]
    fp32 = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False, runtime="torch")
    expected = fp32.encode(texts, lang="uz", mode="mono")
    mixed = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino", quantize="int8-mixed")
    got = mixed.encode(texts, lang="uz", mode="mono")
    assert _cosines(got, expected).min() >= 0.99
    precisions = _matmul_precisions(mixed, "uz", "mono")
    layers = fp32.modular.backbone.config.num_hidden_layers
    # six MatMuls a layer (q, k, v, attention output, FFN in, FFN out): the FFN outputs stay f32
    assert len(precisions) == 6 * layers
    assert precisions.count("f32") == layers and {"u8", "i8"} & set(precisions)

    def no_calibration(*args, **kwargs):
        raise AssertionError("int8-weights read calibration sentences")

    monkeypatch.setattr(calibration_module, "calibration_sentences", no_calibration)
    weights = ModularEncoder.from_pretrained(
        zoo_dir, dtype="fp32", runtime="openvino", quantize="int8-weights"
    )
    assert _cosines(weights.encode(texts, lang="uz", mode="mono"), expected).min() >= 0.99


def test_the_nncf_schemes_are_refused_on_the_torch_runtime_and_calibration_where_unread(zoo_dir) -> None:
    with pytest.raises(ValueError, match="quantize='int8-mixed' is an NNCF scheme of runtime='openvino'"):
        ModularEncoder.from_pretrained(zoo_dir, runtime="torch", quantize="int8-mixed")
    with pytest.raises(ValueError, match="calibration sentences are read only by runtime='openvino' with"):
        ModularEncoder.from_pretrained(
            zoo_dir, runtime="openvino", quantize="int8-weights", calibration=["one sentence"]
        )

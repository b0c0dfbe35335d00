"""runtime="openvino", quantize="int8": each language's merged graph quantised by NNCF on its own
bundle's sentences stays close to fp32, routed per sentence in both modes; and what runtime="auto"
chooses on each kind of CPU (runtimes/auto.py's written rules)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from modsenc.encoder import ModularEncoder
from modsenc.modules.bundle import CALIBRATION_FILE, Zoo
from modsenc.modules.manifest import BundleIntegrityError
from modsenc.runtimes.auto import AVX2_CHOICE, choose_runtime
from modsenc.runtimes.calibration import CALIBRATION_SENTENCES, calibration_sentences, even_sample

TEXTS = {
    "uz": ["Salom, dunyo!", "Bugun havo juda yaxshi.", "Men kitob o'qiyapman va choy ichaman."],
    "kk": ["Сәлем, әлем!", "Бүгін ауа райы өте жақсы."],
    "en": ["Hello, world!", "The weather is very nice today, so we went for a long walk."],
}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(1)


@pytest.fixture(scope="module", autouse=True)
def graph_cache(tmp_path_factory):
    """Graphs and compiled blobs go to a folder of this module's, not ~/.cache."""
    folder = tmp_path_factory.mktemp("modsenc_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MODSENC_CACHE", str(folder))
        yield folder


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
    fp32 = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False)
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

    def counting(graph, inputs):
        # real tokens: padding slots get zero word vectors
        seen.append(sum(int((np.abs(batch["inputs_embeds"]).sum(-1) > 0).sum()) for batch in inputs))
        return real(graph, inputs)

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


CPU = torch.device("cpu")
BOTH = frozenset({"openvino", "nncf"})


@pytest.mark.parametrize(
    ("device", "flags", "installed", "expected"),
    [
        (torch.device("cuda"), frozenset({"amx_bf16"}), BOTH, ("torch", "auto", None)),
        (CPU, frozenset({"amx_bf16", "avx512_vnni"}), frozenset(), ("torch", "auto", None)),
        (
            CPU,
            frozenset({"amx_bf16", "amx_int8", "avx512_vnni", "avx512_bf16"}),
            BOTH,
            ("openvino", "bf16", None),
        ),
        (CPU, frozenset({"avx512_vnni", "avx512_bf16"}), BOTH, ("openvino", "auto", "int8")),
        (CPU, frozenset({"avx512_vnni"}), frozenset({"openvino"}), ("openvino", "auto", None)),
        (
            CPU,
            frozenset({"avx2", "fma"}),
            BOTH,
            (AVX2_CHOICE.runtime, AVX2_CHOICE.dtype, AVX2_CHOICE.quantize),
        ),
    ],
)
def test_auto_picks_by_the_written_rules_under_mocked_cpu_features(
    device, flags, installed, expected
) -> None:
    choice = choose_runtime(device, flags, installed)
    assert (choice.runtime, choice.dtype, choice.quantize) == expected
    assert choice.rule


def test_runtime_auto_resolves_before_loading(zoo_dir, monkeypatch) -> None:
    import modsenc.encoder.loading as loading
    from modsenc.runtimes.auto import RuntimeChoice

    monkeypatch.setattr(
        loading, "choose_runtime", lambda device: RuntimeChoice("torch", "fp32", None, "test")
    )
    encoder = ModularEncoder.from_pretrained(zoo_dir, runtime="auto", verify=False)
    assert (encoder.runtime, encoder.precision, encoder.quantization) == ("torch", "fp32", None)
    explicit = ModularEncoder.from_pretrained(zoo_dir, runtime="auto", dtype="bf16", verify=False)
    assert explicit.precision == "bf16"  # an explicit dtype wins over the rule's

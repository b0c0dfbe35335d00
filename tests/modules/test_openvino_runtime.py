"""runtime="openvino": each language's modules merged into one encoder compiled by OpenVINO give the
torch runtime's vectors, routed per sentence, and leave the live model as it was."""

from __future__ import annotations

import numpy as np
import pytest

from modsenc.encoder import ModularEncoder

pytest.importorskip("openvino")

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
    """Converted graphs and compiled blobs go to a folder of this module's, not ~/.cache."""
    folder = tmp_path_factory.mktemp("modsenc_cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MODSENC_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def encoders(zoo_dir):
    torch_encoder = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False, runtime="torch")
    openvino_encoder = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False, runtime="openvino")
    return torch_encoder, openvino_encoder


@pytest.mark.parametrize("mode", ["cross", "mono"])
def test_openvino_gives_the_torch_runtimes_vectors_routed_per_sentence(encoders, mode) -> None:
    # uz: vocab + LA + SE + a GELU CLA; kk: vocab + LA + a ReLU CLA (no exact widening exists, so
    # the CLA runs beside the FFN); en: SE only. One mixed call, interleaved languages.
    torch_encoder, openvino_encoder = encoders
    texts, langs = [], []
    for i in range(3):
        for lang, sentences in TEXTS.items():
            if i < len(sentences):
                texts.append(sentences[i])
                langs.append(lang)
    expected = torch_encoder.encode(texts, lang=langs, mode=mode)
    got = openvino_encoder.encode(texts, lang=langs, mode=mode, batch_size=2)
    assert got.shape == expected.shape == (len(texts), torch_encoder.get_sentence_embedding_dimension())
    assert _cosines(got, expected).min() > 0.9999
    np.testing.assert_allclose(got, expected, atol=1e-3 * np.abs(expected).max())
    assert openvino_encoder.runtime == "openvino"
    assert {key[0] for key in openvino_encoder._runtime._compiled} == {"uz", "kk", "en"}


def test_compiling_a_language_leaves_the_live_model_unchanged(encoders) -> None:
    torch_encoder, openvino_encoder = encoders
    openvino_encoder.load_language("uz")  # whichever test ran first
    before = openvino_encoder.modular.encode(TEXTS["uz"], "uz", {"la", "se", "vocab", "cla"})
    openvino_encoder.encode(TEXTS["uz"], lang="uz")  # compiles uz (cross) if not yet
    after = openvino_encoder.modular.encode(TEXTS["uz"], "uz", {"la", "se", "vocab", "cla"})
    np.testing.assert_array_equal(before, after)
    # the torch runtime merges the modules into a copy (runtimes/torch.py): equal to fp32 rounding
    np.testing.assert_allclose(after, torch_encoder.encode(TEXTS["uz"], lang="uz"), atol=2e-6)


def test_bf16_stays_close_to_fp32_and_unloading_drops_the_compiled_encoder(zoo_dir, encoders) -> None:
    torch_encoder, _ = encoders
    bf16 = ModularEncoder.from_pretrained(zoo_dir, dtype="bf16", verify=False, runtime="openvino")
    got = bf16.encode(TEXTS["uz"] + TEXTS["en"], lang=["uz"] * 3 + ["en"] * 2)
    expected = torch_encoder.encode(TEXTS["uz"] + TEXTS["en"], lang=["uz"] * 3 + ["en"] * 2)
    assert _cosines(got, expected).min() > 0.99
    assert sorted(key[0] for key in bf16._runtime._compiled) == ["en", "uz"]
    bf16.unload_language("uz")
    assert [key[0] for key in bf16._runtime._compiled] == ["en"]


def test_the_runtime_is_checked_before_any_loading(zoo_dir) -> None:
    with pytest.raises(ValueError, match="runtime must be one of torch, openvino, auto, got 'onnx'"):
        ModularEncoder.from_pretrained(zoo_dir, runtime="onnx")
    with pytest.raises(ValueError, match="runs on the CPU; got device cuda"):
        ModularEncoder.from_pretrained(zoo_dir, runtime="openvino", device="cuda")


def test_eval_with_the_openvino_runtime_scores_as_the_torch_runtime(zoo_dir) -> None:
    from modsenc.data.demo import demo_path
    from modsenc.eval.runner import evaluate

    bitext = [str(demo_path("parallel.tsv"))]
    ours = evaluate(zoo_dir, bitext=bitext, runtime="openvino", dtype="fp32")
    reference = evaluate(zoo_dir, bitext=bitext, dtype="fp32", runtime="torch")
    assert (ours["runtime"], ours["precision"], reference["runtime"]) == ("openvino", "fp32", "torch")
    for pair, metrics in reference["bitext"]["parallel.tsv"].items():
        # The test zoo is near random (xsim error about 98%): its margin scores tie to within the
        # 1e-6 by which OpenVINO's fp32 kernels differ from torch's, so a pair may flip either way
        # (one pair is 100/n points; 0.625 of 160). Allow two pairs; the vectors themselves are
        # compared to 1e-3 in the tests above.
        one_pair = 100 / metrics["n"]
        assert ours["bitext"]["parallel.tsv"][pair]["xsim_error"] == pytest.approx(
            metrics["xsim_error"], abs=2 * one_pair + 1e-9
        )
    with pytest.raises(ValueError, match="is a zoo's option"):
        evaluate(demo_path("parallel.tsv").parent, bitext=bitext, runtime="openvino")


def test_openvino_packs_many_sentences_into_rows_as_the_torch_runtime_encodes_them(encoders) -> None:
    # 320 sentences of mixed lengths in one call fill rows of 128 tokens: each
    # sentence must be read back from its own slots (an early layout bug mixed them up).
    from modsenc.data.demo import demo_path

    torch_encoder, openvino_encoder = encoders
    lines = demo_path("parallel.tsv").read_text(encoding="utf-8").splitlines()
    texts = [line.split("\t")[0] for line in lines[1:]]
    from modsenc.runtimes.openvino import pack_rows

    expected = torch_encoder.encode(texts, lang="en")
    got = openvino_encoder.encode(texts, lang="en", batch_size=len(texts))  # one call, mixed lengths
    lengths = [len(ids) for ids in openvino_encoder.tokenize(texts, lang="en").ids]
    assert len(texts) == 320 and len(pack_rows(lengths, 128)) < 100  # several sentences per row
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_pack_rows_fills_rows_first_fit_longest_first() -> None:
    from modsenc.runtimes.openvino import pack_rows

    # capacity max(8, 5) = 8: 5 opens row 0 (room 3), 4 opens row 1 (room 4), 3 fills row 0, 2 joins row 1
    assert pack_rows([5, 3, 4, 2], row_tokens=8) == [[0, 1], [2, 3]]
    # a sentence longer than row_tokens widens every row to its length (capacity 10)
    assert pack_rows([10, 2, 3], row_tokens=4) == [[0], [2, 1]]
    # nearly equal lengths (12 of 12 slots used, at least 90%) keep a sentence per row, longest first
    assert pack_rows([4, 4, 4], row_tokens=8) == [[0], [1], [2]]
    assert pack_rows([9, 10, 9], row_tokens=128) == [[1], [0], [2]]


def test_packed_rows_mask_positions_and_pooling_by_hand() -> None:
    import torch

    from modsenc.backbone.encoder import pool
    from modsenc.backbone.packing import PackedBatch
    from modsenc.runtimes.openvino import PackedRows

    # sentences of 2, 1 and 3 tokens in rows of 4, longest first: sentence 2 opens row 0 (room 1),
    # sentence 0 opens row 1, sentence 1 fills row 0: row 0 = [s2 s2 s2 s1], row 1 = [s0 s0 pad pad]
    rows = PackedRows.build([2, 1, 3], row_tokens=4)
    assert rows.shape == (2, 4)
    positions = PackedBatch.from_ids([[7, 7], [7], [7, 7, 7]], position_offset=2).position_ids
    np.testing.assert_array_equal(rows.place(positions), [[2, 3, 4, 2], [2, 3, 0, 0]])
    np.testing.assert_array_equal(
        rows.attention_mask[0], [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 1]]
    )
    # the padding attends to the padding only, so its softmax rows are not empty
    np.testing.assert_array_equal(
        rows.attention_mask[1], [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]
    )
    # token vectors come in sentence order: sentence 0 = 1, 2; sentence 1 = 10; sentence 2 = 4, 5, 6
    tokens = torch.tensor([[1.0], [2.0], [10.0], [4.0], [5.0], [6.0]])
    placed = rows.place(tokens)
    assert placed[:, :, 0].tolist() == [[4.0, 5.0, 6.0, 10.0], [1.0, 2.0, 0.0, 0.0]]
    # read back into the packed layout, the one pooling reads each sentence's tokens
    batch = PackedBatch.from_ids([[7, 7], [7], [7, 7, 7]])
    assert pool(rows.unpack(placed), batch, "mean")[:, 0].tolist() == [1.5, 10.0, 5.0]
    assert pool(rows.unpack(placed), batch, "cls")[:, 0].tolist() == [1.0, 10.0, 4.0]


def test_rows_longer_than_the_models_positions_encode_each_sentence_as_the_model_does() -> None:
    # A model with 40 positions; the short sentences pack into one row of up to 128 tokens, longer
    # than any position the model has: positions restart per sentence, token types are given.
    import torch
    from transformers import BertConfig, BertModel

    from modsenc.runtimes.openvino import CompiledLanguage, pack_rows

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=60, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=40,
    )  # fmt: skip
    model = BertModel(config, add_pooling_layer=False).eval()
    ids = [[5, 6, 7], [8, 9], list(range(10, 40)), [11, 12, 13, 14], [15] * 25, [16, 17] * 10]
    assert max(sum(len(ids[i]) for i in row) for row in pack_rows([len(x) for x in ids], 128)) > 40
    compiled = CompiledLanguage(model, model.embeddings.word_embeddings, "mean", "fp32", threads=1)
    got = compiled.encode_batch(ids)
    with torch.no_grad():
        alone = [model(input_ids=torch.tensor([seq])).last_hidden_state[0] for seq in ids]
    expected = torch.stack([hidden.mean(0) for hidden in alone])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_restart_reads_the_converted_graph_from_the_cache(
    zoo_dir, graph_cache, monkeypatch, caplog
) -> None:
    """The second encoder neither merges nor converts: its graph comes from the cache, keyed by
    the bundle's file hashes, and gives the same vectors; a cached file that differs from its
    record is not used (converted again)."""
    import modsenc.runtimes.openvino as runtime  # noqa: PLC0415
    from modsenc.runtimes.graph_cache import GRAPH_FILES, GRAPH_RECORD  # noqa: PLC0415

    first = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino")
    expected = first.encode(TEXTS["uz"], lang="uz")
    saved = sorted((graph_cache / "openvino" / "graphs").glob(f"*/{GRAPH_RECORD}"))
    assert saved and all((p.parent / name).is_file() for p in saved for name in GRAPH_FILES)

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(runtime, "_convert", no_conversion)
    again = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino")
    np.testing.assert_array_equal(again.encode(TEXTS["uz"], lang="uz"), expected)

    monkeypatch.undo()
    for record in saved:  # damage every cached weight file
        weights = record.parent / "model.bin"
        data = bytearray(weights.read_bytes())
        data[len(data) // 2] ^= 0xFF
        weights.write_bytes(bytes(data))
    rebuilt = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino")
    np.testing.assert_allclose(rebuilt.encode(TEXTS["uz"], lang="uz"), expected, atol=1e-6)
    assert "a cached OpenVINO graph differs from its record; converting again" in caplog.text


def _graph_folders(cache) -> dict[str, object]:
    """The cached graph folders by the language their record names (None: the backbone's)."""
    import json  # noqa: PLC0415

    folders = {}
    for record in (cache / "openvino" / "graphs").glob("*/graph.json"):
        folders[json.loads(record.read_text())["parts"]["language"]] = record.parent
    return folders


def test_one_process_compiles_a_cached_graph_in_fp32_then_bf16(zoo_dir, tmp_path, monkeypatch) -> None:
    """A graph read from the cache, with no compiled blob yet, compiled in fp32 and then in bf16 in
    one process gives both precisions' vectors (OpenVINO gives both blobs one name, so one shared
    CACHE_DIR handed the bf16 compile the fp32 blob: NaN vectors or a crash)."""
    import shutil  # noqa: PLC0415

    monkeypatch.setenv("MODSENC_CACHE", str(tmp_path))
    texts = TEXTS["uz"] + TEXTS["en"]
    langs = ["uz"] * 3 + ["en"] * 2
    ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False, runtime="openvino").encode(
        texts, lang=langs
    )
    shutil.rmtree(tmp_path / "openvino" / "compiled")
    reference = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False, runtime="torch").encode(
        texts, lang=langs
    )
    for dtype, closeness in (("fp32", 0.9999), ("bf16", 0.99)):
        encoder = ModularEncoder.from_pretrained(zoo_dir, dtype=dtype, verify=False, runtime="openvino")
        got = encoder.encode(texts, lang=langs)
        assert np.isfinite(got).all() and _cosines(got, reference).min() > closeness, dtype
    compiled = sorted(p.relative_to(tmp_path / "openvino" / "compiled").parent.name for p in
                      (tmp_path / "openvino" / "compiled").glob("*/*/compiled.json"))  # fmt: skip
    assert compiled == ["bf16", "bf16", "fp32", "fp32"]  # uz's graph and en's, each precision apart


def test_a_cached_graph_made_for_another_language_is_not_used(zoo_dir, tmp_path, monkeypatch, caplog) -> None:
    """Swapping the cached graph folders of two languages (each record names its own) makes both
    convert again, with one log line each, and encode as before."""
    monkeypatch.setenv("MODSENC_CACHE", str(tmp_path))
    texts, langs = TEXTS["uz"] + TEXTS["en"], ["uz"] * 3 + ["en"] * 2
    expected = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino").encode(
        texts, lang=langs
    )
    folders = _graph_folders(tmp_path)
    uz, en = folders["uz"], folders["en"]
    uz.rename(tmp_path / "swap")
    en.rename(uz)
    (tmp_path / "swap").rename(en)
    again = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino").encode(
        texts, lang=langs
    )
    np.testing.assert_allclose(again, expected, atol=1e-6)
    assert caplog.text.count("a cached OpenVINO graph was made for another key") == 2


def test_a_damaged_compiled_blob_is_compiled_again(zoo_dir, tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("MODSENC_CACHE", str(tmp_path))
    expected = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino").encode(
        TEXTS["uz"], lang="uz"
    )
    blobs = sorted((tmp_path / "openvino" / "compiled").glob("*/fp32/*.blob"))
    assert blobs
    for blob in blobs:
        blob.chmod(0o644)
        data = bytearray(blob.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
        blob.write_bytes(bytes(data))
    again = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", runtime="openvino").encode(
        TEXTS["uz"], lang="uz"
    )
    np.testing.assert_allclose(again, expected, atol=1e-6)
    assert "cached OpenVINO blobs differ from their record; compiling again" in caplog.text


def test_non_finite_vectors_from_the_openvino_runtime_are_its_fault_not_the_bundles(
    zoo_dir, monkeypatch
) -> None:
    import torch  # noqa: PLC0415

    from modsenc.runtimes.openvino import CompiledLanguage  # noqa: PLC0415
    from modsenc.utils.errors import RuntimeFaultError  # noqa: PLC0415

    encoder = ModularEncoder.from_pretrained(zoo_dir, dtype="fp32", verify=False, runtime="openvino")
    monkeypatch.setattr(
        CompiledLanguage, "encode_batch", lambda self, ids: torch.full((len(ids), 32), float("nan"))
    )
    message = "the openvino runtime .fp32. produced non-finite embeddings for uz where the torch runtime"
    with pytest.raises(RuntimeFaultError, match=message + " gives finite ones: the bundle is fine"):
        encoder.encode(TEXTS["uz"], lang="uz")

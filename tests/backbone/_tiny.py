"""Shared builders for the backbone and objective tests: a toy corpus, a tiny SentencePiece
tokenizer and tiny random-weight encoders (hidden 32, 2 layers) that run in milliseconds on CPU."""

from __future__ import annotations

import random
from pathlib import Path

from modsenc.backbone import Backbone
from modsenc.backbone.tokenizer import train_sentencepiece

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "su",
    "ra",
    "te",
    "vo",
    "pi",
    "da",
    "gu",
    "fe",
    "zo",
    "ba",
    "ri",
    "tu",
    "ma",
    "se",
    "ho",
    "ny",
]


def toy_sentences(n: int = 200, seed: int = 0) -> list[str]:
    """``n`` made-up sentences over a 60-word invented vocabulary, 2 to 14 words each."""
    rng = random.Random(seed)
    words = sorted({"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(80)})[
        :60
    ]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 14))) for _ in range(n)]


def train_toy_tokenizer(output_dir: Path):
    return train_sentencepiece(toy_sentences(), output_dir, vocab_size=100)


def tiny_config(model_type: str) -> dict:
    return {
        "model_type": model_type,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        # XLM-R counts positions from pad_token_id + 1 = 2.
        "max_position_embeddings": 66 if model_type != "bert" else 64,
    }


def tiny_backbone(model_type: str, tokenizer, seed: int = 0) -> Backbone:
    backbone = Backbone.from_config(tiny_config(model_type), tokenizer, attention="sdpa", seed=seed)
    return backbone.eval()

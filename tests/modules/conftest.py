from __future__ import annotations

from pathlib import Path

import pytest

from modsenc.backbone import Backbone
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.training.recipe import load_recipe
from tests.backbone._tiny import tiny_config


@pytest.fixture(scope="session")
def tiny_backbone_dir(tmp_path_factory) -> Path:
    """A tiny random XLM-R backbone (with a modsenc manifest) whose vocabulary covers the demo corpus."""
    root = tmp_path_factory.mktemp("tiny_backbone")
    corpus = read_parallel_tsv(demo_path("parallel.tsv"))
    sentences = [s for column in corpus.columns.values() for s in column]
    tokenizer = train_sentencepiece(sentences, root / "tok", vocab_size=600)
    config = tiny_config("xlm-roberta") | {"max_position_embeddings": 130}
    backbone = Backbone.from_config(config, tokenizer, attention="sdpa", seed=0)
    return backbone.save_pretrained(root / "backbone")


def fast_recipe(**extra: str) -> dict:
    """The default add-language recipe, cut down to a few steps per stage."""
    overrides = {
        "vocab.vocab_size": "300",
        "vocab.fasttext_min_count": "1",
        "la.max_steps": "4",
        "la.batch_size": "8",
        "se.epochs": "null",
        "se.max_steps": "3",
        "se.batch_size": "8",
        "cla.epochs": "null",
        "cla.max_steps": "4",
        "cla.batch_size": "8",
        "training.checkpoint_every": "2",
    } | extra
    return load_recipe("add-language", [f"{k}={v}" for k, v in overrides.items()])

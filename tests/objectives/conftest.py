from __future__ import annotations

import pytest

from tests.backbone._tiny import tiny_backbone, toy_sentences, train_toy_tokenizer


@pytest.fixture(scope="session")
def toy_tokenizer(tmp_path_factory):
    return train_toy_tokenizer(tmp_path_factory.mktemp("toy_tokenizer_objectives"))


@pytest.fixture(scope="session")
def corpus():
    return toy_sentences()


@pytest.fixture
def tiny_xlmr(toy_tokenizer):
    """Function-scoped: objective tests take gradients and may touch parameters."""
    return tiny_backbone("xlm-roberta", toy_tokenizer, seed=0)

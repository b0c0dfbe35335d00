from __future__ import annotations

import pytest

from tests.backbone._tiny import tiny_backbone, train_toy_tokenizer


@pytest.fixture(scope="session")
def toy_tokenizer(tmp_path_factory):
    return train_toy_tokenizer(tmp_path_factory.mktemp("toy_tokenizer"))


@pytest.fixture(scope="session")
def tiny_xlmr(toy_tokenizer):
    return tiny_backbone("xlm-roberta", toy_tokenizer, seed=0)


@pytest.fixture(scope="session")
def tiny_bert(toy_tokenizer):
    return tiny_backbone("bert", toy_tokenizer, seed=1)

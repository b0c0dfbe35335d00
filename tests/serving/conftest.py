"""Fixtures shared by the server's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from modsenc.backbone import Backbone
from modsenc.training.add_language import run
from tests._zoo import fast_recipe


def assert_api_error(response, path: str, status: int, code: str, words: str) -> None:
    """``response`` is ``status`` with the error ``code`` and ``words`` in its message, in OpenAI's
    shape under /v1/ (``{"error": {"code", "message"}}``) and TEI's elsewhere (``{"error",
    "error_type"}``)."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    if path.startswith("/v1/"):
        assert error["code"] == code and words in error["message"], error
    else:
        assert response.json()["error_type"] == code and words in error, error


@pytest.fixture(scope="module")
def e5_like_zoo(tiny_backbone_dir, tmp_path_factory) -> Path:
    """A zoo on the tiny backbone given e5's conventions (mean pooling, the ``query: `` prefix):
    English bare (the pivot), Uzbek with its SE adapter and the uz orthography (Cyrillic to Latin)."""
    root = tmp_path_factory.mktemp("e5_like")
    backbone = Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa", pooling="mean", prefix="query: ")
    backbone.save_pretrained(root / "backbone")
    zoo = root / "zoo"
    run("en", fast_recipe(), zoo, backbone_dir=root / "backbone", work_dir=root / "w-en", stages=["none"])
    run("uz", fast_recipe(), zoo, work_dir=root / "w-uz", stages=["se"])
    return zoo

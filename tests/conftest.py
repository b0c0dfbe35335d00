"""Session fixtures shared across test packages: a tiny backbone and a small zoo built from it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from modsenc.backbone import Backbone
from modsenc.backbone.precision import cpu_has_native_bf16
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.training.add_language import run
from tests._zoo import fast_recipe
from tests.backbone._tiny import tiny_config


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """Every test's ``$MODSENC_CACHE`` (rebuilt backbones, OpenVINO graphs and blobs) is a folder of
    this session's, never the user's ``~/.cache/modsenc``; a test may set its own on top. The
    subprocesses tests start inherit it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MODSENC_CACHE", str(tmp_path_factory.mktemp("modsenc_cache")))
        yield


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


@pytest.fixture(scope="session")
def zoo_dir(request, tmp_path_factory) -> Path:
    """en (pivot, SE), uz (all stages; a GELU CLA so the cross export can merge it), kk (vocab, LA,
    parallel-only CLA with adapters' default ReLU), de (vocab, LA).

    With ``MODSENC_TEST_ZOO=DIR`` the zoo is built once into DIR and later sessions reuse it (tests
    only read it): mutation testing runs the export tests once per mutant. Delete DIR whenever
    add-language or this recipe changes.
    """
    cached = os.environ.get("MODSENC_TEST_ZOO")
    root = Path(cached) if cached else tmp_path_factory.mktemp("routing_zoo")
    zoo = root / "zoo"
    if cached and (root / "complete").exists():
        return zoo
    if cached and root.exists():  # a build that did not finish: start over, if it is only ours
        if not {p.name for p in root.iterdir()} <= {"zoo", "w-en", "w-uz", "w-kk", "w-de"}:
            raise FileExistsError(f"MODSENC_TEST_ZOO={root} holds other files; give a new folder")
        shutil.rmtree(root)
    tiny_backbone_dir = request.getfixturevalue("tiny_backbone_dir")
    run("en", fast_recipe(), zoo, backbone_dir=tiny_backbone_dir, work_dir=root / "w-en")
    run("uz", fast_recipe(**{"cla.adapter": "{non_linearity: gelu}"}), zoo, work_dir=root / "w-uz")
    run(
        "kk", fast_recipe(**{"cla.variant": "pl"}), zoo, work_dir=root / "w-kk", stages=["vocab", "la", "cla"]
    )
    run("de", fast_recipe(), zoo, work_dir=root / "w-de", stages=["vocab", "la"])
    if cached:
        (root / "complete").touch()
    return zoo


@pytest.fixture()
def cpu_reports_bf16(monkeypatch):
    """``cpu_reports_bf16(True)``: torch's probes say the CPU has AMX and AVX512_BF16 (False: neither),
    so ``auto`` precision can be tested on any machine."""

    def report(native: bool) -> None:
        cpu_has_native_bf16.cache_clear()
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: native)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)

    yield report
    cpu_has_native_bf16.cache_clear()

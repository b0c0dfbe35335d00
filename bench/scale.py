"""Corpus-scale encode and mine on Ray (`modsenc scale`): throughput, engine overhead, sharded IVF recall.

    python -m bench.scale --zoo runs/zoo-e5b --rows 2000 --mine-n 100000 --sim-n 10000000

1. Encode ``--rows`` sentences (the languages of ``--langs``, round robin, from ../shared/data's
   parallel TSV or the demo corpus) in one process (``ModularEncoder.encode``, ``--threads``
   torch threads) and with ``modsenc scale encode`` on a local Ray cluster with 1 and 2 workers of
   ``--threads`` threads each: rows/s from start to finish (actor start and model load included),
   and the Ray overhead per row (1 worker's wall time minus one process's, per row).
2. Mine ``--mine-n`` x ``--mine-n`` synthetic unit vectors (a share of targets noisy copies of
   sources) with the sharded exact search and the sharded IVF search (2 workers): time, and the
   IVF's recall@1 against exact search (the share of source rows whose nearest target is the same).
3. A simulated ``--sim-n`` x ``--sim-n`` mining run on synthetic vectors (IVF or IVF-PQ by size, 2
   workers, ``--part-rows`` rows per search actor): time and peak memory per search actor.

Prints a Markdown table per part and writes ``--json``. Timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from modsenc.data.demo import demo_path
from modsenc.data.readers import read_parallel_tsv
from modsenc.scale.encode import encode_corpus, write_embeddings
from modsenc.scale.mine import mine_corpus

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "parallel" / "ntrex.tsv"


def sentences(rows: int, langs: list[str]) -> list[str]:
    corpus = read_parallel_tsv(SHARED if SHARED.exists() else demo_path("parallel.tsv")).columns
    pool = [corpus[lang][i] for i in range(len(corpus[langs[0]])) for lang in langs if corpus[lang][i]]
    return [pool[i % len(pool)] for i in range(rows)]


def synthetic(
    n: int, dim: int, seed: int, planted: float = 0.5, noise: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((n, dim), dtype=np.float32)
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt = rng.standard_normal((n, dim), dtype=np.float32)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    chosen = rng.choice(n, size=int(planted * n), replace=False)
    extra = rng.standard_normal((len(chosen), dim), dtype=np.float32)
    tgt[chosen] = src[chosen] + extra * (noise / np.linalg.norm(extra, axis=1, keepdims=True))
    return src, tgt


def bench_encode(args: argparse.Namespace, scratch: Path) -> dict:
    import ray  # noqa: PLC0415
    import torch  # noqa: PLC0415

    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    texts = sentences(args.rows, args.langs.split(","))
    source = scratch / "input.txt"
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    encoder = ModularEncoder.from_pretrained(args.zoo, device="cpu")
    encoder.encode(texts, batch_size=args.batch_size)
    single = time.perf_counter() - started
    out = {"rows": len(texts), "single_process_s": single, "single_rows_per_s": len(texts) / single}
    del encoder
    ray.init(
        num_cpus=2 * args.threads,
        include_dashboard=False,
        logging_level="WARNING",
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}},
    )
    try:
        for workers in (1, 2):
            started = time.perf_counter()
            encode_corpus(
                args.zoo, [source], scratch / f"emb-{workers}", shard_size=args.shard_size,
                batch_size=args.batch_size, workers=workers, threads=args.threads, device="cpu",
            )  # fmt: skip
            wall = time.perf_counter() - started
            out[f"ray_{workers}_s"] = wall
            out[f"ray_{workers}_rows_per_s"] = len(texts) / wall
    finally:
        ray.shutdown()
    out["ray_1_vs_single"] = out["ray_1_rows_per_s"] / out["single_rows_per_s"]
    out["ray_2_vs_1"] = out["ray_2_rows_per_s"] / out["ray_1_rows_per_s"]
    out["overhead_ms_per_row"] = 1000 * (out["ray_1_s"] - single) / len(texts)
    return out


def bench_mine(n: int, dim: int, scratch: Path, name: str, part_rows: int, exact_too: bool) -> dict:
    src, tgt = synthetic(n, dim, seed=n)
    write_embeddings(scratch / f"{name}-src", src, [str(i) for i in range(n)], shard_size=max(1, n // 20))
    write_embeddings(scratch / f"{name}-tgt", tgt, [str(i) for i in range(n)], shard_size=max(1, n // 20))
    del src, tgt
    out: dict = {"n": n, "dim": dim, "part_rows": part_rows}
    runs = [("exact", 10 * n)] if exact_too else []
    for label, exact_limit in [*runs, ("ivf", 0)]:
        stats: dict = {}
        started = time.perf_counter()
        mine_corpus(
            scratch / f"{name}-src", scratch / f"{name}-tgt", scratch / f"{name}-{label}.tsv", workers=2,
            part_rows=part_rows, exact_limit=exact_limit, threshold=1.0, stats=stats,
        )  # fmt: skip
        out[f"{label}_s"] = time.perf_counter() - started
        out[f"{label}_index"] = stats["index"][0]
        out[f"{label}_actor_peak_rss_mb"] = stats["actor_peak_rss_mb"]
        out[f"{label}_top1"] = stats.pop("fwd_ids")
    if exact_too:
        ivf, exact = np.asarray(out["ivf_top1"]), np.asarray(out["exact_top1"])
        out["recall_at_1"] = float((ivf == exact).mean())
        # The rows mining is for: those whose exact nearest target is their own planted copy. On
        # the other (random) rows every target is about as far, so their "nearest" is arbitrary.
        planted = exact == np.arange(n)
        out["planted_rows"] = int(planted.sum())
        out["recall_at_1_planted"] = float((ivf[planted] == exact[planted]).mean())
    out.pop("ivf_top1"), out.pop("exact_top1", None)
    out["driver_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", required=True, help="zoo to encode with")
    parser.add_argument("--langs", default="en,uz,kk")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--shard-size", type=int, default=250)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads, one process and per worker")
    parser.add_argument("--mine-n", type=int, default=100_000)
    parser.add_argument("--sim-n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--part-rows", type=int, default=250_000)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--parts", nargs="+", choices=("encode", "mine", "sim"), default=["encode", "mine", "sim"],
        help="which parts to run (1, 2, 3 above)",
    )  # fmt: skip
    return parser


def _mine_parts(args: argparse.Namespace, scratch: Path, results: dict) -> None:
    """Parts 2 and 3 (exact against IVF mining, and the simulated corpus), on a local Ray."""
    import ray  # noqa: PLC0415

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        if "mine" in args.parts:
            results["mine"] = m = bench_mine(args.mine_n, args.dim, scratch, "mine", args.part_rows, True)
            print(
                "\n| n x n | exact s | IVF s | IVF index | recall@1 of IVF vs exact, all rows "
                "| planted pairs | recall@1 on them |\n|---|---|---|---|---|---|---|"
            )
            print(
                f"| {m['n']:,} | {m['exact_s']:.1f} | {m['ivf_s']:.1f} | {m['ivf_index']} | "
                f"{m['recall_at_1']:.4f} | {m['planted_rows']:,} | {m['recall_at_1_planted']:.4f} |"
            )
        if "sim" in args.parts:
            results["simulated"] = s = bench_mine(args.sim_n, args.dim, scratch, "sim", args.part_rows, False)
            print(
                "\n| n x n | time s | index | rows per search actor | peak MB per search actor "
                "| driver peak MB |"
            )
            print("|---|---|---|---|---|---|")
            print(
                f"| {s['n']:,} | {s['ivf_s']:.1f} | {s['ivf_index']} | {s['part_rows']:,} | "
                f"{s['ivf_actor_peak_rss_mb']:.0f} | {s['driver_peak_rss_mb']:.0f} |"
            )
    finally:
        ray.shutdown()


def main() -> None:
    args = _parser().parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    results: dict = {
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "args": {**vars(args), "json": str(args.json)},  # a copy: vars() is the namespace itself
    }
    with tempfile.TemporaryDirectory(prefix="modsenc-bench-scale-") as scratch:
        if "encode" in args.parts:
            results["encode"] = enc = bench_encode(args, Path(scratch))
            print(
                "| rows | one process rows/s | Ray 1 worker rows/s | Ray 2 workers rows/s | 1 worker / one "
                "process | 2 / 1 workers | Ray overhead ms/row |\n|---|---|---|---|---|---|---|"
            )
            print(
                f"| {enc['rows']} | {enc['single_rows_per_s']:.1f} | {enc['ray_1_rows_per_s']:.1f} | "
                f"{enc['ray_2_rows_per_s']:.1f} | {enc['ray_1_vs_single']:.2f} | {enc['ray_2_vs_1']:.2f} | "
                f"{enc['overhead_ms_per_row']:.2f} |"
            )
        _mine_parts(args, Path(scratch), results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()

"""Mining throughput and memory at scale: N x N embeddings, margin scoring, planted pairs.

    python -m bench.mine --n 1000000 --dim 384

The embeddings are synthetic (random unit vectors; a share of the targets are noisy copies of
sources, the "translations"), because encoding two million sentences would measure the encoder,
not the mining. Reports wall time, sentences/s (source + target sentences per second), peak RSS
and the share of planted pairs recovered among the top-scored pairs.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from modsenc.eval.mining import mine


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="sentences per side")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--planted", type=float, default=0.1, help="share of targets that are translations")
    parser.add_argument("--noise", type=float, default=0.5, help="noise norm relative to a unit vector")
    parser.add_argument("--nprobe", type=int, default=16)
    parser.add_argument("--chunk-size", type=int, default=16384)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    src = rng.standard_normal((args.n, args.dim), dtype=np.float32)
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt = rng.standard_normal((args.n, args.dim), dtype=np.float32)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    planted = rng.choice(args.n, size=int(args.planted * args.n), replace=False)
    noise = rng.standard_normal((len(planted), args.dim), dtype=np.float32)
    noise *= args.noise / np.linalg.norm(noise, axis=1, keepdims=True)
    tgt[planted] = src[planted] + noise
    print(
        f"{args.n:,} x {args.n:,} embeddings of dim {args.dim} ({2 * src.nbytes / 2**30:.2f} GiB), "
        f"{len(planted):,} planted pairs; generated in {time.perf_counter() - t0:.0f} s"
    )

    start = time.perf_counter()
    pairs = mine(src, tgt, chunk_size=args.chunk_size, nprobe=args.nprobe)
    seconds = time.perf_counter() - start
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    top = pairs[: len(planted)]
    found = sum(p.src == p.tgt for p in top)
    print(f"mined {len(pairs):,} pairs in {seconds:.0f} s: {2 * args.n / seconds:,.0f} sentences/s")
    print(f"peak RSS {peak_gib:.2f} GiB")
    print(f"planted pairs among the top {len(planted):,}: {found:,} ({100 * found / len(planted):.1f}%)")


if __name__ == "__main__":
    main()

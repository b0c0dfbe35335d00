"""What `dimensions` (the server's truncation, and `truncate_dim`) costs on e5, which was not trained
for it: Kardeş STS dev Spearman x100 of the shipped zoo's cross-mode vectors cut to their first N
values (cosine re-normalises them, as the server does), for N from 384 down.

A benchmark, not a test: every language pair of the STS file is encoded once at full size through
the shipped zoo (each sentence with its language's modules), then truncated.

    python -m bench.dimensions --dims 384,256,192,128,64
"""

from __future__ import annotations

import argparse
import platform

import numpy as np

from bench.common import lscpu
from modsenc.encoder import ModularEncoder
from modsenc.eval.sts import read_sts_tsv, spearman_x100

STS = "../shared/data/eval-dev/sts/kardes-sts-dev.tsv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", default="384,256,192,128,64")
    parser.add_argument("--sts", default=STS)
    args = parser.parse_args()
    dims = [int(d) for d in args.dims.split(",")]
    encoder = ModularEncoder.from_pretrained(dtype="fp32")  # the shipped zoo
    pairs = read_sts_tsv(args.sts)
    installed = set(encoder.zoo.languages())
    groups = sorted({(p.lang1, p.lang2) for p in pairs if {p.lang1, p.lang2} <= installed})
    rows = {}
    for lang1, lang2 in groups:
        subset = [p for p in pairs if (p.lang1, p.lang2) == (lang1, lang2)]
        a = encoder.encode([p.sentence1 for p in subset], lang=lang1, mode="cross")
        b = encoder.encode([p.sentence2 for p in subset], lang=lang2, mode="cross")
        gold = [p.score for p in subset]
        rows[f"{lang1}-{lang2}"] = [spearman_x100(a[:, :n], b[:, :n], gold) for n in dims]
    model, _ = lscpu()
    print(f"Machine: {model} ({platform.machine()}). `python -m bench.dimensions --dims {args.dims}`\n")
    print("| STS pair | " + " | ".join(f"{n} dims" for n in dims) + " |")
    print("|---|" + "---:|" * len(dims))
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in values) + " |")
    mean = np.mean(list(rows.values()), axis=0)
    print("| mean | " + " | ".join(f"{v:.1f}" for v in mean) + " |")


if __name__ == "__main__":
    main()

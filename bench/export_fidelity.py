"""How close an exported cross-lingual model is to the zoo: each shipped language's cross-mode
export (its ReLU CLA merged as scaled GELU neurons) loaded in plain sentence-transformers, against
the zoo's routed vectors for the same sentences.

A benchmark, not a test. For each language: the Kardeş STS dev sentences of that language (both
columns of its xx-xx and en-xx rows, deduplicated, as many as there are), encoded by
``SentenceTransformer(EXPORT)`` and by ``ModularEncoder.from_pretrained(ZOO).encode(lang=..., mode="cross")``,
both fp32 and L2-normalised; reported: the lowest and mean cosine, and the largest absolute
difference of one coordinate.

    python -m bench.export_fidelity --languages uz,kk,az,ky,ug        # the shipped zoo
"""

from __future__ import annotations

import argparse
import csv
import platform
import tempfile
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from bench.common import lscpu
from modsenc.encoder import ModularEncoder
from modsenc.modules.defaults import shipped_zoo
from modsenc.modules.export import export_sentence_transformer

STS = Path("../shared/data/eval-dev/sts/kardes-sts-dev.tsv")


def _sentences(lang: str) -> list[str]:
    seen: dict[str, None] = {}
    with STS.open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            for side in ("1", "2"):
                if row[f"lang{side}"] == lang:
                    seen.setdefault(row[f"sentence{side}"], None)
    return list(seen)


def _cpu() -> str:
    model, flags = lscpu()
    wanted = [f for f in flags if f.startswith(("avx512", "amx")) or f in ("avx2", "avx_vnni")]
    return f"{model} ({platform.machine()}), flags: {' '.join(sorted(wanted))}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zoo", default=str(shipped_zoo()))
    parser.add_argument("--languages", default="uz,kk,az,ky,ug")
    args = parser.parse_args()
    zoo = ModularEncoder.from_pretrained(args.zoo, device="cpu", dtype="fp32")
    print(f"Machine: {_cpu()}. `python -m bench.export_fidelity --languages {args.languages}`\n")
    print("| language | sentences | lowest cosine | mean cosine | largest coordinate difference |")
    print("|---|---:|---:|---:|---:|")
    for lang in args.languages.split(","):
        texts = _sentences(lang)
        with tempfile.TemporaryDirectory() as tmp:
            out = export_sentence_transformer(args.zoo, lang, Path(tmp) / "export", mode="cross")
            exported = SentenceTransformer(str(out), device="cpu").encode(texts, normalize_embeddings=True)
        routed = zoo.encode(texts, lang=lang, mode="cross", normalize_embeddings=True)
        cosine = (exported * routed).sum(axis=1)
        print(
            f"| {lang} | {len(texts)} | {cosine.min():.6f} | {cosine.mean():.6f} | "
            f"{np.abs(exported - routed).max():.2e} |"
        )


if __name__ == "__main__":
    main()

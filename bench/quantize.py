"""What int8 quantisation (``--quantize int8``) costs and gains on a zoo, float32 and int8 side by side.

    python -m bench.quantize --zoo runs/zoo-e5c --data ../shared/data --work runs/quantize

For the zoo's backbone in float32 and with its linear layers in int8 (torchao, as ``modsenc serve
--quantize int8`` runs it), on the eval-dev sets only:

* STS Spearman x100 on Kardeş STS dev: each installed language's monolingual pair and en-xx;
* bitext xsim error % (LASER margin, k=4), both directions with en: the translations read off
  Kardeş STS dev (as experiments/paper_tables.py does) and PUD for the installed PUD languages;
* cosine of every int8 vector to its float32 vector (each language's Kardeş sentences with their
  language given, mode cross).

Speed is bench/serve.py's (``--int8``): these numbers do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from bench.common import kardes_sts_bitext, write_tsv
from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder
from modsenc.eval.runner import evaluate
from modsenc.eval.sts import row_cosines
from modsenc.modules.bundle import Zoo

SCHEMES = ("none", "int8")


def vectors_of(zoo: Path, scheme: str, columns: dict[str, list[str]]) -> dict[str, np.ndarray]:
    encoder = ModularEncoder.from_pretrained(zoo, device="cpu", quantize=scheme)
    return {lang: encoder.encode(texts, lang=lang, batch_size=32) for lang, texts in columns.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--work", type=Path, default=Path("runs/quantize"), help="Derived eval files.")
    args = parser.parse_args()

    args.work.mkdir(parents=True, exist_ok=True)
    installed = Zoo(args.zoo).languages()
    kardes = args.data / "eval-dev/sts/kardes-sts-dev.tsv"
    kardes_bitext = kardes_sts_bitext(kardes, args.work / "kardes-sts-bitext.tsv")
    pud_columns = read_parallel_tsv(args.data / "eval-dev/bitext/pud.tsv").columns
    pud_langs = [lang for lang in pud_columns if lang != "en" and lang in installed]
    bitext = [kardes_bitext]
    if pud_langs:  # en and the installed languages only (others would go to the fallback's modules)
        pud = args.work / "pud.tsv"
        rows = [list(row) for row in zip(*(pud_columns[lang] for lang in ["en", *pud_langs]))]
        write_tsv(pud, ["en", *pud_langs], rows)
        bitext.append(pud)

    results, vectors = {}, {}
    columns = {
        lang: texts for lang, texts in read_parallel_tsv(kardes_bitext).columns.items() if lang in installed
    }
    for scheme in SCHEMES:
        vectors[scheme] = vectors_of(args.zoo, scheme, columns)
        results[scheme] = evaluate(args.zoo, bitext=bitext, sts=[kardes], quantize=scheme)

    print(f"zoo {args.zoo} ({', '.join(installed)}); float32 vs int8 (torchao, backbone linears only)\n")
    print("| metric | float32 | int8 | int8 - float32 |")
    print("|---|---:|---:|---:|")
    sts = {s: results[s]["sts"][kardes.name]["spearman"] for s in SCHEMES}
    for pair in sts["none"]:
        a, b = pair.split("-")
        if a in installed and b in installed:
            x, y = sts["none"][pair], sts["int8"][pair]
            print(f"| STS {pair} (Kardeş dev) | {x:.1f} | {y:.1f} | {y - x:+.1f} |")
    for file in results["none"]["bitext"]:
        for pair, entry in results["none"]["bitext"][file].items():
            if any(lang not in installed for lang in pair.split("-")):
                continue
            x, y = entry["xsim_error"], results["int8"]["bitext"][file][pair]["xsim_error"]
            print(f"| xsim err. % {pair} ({Path(file).stem}) | {x:.1f} | {y:.1f} | {y - x:+.1f} |")
    cos = np.concatenate([row_cosines(vectors["none"][lang], vectors["int8"][lang]) for lang in columns])
    n = sum(len(t) for t in columns.values())
    print(f"\ncosine int8 to float32 over {n} vectors: mean {cos.mean():.4f}, min {cos.min():.4f}, "
          f"median {statistics.median(cos.tolist()):.4f}")  # fmt: skip


if __name__ == "__main__":
    main()

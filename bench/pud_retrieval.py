"""Quick sanity check of a backbone's cross-lingual space on the PUD dev bitext (1000 sentences).

Prints, for each language paired with English: P@1 of nearest-neighbour retrieval by cosine
(xx -> en) and the mean cosine between non-translations (near 1.0 means the sentence vectors have
collapsed). Not the full xsim evaluation (that is `modsenc eval`'s job).

    python bench/pud_retrieval.py runs/cpu-small/backbone
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from modsenc.backbone import Backbone
from modsenc.data.readers import read_parallel_tsv

DEFAULT_PUD = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "eval-dev" / "bitext" / "pud.tsv"
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("backbone", help="backbone directory (or hub name)")
    parser.add_argument("--pud", type=Path, default=DEFAULT_PUD)
    args = parser.parse_args()

    backbone = Backbone.from_pretrained(args.backbone).eval()
    corpus = read_parallel_tsv(args.pud)
    english = backbone.encode(corpus.columns["en"], normalize_embeddings=True, show_progress_bar=False)
    gold = np.arange(len(english))
    print(f"{args.backbone} on {args.pud.name} ({len(english)} sentences)")
    print("| lang | P@1 xx->en | mean cosine of non-translations |")
    print("|---|---|---|")
    for lang in corpus.languages:
        if lang == "en":
            continue
        other = backbone.encode(corpus.columns[lang], normalize_embeddings=True, show_progress_bar=False)
        similarity = other @ english.T
        p_at_1 = float((similarity.argmax(axis=1) == gold).mean())
        off_diagonal = (similarity.sum() - np.trace(similarity)) / (similarity.size - len(gold))
        print(f"| {lang} | {100 * p_at_1:.1f} | {off_diagonal:.3f} |")


if __name__ == "__main__":
    main()

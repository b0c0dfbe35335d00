"""Retrieval with e5's prompts: queries in one language against passages in another, the passages
encoded with ``"passage: "`` (``encode_document``, e5's convention) or with ``"query: "`` (the one
prefix every text got before prompts, and still ``encode``'s default).

The first ``--rows`` rows of NTREX (not in any bundle's training data): each ``--query-lang``
sentence (``encode_query``: ``"query: "``) must find its translation among the ``--doc-lang``
ones by cosine. P@1 and MRR, through the zoo's modules (``--mode``) and through the backbone alone.
Prints a Markdown table and the CPU (lscpu's model name and flags of note).

    nice .venv/bin/python -m bench.prompts                  # the shipped zoo, en -> uz, 500 rows
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from bench.common import RELEVANT_FLAGS, lscpu
from modsenc.data.readers import read_parallel_tsv
from modsenc.encoder import ModularEncoder

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "parallel" / "ntrex.tsv"
# (row label, passages' prompt): e5's own, and the single prefix of before
PASSAGE_PROMPTS = (("passage: (encode_document)", "passage: "), ("query: (encode's default)", "query: "))


def retrieval_scores(scores: torch.Tensor) -> tuple[float, float]:
    """P@1 and MRR (both in %) of a (queries, passages) score matrix whose gold is its diagonal."""
    gold = scores.diagonal().unsqueeze(1)
    ranks = (scores > gold).sum(dim=1) + 1  # ties go to the gold passage
    return 100 * float((ranks == 1).float().mean()), 100 * float((1.0 / ranks.float()).mean())


def measure(
    encoder: ModularEncoder, queries: list[str], passages: list[str], args: argparse.Namespace
) -> list[tuple[str, str, float, float]]:
    """(route, passages' prompt, P@1, MRR) for each route and passage prompt."""
    rows = []
    for route, q_lang, d_lang, mode in (
        (f"zoo ({args.mode})", args.query_lang, args.doc_lang, args.mode),
        ("backbone alone", "backbone", "backbone", "cross"),
    ):
        common = {"mode": mode, "batch_size": args.batch_size, "convert_to_tensor": True}
        q = encoder.encode_query(queries, lang=q_lang, **common)
        for label, prompt in PASSAGE_PROMPTS:
            d = encoder.encode_document(passages, lang=d_lang, prompt=prompt, **common)
            rows.append((route, label, *retrieval_scores(encoder.similarity(q, d))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--zoo", type=Path, default=None, help="default: the shipped zoo")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="multi-parallel TSV")
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--query-lang", default="en")
    parser.add_argument("--doc-lang", default="uz")
    parser.add_argument("--mode", default="cross", choices=("cross", "mono"))
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    corpus = read_parallel_tsv(args.data, [args.query_lang, args.doc_lang])
    queries = corpus.columns[args.query_lang][: args.rows]
    passages = corpus.columns[args.doc_lang][: args.rows]
    encoder = ModularEncoder.from_pretrained(args.zoo, device="cpu")
    started = time.perf_counter()
    rows = measure(encoder, queries, passages, args)
    model, flags = lscpu()
    print(
        f"{len(queries)} {args.query_lang} queries (`query: `) against {len(passages)} {args.doc_lang} "
        f"passages, first rows of {args.data.name}; zoo {encoder.zoo.root}, {encoder.precision}, "
        f"{torch.get_num_threads()} threads, {time.perf_counter() - started:.0f} s"
    )
    print(f"CPU: {model}; flags of note: {' '.join(f for f in RELEVANT_FLAGS if f in flags) or 'none'}")
    print()
    print("| route | passages' prompt | P@1 | MRR |")
    print("|---|---|---:|---:|")
    for route, label, p_at_1, mrr in rows:
        print(f"| {route} | {label} | {p_at_1:.1f} | {mrr:.1f} |")


if __name__ == "__main__":
    main()

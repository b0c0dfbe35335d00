"""What does int8 on the openvino runtime cost, language by language, and which scheme keeps it?

Scores the shipped zoo on the report part of the held-out columns of bench/shipped_zoo.py (Kardeş
STS dev: xx-xx in ``mono`` mode, en-xx in ``cross`` mode; Kardeş bitext and NTREX xsim in
``cross``) through the torch runtime in fp32 (the reference), the openvino runtime in bf16 (what
``auto`` runs on a CPU with native bf16), and the three NNCF schemes around bf16
(modsenc/runtimes/int8.py): static ``int8``, ``int8-mixed`` (each FFN's output projection kept
float) and weight-only ``int8-weights``; the static ones calibrated as a user's would be (the
bundle's calibration.txt, or for an older bundle the demo corpus: modsenc/runtimes/calibration.py).
Then each arm's cosine to the reference's vectors on the language's side of the same Kardeş
bitext. Writes the marked block of docs/results/int8.md.

    python -m bench.int8_quality --languages uz,kk,az,ky,ug
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.common import Runner, columns, heldout, machine, read_tsv, replace_section
from modsenc.eval.sts import row_cosines

MARK_BEGIN = "<!-- int8 quality: written by bench/int8_quality.py -->"
MARK_END = "<!-- end of int8 quality -->"
# (name, eval options)
ARMS = (
    ("torch fp32", ["--runtime", "torch", "--dtype", "fp32"]),
    ("openvino bf16", ["--runtime", "openvino", "--dtype", "bf16"]),
    ("openvino int8", ["--runtime", "openvino", "--dtype", "bf16", "--quantize", "int8"]),
    ("openvino int8-mixed", ["--runtime", "openvino", "--dtype", "bf16", "--quantize", "int8-mixed"]),
    ("openvino int8-weights", ["--runtime", "openvino", "--dtype", "bf16", "--quantize", "int8-weights"]),
)
# The written bound a scheme must keep for ``runtime="auto"`` to consider it (issue 52): a mean
# cosine of at least 0.999 to fp32 and every STS column within 0.3 points of fp32.
MIN_COSINE, MAX_STS_COST = 0.999, 0.3


def evaluate(args: argparse.Namespace, run: Runner, langs: tuple[str, ...]) -> dict[str, dict]:
    work = Path(args.work)
    sts, bitexts = heldout(work, Path(args.data), langs, args.part)
    (work / "eval").mkdir(parents=True, exist_ok=True)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    results = {}
    for name, options in ARMS:
        for mode in ("cross", "mono"):
            out = work / "eval" / f"{name.replace(' ', '-')}-{mode}-{'-'.join(langs)}.json"
            cmd = ["eval", args.zoo, "--sts", str(sts), "--json", str(out), "--overwrite", "--mode", mode]
            for spec in bitexts if mode == "cross" else []:
                cmd += ["--bitext", spec]
            run("eval", [*cmd, *options], out, work / "logs" / f"{out.stem}.log")
            results[f"{name}|{mode}"] = json.loads(out.read_text())
    return results


def cosines(args: argparse.Namespace, langs: tuple[str, ...]) -> dict[str, dict[str, np.ndarray]]:
    """{arm: {lang: each sentence's cosine to torch fp32}} on the language's side of the Kardeş
    bitext ``heldout`` wrote (the same part), encoded in cross mode with the language given."""
    from modsenc.encoder import ModularEncoder  # noqa: PLC0415

    tag = "-".join(langs) + (f".{args.part}" if args.part else "")
    bitext = Path(args.work, "evaldata", f"kardes-bitext.{tag}.tsv")  # written by heldout()
    header, rows = read_tsv(bitext)
    texts = {lang: [row[header.index(lang)] for row in rows] for lang in langs}
    vectors: dict[str, dict[str, np.ndarray]] = {}
    for name, options in ARMS:
        settings = dict(zip(options[::2], options[1::2]))
        encoder = ModularEncoder.from_pretrained(
            args.zoo,
            runtime=settings["--runtime"],
            dtype=settings["--dtype"],
            quantize=settings.get("--quantize"),
        )
        vectors[name] = {lang: encoder.encode(texts[lang], lang=lang, mode="cross") for lang in langs}
    reference = vectors["torch fp32"]
    return {
        name: {lang: row_cosines(found[lang], reference[lang]) for lang in langs}
        for name, found in vectors.items()
    }


def table(results: dict, closeness: dict[str, dict[str, np.ndarray]], lang: str) -> tuple[list[str], str]:
    """The language's table, and its verdict: the fastest-to-run scheme inside the bound, if any."""
    cols = columns(lang)
    lines = [
        f"**{lang}**",
        "",
        "| arm | cosine to fp32 mean / min | " + " | ".join(c[0] for c in cols) + " |",
    ]
    lines.append("|---" * (len(cols) + 2) + "|")
    reference = [get(results[f"torch fp32|{mode}"]) for _, mode, get, _ in cols]
    kept = []
    for name, _ in ARMS:
        cells = [get(results[f"{name}|{mode}"]) for _, mode, get, _ in cols]
        shown = [
            "–" if v is None else f"{v:.1f}" + ("" if name == "torch fp32" else f" ({v - r:+.1f})")
            for v, r in zip(cells, reference)
        ]
        c = closeness[name][lang]
        lines.append(f"| {name} | {c.mean():.5f} / {c.min():.5f} | " + " | ".join(shown) + " |")
        sts_costs = [
            r - v
            for (header, *_), v, r in zip(cols, cells, reference)
            if header.startswith("STS") and v is not None
        ]
        if "int8" in name and c.mean() >= MIN_COSINE and max(sts_costs, default=0.0) <= MAX_STS_COST:
            kept.append(name)
    verdict = ", ".join(kept) if kept else "none"
    return lines + ["", f"int8 schemes inside the bound for {lang}: {verdict}", ""], verdict


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--work", default="runs/int8-eval")
    parser.add_argument("--zoo", default="modsenc/adapters_zoo")
    parser.add_argument("--languages", default="uz,kk,az,ky,ug")
    parser.add_argument("--out", default="docs/results/int8.md")
    parser.add_argument(
        "--part", default="report", choices=["report", "selection"], help="which part of the dev files"
    )
    args = parser.parse_args()
    langs = tuple(x.strip() for x in args.languages.split(",") if x.strip())
    run = Runner()
    results = evaluate(args, run, langs)
    closeness = cosines(args, langs)
    body = [MARK_BEGIN, "", f"Machine: {machine()}. The dev files' {args.part} part. Commands:", "", "```"]
    body += [*run.commands["eval"], "```", ""]
    body += [
        "Differences in brackets are against torch fp32 (STS: Spearman x100; xsim: error %). The "
        f"bound: cosine mean >= {MIN_COSINE} and every STS column within {MAX_STS_COST} of fp32.",
        "",
    ]
    for lang in langs:
        lines, _ = table(results, closeness, lang)
        body += lines
    body.append(MARK_END)
    replace_section(Path(args.out), MARK_BEGIN, MARK_END, "\n".join(body) + "\n")
    print("\n".join(body))


if __name__ == "__main__":
    main()
